package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestQuickRunAgainstDoppio runs the benchmark end to end against a real
// Doppio node and Bleve behind its HTTP server at quick sizes: load, the
// brute-force check of both queries, every mix without errors, and the
// report (with Doppio's ratios to Bleve) and plot written.
func TestQuickRunAgainstDoppio(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a Doppio node and runs a few thousand requests; skipped with -short")
	}
	sets := quickSets()
	a, b := sets["A"], sets["B"]
	a.Mailboxes, a.Sessions = 10, 8
	b.Messages, b.Sessions = 500, 4
	out := t.TempDir()
	cfg := config{
		Systems:  []string{"doppio", "bleve-http"},
		Sets:     []setSpec{a, b},
		Clients:  4,
		Seed:     7,
		Mixes:    []int{0, 50, 100},
		Warmup:   20,
		Out:      out,
		WorkDir:  t.TempDir(),
		Parts:    4,
		Command:  "cd bench && go test ./mailbox",
		Progress: t.Logf,
	}
	if err := runBenchmark(context.Background(), cfg); err != nil {
		t.Fatal(err)
	}
	md, err := os.ReadFile(filepath.Join(out, "mailbox.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"## Set A: 10 mailboxes of 100 messages", "## Set B: 2 mailboxes of 500 messages", "| 100% | Doppio |", "| 100% | Bleve over HTTP |", "Doppio/Bleve over HTTP all |"} {
		if !strings.Contains(string(md), want) {
			t.Errorf("mailbox.md lacks %q:\n%s", want, md)
		}
	}
	if fi, err := os.Stat(filepath.Join(out, "mailbox.png")); err != nil || fi.Size() < 1000 {
		t.Errorf("mailbox.png: %v, %v", fi, err)
	}
}
