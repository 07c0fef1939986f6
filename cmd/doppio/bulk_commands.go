package main

import (
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"time"

	"github.com/doppio-db/doppio/client"
	"github.com/dustin/go-humanize"
	"github.com/spf13/cobra"
)

// bulkCommand is `doppio bulk`: offline builds, their loads into a
// serving cluster, and following the loads.
func bulkCommand(f *clientFlags) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "bulk",
		Short: "Build partition-aligned files offline, load them into serving tables, follow the loads",
	}
	cmd.AddCommand(bulkBuildCommand(f), bulkLoadCommand(f), bulkStatusCommand(f), bulkCancelCommand(f))
	return cmd
}

func bulkLoadCommand(f *clientFlags) *cobra.Command {
	var (
		mode     string
		throttle byteSize
		wait     bool
	)
	cmd := &cobra.Command{
		Use:   "load DIR|URL [--mode merge|replace] [--throttle 50MB] [--wait]",
		Short: "Load a build (a directory every node can read, or an http(s) URL) into its table",
		Long: "Tells the cluster where the build is; each partition's leader fetches its file,\n" +
			"checks its checksum, and applies it while the table serves. --mode merge (the default):\n" +
			"loaded documents replace those with the same key, and a write applied after a chunk\n" +
			"is kept. --mode replace: each partition swaps the table's documents for the loaded\n" +
			"ones at one point of its timeline; writes before it are replaced, writes after it kept.\n" +
			"Loading the same build\n" +
			"again answers the load as it is. Interrupting --wait leaves the load running:\n" +
			"follow it with `doppio bulk status ID`.",
		Args: cobra.ExactArgs(1),
		RunE: runE(func(cmd *cobra.Command, args []string) error {
			src := args[0]
			if !strings.Contains(src, "://") {
				abs, err := filepath.Abs(src)
				if err != nil {
					return err
				}
				src = abs
			}
			c := f.client()
			l, started, err := c.StartLoad(cmd.Context(), client.LoadRequest{Source: src, Mode: mode, Throttle: int64(throttle)})
			if err != nil {
				return err
			}
			verb := "started"
			if !started {
				verb = "already " + l.State
			}
			fmt.Fprintf(cmd.ErrOrStderr(), "load %s of %s.%s: %s\n", l.ID, l.Database, l.Table, verb)
			if !wait {
				fmt.Fprintln(cmd.OutOrStdout(), l.ID)
				return nil
			}
			return followLoad(cmd, c, l.ID)
		}),
	}
	cmd.Flags().StringVar(&mode, "mode", "merge", "merge: loaded documents replace those with the same key; replace: the table's documents are swapped for the loaded ones, per partition")
	cmd.Flags().Var(&throttle, "throttle", "bytes per second each node applies of this load, e.g. 50MB (0 = the node's --bulk-throttle)")
	cmd.Flags().BoolVar(&wait, "wait", false, "show the load's progress until it ends")
	return cmd
}

func bulkStatusCommand(f *clientFlags) *cobra.Command {
	var wait bool
	cmd := &cobra.Command{
		Use:   "status [ID] [--wait]",
		Short: "Show the loads, or one load's progress per partition",
		Args:  cobra.MaximumNArgs(1),
		RunE: runE(func(cmd *cobra.Command, args []string) error {
			c := f.client()
			if len(args) == 1 {
				if wait {
					return followLoad(cmd, c, args[0])
				}
				l, err := c.GetLoad(cmd.Context(), args[0])
				if err != nil {
					return err
				}
				printLoad(cmd.OutOrStdout(), l, false)
				return nil
			}
			ls, err := c.ListLoads(cmd.Context())
			if err != nil {
				return err
			}
			w := cmd.OutOrStdout()
			if len(ls) == 0 {
				fmt.Fprintln(w, "no loads")
			}
			for _, l := range ls {
				fmt.Fprintf(w, "%s  %s.%s  %-9s  %s\n", l.ID, l.Database, l.Table, l.State, loadTotals(l))
			}
			return nil
		}),
	}
	cmd.Flags().BoolVar(&wait, "wait", false, "redraw the load's progress until it ends")
	return cmd
}

