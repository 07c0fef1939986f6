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
// PATH. The first use on a machine creates the virtualenv "spark"
// (internal/pyvenv) and installs Requirements into it from PyPI (pyspark
// brings Spark itself).
package sparktest

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/doppio-db/doppio/internal/pyvenv"
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
	*pyvenv.Venv
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
	return &Env{Venv: pyvenv.Prepare(t, "spark", Requirements), Root: root}
}

// Python runs a script under the virtualenv's interpreter with Spark's
// environment and returns its standard output; a failure fails the test
// with the script's output.
func (e *Env) Python(t testing.TB, args ...string) string {
	t.Helper()
	return e.Run(t, e.Bin("python"), e.sparkEnv(), args...)
}

// Build runs spark/doppio_build.py with args through spark-submit in local
// mode with two worker threads and returns what it printed.
func (e *Env) Build(t testing.TB, args ...string) string {
	t.Helper()
	return e.Run(t, e.Bin("spark-submit"), e.sparkEnv(), e.submitArgs(2, "1g", args...)...)
}

// Submit returns a command running spark/doppio_build.py with args
// through spark-submit in local mode, with threads worker threads and
// memory for the driver (which runs the tasks in local mode): for
// programs that are not tests (the benchmarks).
func (e *Env) Submit(ctx context.Context, threads int, memory string, args ...string) *exec.Cmd {
	return e.Command(ctx, e.Bin("spark-submit"), e.sparkEnv(), e.submitArgs(threads, memory, args...)...)
}

func (e *Env) submitArgs(threads int, memory string, args ...string) []string {
	return append([]string{
		"--master", fmt.Sprintf("local[%d]", threads),
		"--driver-memory", memory,
		"--conf", "spark.ui.enabled=false",
		"--conf", "spark.ui.showConsoleProgress=false",
		"--conf", "spark.sql.session.timeZone=UTC",
		filepath.Join(e.Root, "spark", "doppio_build.py"),
	}, args...)
}

// sparkEnv makes Spark's workers use the venv's interpreter and bind the
// driver to loopback (a machine's host name may not resolve).
func (e *Env) sparkEnv() []string {
	py := e.Bin("python")
	return []string{"PYSPARK_PYTHON=" + py, "PYSPARK_DRIVER_PYTHON=" + py, "SPARK_LOCAL_IP=127.0.0.1"}
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
