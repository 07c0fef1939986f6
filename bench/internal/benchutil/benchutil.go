// Package benchutil holds what the benchmark commands share besides
// clusters: flag helpers, the machine's description, PNG output.
package benchutil

import (
	"flag"
	"os"
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

// CommandLine is the command that reproduces this run: run (e.g. "go run
// ./bench/expand") and the arguments given.
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