func bulkCancelCommand(f *clientFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "cancel ID",
		Short: "Cancel a load: partitions not started never start, those loading finish",
		Args:  cobra.ExactArgs(1),
		RunE: runE(func(cmd *cobra.Command, args []string) error {
			l, err := f.client().CancelLoad(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			printLoad(cmd.OutOrStdout(), l, false)
			return nil
		}),
	}
}

// followLoad prints a load's progress until it ends (redrawn in place on
// a terminal, a line a second otherwise) and fails unless it is done.
func followLoad(cmd *cobra.Command, c *client.Client, id string) error {
	w := cmd.OutOrStdout()
	tty := isTerminal(w)
	lines := 0
	for {
		l, err := c.GetLoad(cmd.Context(), id)
		if err != nil {
			return err
		}
		ended := l.State == client.LoadDone || l.State == client.LoadCancelled || l.State == client.LoadFailed
		switch {
		case tty:
			if lines > 0 {
				fmt.Fprintf(w, "\033[%dA", lines)
			}
			lines = printLoad(w, l, true)
		case ended:
			printLoad(w, l, false)
		default:
			fmt.Fprintf(w, "%s  %s\n", l.State, loadTotals(l))
		}
		if ended {
			if l.State != client.LoadDone {
				return fmt.Errorf("load %s %s%s", l.ID, l.State, errSuffix(l.Error))
			}
			return nil
		}
		select {
		case <-cmd.Context().Done():
			return cmd.Context().Err()
		case <-time.After(time.Second):
		}
	}
}

func errSuffix(e string) string {
	if e == "" {
		return ""
	}
	return ": " + e
}

// printLoad writes the load's header and one line per partition, with
// progress bars when bars is set, and returns the lines written.
func printLoad(w io.Writer, l client.Load, bars bool) int {
	eol := "\n"
	if bars {
		eol = "\033[K\n"
	}
	fmt.Fprintf(w, "load %s  %s.%s (schema version %d, %s) from %s%s", l.ID, l.Database, l.Table, l.SchemaVersion, l.Mode, l.Source, eol)
	state := l.State
	if l.Cancelled && state != client.LoadCancelled {
		state += " (cancelling)"
	}
	fmt.Fprintf(w, "%-9s %s  %s%s%s", state, bar(bars, l.Bytes, l.TotalBytes), loadTotals(l), errSuffix(l.Error), eol)
	for _, p := range l.Partitions {
		staging := ""
		if p.Staging != "" {
			staging = "  staging " + p.Staging
		}
		fmt.Fprintf(w, "  %4d  %-8s %s  %s / %s  %d / %d records  %s%s%s%s", p.Partition, p.State, bar(bars, p.Bytes, p.TotalBytes),
			humanize.Bytes(p.Bytes), humanize.Bytes(p.TotalBytes), p.Records, p.TotalRecords, p.Node, staging, errSuffix(p.Error), eol)
	}
	return 2 + len(l.Partitions)
}

func bar(on bool, done, total uint64) string {
	f := 1.0
	if total > 0 {
		f = float64(done) / float64(total)
	}
	if !on {
		return fmt.Sprintf("%3.0f%%", f*100)
	}
	return fmt.Sprintf("%s %3.0f%%", progressBar(f, 30), f*100)
}

func loadTotals(l client.Load) string {
	s := fmt.Sprintf("%s / %s, %d / %d records, %d / %d partitions done", humanize.Bytes(l.Bytes), humanize.Bytes(l.TotalBytes),
		l.Records, l.TotalRecords, l.PartitionsDone, l.TotalPartitions)
	if l.Discarding > 0 {
		s += fmt.Sprintf(", staging of %d partitions to discard", l.Discarding)
	}
	return s
}
