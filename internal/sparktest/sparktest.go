// Package sparktest runs the repository's Spark build job
// (spark/doppio_build.py) for tests, in Spark's local mode, under a Python
// virtualenv that it prepares once per machine.
//
// In a test:
//
//	env := sparktest.Prepare(t)             // the cached virtualenv
//	out := env.Build(t, "--db", "D", ...)   // spark-submit the job
//	env.Python(t, "script.py", args...)     // run a helper under the venv
//
// # What it needs
//
// python3 (3.9 or newer, with its venv module) and Java 17 or newer on
// PATH. The first use on a machine creates a virtualenv under
// os.UserCacheDir()/doppio/spark-venv-<digest> and installs Requirements
// into it from PyPI (pyspark brings Spark itself); the digest covers the
// requirements and the interpreter, so a change to either makes a new
// one. Concurrent test processes wait on a file lock for one install;
// later uses touch neither the network nor pip.
package sparktest

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/doppio-db/doppio/internal/cachefill"
)

// Requirements are the Python packages the job and the tests' input
// writers need, pinned so every machine builds with the same ones.
const Requirements = `pyspark==4.3.0
xxhash==4.1.0
fastavro==1.13.1
pyarrow==26.0.1
`

// Env is a prepared virtualenv and the repository whose job it runs.
type Env struct {
	// Venv is the virtualenv's directory.
	Venv string
	// Root is the repository's root (the directory holding go.mod).
	Root string
}

// Prepare returns the cached virtualenv, creating it first if needed.
func Prepare(t testing.TB) *Env {
	t.Helper()
	root, err := repoRoot()
	if err != nil {
		t.Fatalf("sparktest: %v", err)
	}
	venv, err := venvDir()
	if err != nil {
		t.Fatalf("sparktest: %v", err)
	}
	return &Env{Venv: venv, Root: root}
}

// Python runs a script under the virtualenv's interpreter and returns its
// standard output; a failure fails the test with the script's output.
func (e *Env) Python(t testing.TB, args ...string) string {
	t.Helper()
	return e.run(t, filepath.Join(e.Venv, "bin", "python"), args...)
}

// Build runs spark/doppio_build.py with args through spark-submit in local
// mode with two worker threads and returns what it printed.
func (e *Env) Build(t testing.TB, args ...string) string {
	t.Helper()
	submit := []string{
		"--master", "local[2]",
		"--driver-memory", "1g",
		"--conf", "spark.ui.enabled=false",
		"--conf", "spark.ui.showConsoleProgress=false",
		"--conf", "spark.sql.session.timeZone=UTC",
		filepath.Join(e.Root, "spark", "doppio_build.py"),
	}
	return e.run(t, filepath.Join(e.Venv, "bin", "spark-submit"), append(submit, args...)...)
}

func (e *Env) run(t testing.TB, bin string, args ...string) string {
	t.Helper()
	cmd := exec.Command(bin, args...)
	py := filepath.Join(e.Venv, "bin", "python")
	// Spark's workers must use the venv's interpreter, and a machine's
	// host name may not resolve: the driver binds to loopback.
	cmd.Env = append(os.Environ(), "PYSPARK_PYTHON="+py, "PYSPARK_DRIVER_PYTHON="+py,
		"SPARK_LOCAL_IP=127.0.0.1", "PATH="+filepath.Join(e.Venv, "bin")+":"+os.Getenv("PATH"))
	// The JVM (spark-submit execs it) dies with the test, however it dies.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("sparktest: %s %s: %v\nstdout:\n%s\nstderr:\n%s", filepath.Base(bin), strings.Join(args, " "), err, stdout.String(), tail(stderr.String(), 60))
	}
	return stdout.String()
}

func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

// repoRoot finds the directory holding go.mod from the working directory
// up (a test runs in its package's directory).
func repoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		up := filepath.Dir(dir)
		if up == dir {
			return "", fmt.Errorf("no go.mod above the working directory")
		}
		dir = up
	}
}

// completeMark is written into a virtualenv once its install succeeded: a
// directory without it is a failed or interrupted install, redone.
const completeMark = "doppio-complete"

// venvDir returns the virtualenv's directory, installing it under a file
// lock when it is absent or incomplete. A virtualenv cannot be moved, so
// it is built where it stays.
func venvDir() (string, error) {
	python, err := exec.LookPath("python3")
	if err != nil {
		return "", fmt.Errorf("python3 not found on PATH (the Spark job's tests need Python 3.9 or newer): %w", err)
	}
	version, err := exec.Command(python, "-c", "import sys; print(sys.executable, sys.version)").Output()
	if err != nil {
		return "", fmt.Errorf("running %s: %w", python, err)
	}
	cache, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("no cache directory for the Spark virtualenv: %w", err)
	}
	sum := sha256.Sum256([]byte(Requirements + string(version)))
	venv := filepath.Join(cache, "doppio", "spark-venv-"+hex.EncodeToString(sum[:6]))
	done := func() bool { return complete(venv) }
	if err := cachefill.Fill(venv+".lock", done, func() error { return install(python, venv) }); err != nil {
		return "", err
	}
	return venv, nil
}

func complete(venv string) bool {
	_, err := os.Stat(filepath.Join(venv, completeMark))
	return err == nil
}

func install(python, venv string) error {
	if err := os.RemoveAll(venv); err != nil {
		return err
	}
	reqs := venv + ".requirements.txt"
	if err := os.WriteFile(reqs, []byte(Requirements), 0o644); err != nil {
		return err
	}
	steps := [][]string{
		{python, "-m", "venv", venv},
		{filepath.Join(venv, "bin", "pip"), "install", "--disable-pip-version-check", "-q", "-r", reqs},
	}
	for _, s := range steps {
		var out bytes.Buffer
		cmd := exec.Command(s[0], s[1:]...)
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Run(); err != nil {
			return fmt.Errorf("preparing the Spark virtualenv in %s: %s: %w\n%s", venv, strings.Join(s, " "), err, tail(out.String(), 40))
		}
	}
	return os.WriteFile(filepath.Join(venv, completeMark), nil, 0o644)
}
