// Package pyvenv prepares the Python virtualenvs that tests run real
// Python tools in (Spark, pyarrow and duckdb, the Python client, a schema
// registry): one per named set of pinned requirements, created once per
// machine under os.UserCacheDir()/doppio and reused after.
//
// In a test:
//
//	v := pyvenv.Prepare(t, "export", "pyarrow==26.0.1\nduckdb==2.0.1\n")
//	out := v.Python(t, "script.py", args...)  // or v.Run(t, v.Bin("pytest"), ...)
//
// The directory's name carries a digest of the requirements and the
// interpreter, so a change to either makes a new virtualenv. Concurrent
// test processes wait on a file lock for one install (internal/cachefill);
// a machine without Python's venv module (Debian splits it out) gets it
// from the distribution first. Later uses touch neither the network nor
// pip.
package pyvenv

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/doppio-db/doppio/internal/cachefill"
)

// Venv is a prepared virtualenv.
type Venv struct {
	// Dir is the virtualenv's directory.
	Dir string
}

// completeMark is written into a virtualenv once its install succeeded: a
// directory without it is a failed or interrupted install, redone.
const completeMark = "doppio-complete"

// installTimeout bounds one install (pip over a slow registry included).
const installTimeout = 15 * time.Minute

// Prepare returns the virtualenv named name holding requirements (the
// lines of a pip requirements file, pinned), installing it first if
// needed; a failure fails the test.
func Prepare(t testing.TB, name, requirements string) *Venv {
	t.Helper()
	dir, err := prepare(name, requirements)
	if err != nil {
		t.Fatalf("pyvenv: %v", err)
	}
	return &Venv{Dir: dir}
}

// Open is Prepare for programs that are not tests (the benchmarks): it
// returns the same cached virtualenv, or the error that kept it from
// being made.
func Open(name, requirements string) (*Venv, error) {
	dir, err := prepare(name, requirements)
	if err != nil {
		return nil, fmt.Errorf("pyvenv: %w", err)
	}
	return &Venv{Dir: dir}, nil
}

// Bin returns the path of an executable the virtualenv installed.
func (v *Venv) Bin(name string) string { return filepath.Join(v.Dir, "bin", name) }

// Python runs the virtualenv's interpreter with args and returns its
// standard output; a failure fails the test with the script's output.
func (v *Venv) Python(t testing.TB, args ...string) string {
	t.Helper()
	return v.Run(t, v.Bin("python"), nil, args...)
}

// Command returns a command running bin with the virtualenv's bin first
// on PATH and env added to the environment; it dies with the test process.
func (v *Venv) Command(ctx context.Context, bin string, env []string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = append(os.Environ(), "PATH="+filepath.Join(v.Dir, "bin")+":"+os.Getenv("PATH"), "VIRTUAL_ENV="+v.Dir)
	cmd.Env = append(cmd.Env, env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	return cmd
}

// Run runs bin (see Command) and returns its standard output; a failure
// fails the test with its output.
func (v *Venv) Run(t testing.TB, bin string, env []string, args ...string) string {
	t.Helper()
	cmd := v.Command(context.Background(), bin, env, args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("pyvenv: %s %s: %v\nstdout:\n%s\nstderr:\n%s", filepath.Base(bin), strings.Join(args, " "), err, Tail(stdout.String(), 60), Tail(stderr.String(), 60))
	}
	return stdout.String()
}

// Tail returns the last n lines of s.
func Tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

func prepare(name, requirements string) (string, error) {
	python, err := exec.LookPath("python3")
	if err != nil {
		if err := aptInstall("python3", "python3-venv"); err != nil {
			return "", fmt.Errorf("python3 not found on PATH and not installable: %w", err)
		}
		if python, err = exec.LookPath("python3"); err != nil {
			return "", err
		}
	}
	version, err := exec.Command(python, "-c", "import sys; print(sys.executable, sys.version)").Output()
	if err != nil {
		return "", fmt.Errorf("running %s: %w", python, err)
	}
	cache, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("no cache directory for the %s virtualenv: %w", name, err)
	}
	sum := sha256.Sum256([]byte(requirements + string(version)))
	dir := filepath.Join(cache, "doppio", name+"-venv-"+hex.EncodeToString(sum[:6]))
	done := func() bool {
		_, err := os.Stat(filepath.Join(dir, completeMark))
		return err == nil
	}
	if err := cachefill.Fill(dir+".lock", done, func() error { return install(python, dir, requirements) }); err != nil {
		return "", err
	}
	return dir, nil
}

func install(python, dir, requirements string) error {
	if err := os.RemoveAll(dir); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), installTimeout)
	defer cancel()
	if err := run(ctx, python, "-m", "venv", dir); err != nil {
		os.RemoveAll(dir)
		if aerr := aptInstall("python3-venv"); aerr != nil {
			return fmt.Errorf("%v; installing python3-venv: %v", err, aerr)
		}
		if err := run(ctx, python, "-m", "venv", dir); err != nil {
			return err
		}
	}
	reqs := dir + ".requirements.txt"
	if err := os.WriteFile(reqs, []byte(requirements), 0o644); err != nil {
		return err
	}
	pip := filepath.Join(dir, "bin", "pip")
	if err := run(ctx, pip, "install", "--disable-pip-version-check", "-q", "-r", reqs); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, completeMark), nil, 0o644)
}

// aptInstall installs Debian packages (the machine's package registry is
// reachable; the index may be stale, so it is updated first).
func aptInstall(pkgs ...string) error {
	ctx, cancel := context.WithTimeout(context.Background(), installTimeout)
	defer cancel()
	if err := run(ctx, "apt-get", "update"); err != nil {
		return err
	}
	return run(ctx, "apt-get", append([]string{"install", "-y", "--no-install-recommends"}, pkgs...)...)
}

func run(ctx context.Context, bin string, args ...string) error {
	var out bytes.Buffer
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("%s %s: %w\n%s", bin, strings.Join(args, " "), err, Tail(out.String(), 40))
	}
	return nil
}
