package main

import (
	"bytes"
	"flag"
	"os"
	"regexp"
	"testing"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

var update = flag.Bool("update", false, "rewrite docs/reference/cli.md from the command definitions")

// TestCLIReferenceIsUpToDate: docs/reference/cli.md is what the command
// definitions generate (go generate ./cmd/doppio rewrites it).
func TestCLIReferenceIsUpToDate(t *testing.T) {
	var buf bytes.Buffer
	writeReference(&buf, newRoot())
	if *update {
		if err := os.WriteFile(referencePath, buf.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	committed, err := os.ReadFile(referencePath)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(committed, buf.Bytes()) {
		t.Fatalf("docs/reference/cli.md is out of date: run go generate ./cmd/doppio and commit it")
	}
}

// placeholder is how a value name is written in a help line: `FILE`.
var placeholder = regexp.MustCompile("^[A-Z][A-Z0-9_./]*$")

// TestEveryFlagHasAHelpLineAndAPlainValueName: each flag of each command
// says what it does, and a back-quoted word in its help is a value name
// (--server URL), never a command that `--help` would print as one.
func TestEveryFlagHasAHelpLineAndAPlainValueName(t *testing.T) {
	var walk func(*cobra.Command)
	walk = func(c *cobra.Command) {
		c.Flags().VisitAll(func(fl *pflag.Flag) {
			if fl.Usage == "" {
				t.Errorf("%s --%s has no help line", c.CommandPath(), fl.Name)
			}
			name, _ := pflag.UnquoteUsage(fl)
			if bytes.IndexByte([]byte(fl.Usage), '`') >= 0 && !placeholder.MatchString(name) {
				t.Errorf("%s --%s renders as --%s %s in --help", c.CommandPath(), fl.Name, fl.Name, name)
			}
		})
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(newRoot())
}
