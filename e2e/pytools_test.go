package e2e

import (
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
)

// exportReaders are the Python packages that read exports in the tests:
// readers nobody here wrote, pinned so that a cached environment is
// reused until the list changes.
var exportReaders = []string{"pyarrow==26.0.1", "duckdb==2.0.1", "fastavro==1.13.1"}

// exportPython returns the python of a virtualenv holding exportReaders,
// created (python3 -m venv, pip install from PyPI) under the user's cache
// directory on first use and reused after; concurrent test processes wait
// on a lock file for the one that installs.
func exportPython(t *testing.T) string {
	t.Helper()
	cache, err := os.UserCacheDir()
	if err != nil {
		t.Fatalf("no cache directory for the Python readers: %v", err)
	}
	sum := sha256.Sum256([]byte(strings.Join(exportReaders, "\n")))
	dir := filepath.Join(cache, "doppio", "export-venv-"+hex.EncodeToString(sum[:6]))
	python := filepath.Join(dir, "bin", "python")
	ready := filepath.Join(dir, ".ready")
	if _, err := os.Stat(ready); err == nil {
		return python
	}
	if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
		t.Fatal(err)
	}
	lock, err := os.OpenFile(dir+".lock", os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		t.Fatal(err)
	}
	defer syscall.Flock(int(lock.Fd()), syscall.LOCK_UN)
	if _, err := os.Stat(ready); err == nil {
		return python // another process installed it meanwhile
	}
	os.RemoveAll(dir)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	start := time.Now()
	run := func(args ...string) error {
		out, err := exec.CommandContext(ctx, args[0], args[1:]...).CombinedOutput()
		if err != nil {
			return fmt.Errorf("%s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return nil
	}
	if err := run("python3", "-m", "venv", dir); err != nil {
		// A machine without Python's venv module (Debian splits it out):
		// install it from the distribution, then try again.
		t.Logf("%v; installing python3-venv", err)
		os.RemoveAll(dir)
		for _, args := range [][]string{{"apt-get", "update"}, {"apt-get", "install", "-y", "python3", "python3-venv"}, {"python3", "-m", "venv", dir}} {
			if err := run(args...); err != nil {
				os.RemoveAll(dir)
				t.Fatal(err)
			}
		}
	}
	if err := run(append([]string{python, "-m", "pip", "install", "--disable-pip-version-check", "--quiet"}, exportReaders...)...); err != nil {
		os.RemoveAll(dir)
		t.Fatal(err)
	}
	if err := os.WriteFile(ready, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("installed %s into %s in %s", strings.Join(exportReaders, " "), dir, time.Since(start).Round(time.Second))
	return python
}
