// Package bulkbuild runs the two bulk builders for the benchmarks, timed:
// `doppio bulk build` (the Go builder) and the Spark job
// (spark/doppio_build.py) in Spark's local mode, and checks that their
// builds agree, as docs/design/bulk.md requires.
package bulkbuild

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"strings"
	"time"

	"github.com/doppio-db/doppio/internal/bulk"
	"github.com/doppio-db/doppio/internal/pyvenv"
	"github.com/doppio-db/doppio/internal/sparktest"

	"github.com/doppio-db/doppio/bench/internal/benchutil"
)

// Go runs `binary bulk build args…` and returns how long it took.
func Go(ctx context.Context, binary string, args ...string) (time.Duration, error) {
	return timed(exec.CommandContext(ctx, binary, append([]string{"bulk", "build"}, args...)...))
}

// PrepareSpark returns the Spark job's virtualenv, installing it from
// PyPI the first time on a machine (the tests' cached one, internal/sparktest).
func PrepareSpark() (*sparktest.Env, error) {
	v, err := pyvenv.Open("spark", sparktest.Requirements)
	if err != nil {
		return nil, err
	}
	root, err := benchutil.RepoRoot()
	if err != nil {
		return nil, err
	}
	return &sparktest.Env{Venv: v, Root: root}, nil
}

// Spark runs the Spark job with args in local mode with threads worker
// threads and memory for the driver, and returns how long it took
// (Spark's start included: a user pays it too).
func Spark(ctx context.Context, env *sparktest.Env, threads int, memory string, args ...string) (time.Duration, error) {
	return timed(env.Submit(ctx, threads, memory, args...))
}

func timed(cmd *exec.Cmd) (time.Duration, error) {
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	start := time.Now()
	err := cmd.Run()
	took := time.Since(start)
	if err != nil {
		return took, fmt.Errorf("%s: %w\n%s", strings.Join(cmd.Args, " "), err, pyvenv.Tail(out.String(), 40))
	}
	return took, nil
}

// Same reads the manifests of builds a and b and returns the first, or
// an error naming the first difference in what they hold: records,
// rejects and each partition file's checksum.
func Same(a, b string) (*bulk.Manifest, error) {
	ma, err := bulk.ReadManifest(a)
	if err != nil {
		return nil, err
	}
	mb, err := bulk.ReadManifest(b)
	if err != nil {
		return nil, err
	}
	switch {
	case ma.Records != mb.Records || ma.Rejected != mb.Rejected:
		return ma, fmt.Errorf("%s holds %d records (%d rejected), %s %d (%d rejected)", a, ma.Records, ma.Rejected, b, mb.Records, mb.Rejected)
	case len(ma.Files) != len(mb.Files):
		return ma, fmt.Errorf("%s has %d partition files, %s %d", a, len(ma.Files), b, len(mb.Files))
	}
	for i, f := range ma.Files {
		if f.SHA256 != mb.Files[i].SHA256 {
			return ma, fmt.Errorf("partition %d differs: %s in %s, %s in %s", f.Partition, f.SHA256, a, mb.Files[i].SHA256, b)
		}
	}
	return ma, nil
}

// Bytes is the size of a build's partition files.
func Bytes(m *bulk.Manifest) int64 {
	var n int64
	for _, f := range m.Files {
		n += f.Bytes
	}
	return n
}
