package main

import (
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/doppio-db/doppio/client"
	"github.com/spf13/cobra"
)

func schemaStatusCommand(f *clientFlags) *cobra.Command {
	var (
		wait     bool
		interval time.Duration
	)
	cmd := &cobra.Command{
		Use:   "status DB/Table [--wait]",
		Short: "Show how far each index of a table is built, with a progress bar",
		Long: "Prints one line per index: field, kind, a progress bar, documents done of total and\n" +
			"the state. With --wait, redraws until every index is ready.",
		Args: cobra.ExactArgs(1),
		RunE: runE(func(cmd *cobra.Command, args []string) error {
			db, table, ok := strings.Cut(args[0], "/")
			if !ok || db == "" || table == "" {
				return fmt.Errorf("give DB/Table")
			}
			c := f.client()
			out := cmd.OutOrStdout()
			// Only a terminal redraws in place; a pipe or file gets each
			// new state once, without escape codes.
			redraw := wait && isTerminal(out)
			lines, last := 0, ""
			for {
				t, err := c.GetTable(cmd.Context(), db, table)
				if err != nil {
					return err
				}
				var now strings.Builder
				n := printIndexes(&now, t, redraw)
				if now.String() != last {
					if lines > 0 && redraw {
						fmt.Fprintf(out, "\033[%dA", lines) // redraw in place
					}
					fmt.Fprint(out, now.String())
					lines, last = n, now.String()
				}
				if !wait || allReady(t) {
					return nil
				}
				select {
				case <-cmd.Context().Done():
					return cmd.Context().Err()
				case <-time.After(interval):
				}
			}
		}),
	}
	cmd.Flags().BoolVar(&wait, "wait", false, "redraw until every index is ready")
	cmd.Flags().DurationVar(&interval, "interval", 500*time.Millisecond, "redraw interval with --wait")
	return cmd
}

func allReady(t client.Table) bool {
	for _, ix := range t.Indexes {
		if ix.State != "ready" {
			return false
		}
	}
	return true
}

// printIndexes writes one line per index and returns how many lines;
// redraw clears each line's old end for drawing in place.
func printIndexes(w io.Writer, t client.Table, redraw bool) int {
	eol := "\n"
	if redraw {
		eol = "\033[K\n"
	}
	if len(t.Indexes) == 0 {
		fmt.Fprintf(w, "%s/%s (version %d) has no indexes\n", t.Database, t.Name, t.Version)
		return 1
	}
	width := 0
	for _, ix := range t.Indexes {
		width = max(width, len(ix.Field))
	}
	for _, ix := range t.Indexes {
		fmt.Fprintf(w, "%-*s  %-9s  %s %3.0f%%  %d/%d  %s%s", width, ix.Field, ix.Kind, progressBar(ix.Progress, 30), ix.Progress*100, ix.Done, ix.Total, ix.State, eol)
	}
	return len(t.Indexes)
}

// isTerminal reports whether w is a terminal (a character device).
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

func progressBar(fraction float64, width int) string {
	n := int(fraction*float64(width) + 0.5)
	n = min(max(n, 0), width)
	return "[" + strings.Repeat("#", n) + strings.Repeat("-", width-n) + "]"
}
