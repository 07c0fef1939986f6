// Package benchutil holds what the benchmark commands share besides
// clusters: flag helpers, the machine's description, where PostgreSQL
// is installed, PNG output.
package benchutil

import (
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
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
