// Package benchutil holds what the benchmark commands share besides
// clusters: flag helpers, the machine's description, where PostgreSQL
// is installed, PNG output.
package benchutil

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"

	"gonum.org/v1/plot/vg/vgimg"
)

// SplitList splits a comma-separated flag value, dropping empty items.
func SplitList(s string) []string {
	var out []string
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}

// FlagSet reports whether the command line set the flag named name.
func FlagSet(name string) bool {
	set := false
	flag.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}

// CommandLine is the command that reproduces this run: run (e.g. "cd
// bench && go run ./expand") and the arguments given.
func CommandLine(run string) string {
	return strings.Join(append([]string{run}, os.Args[1:]...), " ")
}

// WritePNG writes the canvas to path as a PNG.
func WritePNG(img *vgimg.Canvas, path string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := (vgimg.PngCanvas{Canvas: img}).WriteTo(f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// RepoRoot is the doppio repository holding the bench module (the parent
// of its go.mod): harnesses build the binary and write their reports
// there wherever in the module they are run from.
func RepoRoot() (string, error) {
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		return "", err
	}
	mod := strings.TrimSpace(string(out))
	if filepath.Base(filepath.Dir(mod)) != "bench" || filepath.Base(mod) != "go.mod" {
		return "", fmt.Errorf("not inside the bench module (cd bench): go env GOMOD = %q", mod)
	}
	return filepath.Dir(filepath.Dir(mod)), nil
}

// InRepo resolves a relative report path against RepoRoot, so the
// default docs/benchmarks is the repository's.
func InRepo(path string) (string, error) {
	if filepath.IsAbs(path) {
		return path, nil
	}
	root, err := RepoRoot()
	if err != nil {
		return "", err
	}
	return filepath.Join(root, path), nil
}

// WriteJSONLines creates path and writes to it, one a line, the JSON
// encodings of the values each emits; it returns the bytes written.
func WriteJSONLines(path string, each func(emit func(v any) error) error) (int64, error) {
	f, err := os.Create(path)
	if err != nil {
		return 0, err
	}
	w := bufio.NewWriterSize(f, 1<<20)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	if err := each(enc.Encode); err != nil {
		f.Close()
		return 0, err
	}
	if err := w.Flush(); err != nil {
		f.Close()
		return 0, err
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return 0, err
	}
	return fi.Size(), f.Close()
}

// ParseInts parses a comma-separated list of positive integers.
func ParseInts(s string) ([]int, error) {
	var out []int
	for _, f := range SplitList(s) {
		n, err := strconv.Atoi(f)
		if err != nil || n < 1 {
			return nil, fmt.Errorf("%q is not a positive integer", f)
		}
		out = append(out, n)
	}
	return out, nil
}

// Unset calls, for each named flag the command line did not set, its
// function: how a -quick run's smaller sizes give way to explicit flags.
func Unset(defaults map[string]func()) {
	for name, set := range defaults {
		if !FlagSet(name) {
			set()
		}
	}
}

// Cluster is a cluster's size in a scale benchmark: nodes in three
// zones, partitions of three replicas.
type Cluster struct{ Nodes, Partitions int }

// Replicas is the cluster's partition replicas.
func (c Cluster) Replicas() int { return 3 * c.Partitions }

// ParseClusters reads a comma-separated list of nodes x partitions
// ("100x3334,1000x33334").
func ParseClusters(s string) ([]Cluster, error) {
	var out []Cluster
	for _, c := range SplitList(s) {
		n, p, ok := strings.Cut(c, "x")
		nodes, err1 := strconv.Atoi(n)
		parts, err2 := strconv.Atoi(p)
		if !ok || err1 != nil || err2 != nil || nodes < 1 || parts < 1 {
			return nil, fmt.Errorf("%q is not nodes x partitions", c)
		}
		out = append(out, Cluster{nodes, parts})
	}
	return out, nil
}
