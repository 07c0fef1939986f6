package main

import (
	"context"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"time"

	"github.com/dustin/go-humanize"
	"github.com/spf13/cobra"

	"github.com/doppio-db/doppio/client"
)

// derivedCommand is `doppio derived`: pushing versions of derived tables,
// swapping them in, rolling them back, following them.
func derivedCommand(f *clientFlags) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "derived",
		Short: "Push versions of read-only derived tables from builds, swap them in, roll them back",
	}
	move := func(use, short string, call func(*client.Client, context.Context, string, string) (client.DerivedTable, error)) *cobra.Command {
		return &cobra.Command{
			Use: use + " DB/TABLE", Short: short, Args: cobra.ExactArgs(1),
			RunE: runE(func(cmd *cobra.Command, args []string) error {
				db, table, err := splitTable(args[0])
				if err != nil {
					return err
				}
				t, err := call(f.client(), cmd.Context(), db, table)
				if err != nil {
					return err
				}
				printDerived(cmd.OutOrStdout(), t, false)
				return nil
			}),
		}
	}
	cmd.AddCommand(derivedPushCommand(f), derivedStatusCommand(f),
		move("swap", "Make the staged version current", (*client.Client).SwapVersion),
		move("rollback", "Make the previous version current again", (*client.Client).RollbackVersion),
		move("roll-forward", "Undo a rollback", (*client.Client).RollForwardVersion),
		derivedDiscardCommand(f))
	return cmd
}

func splitTable(arg string) (string, string, error) {
	db, table, ok := strings.Cut(arg, "/")
	if !ok || db == "" || table == "" {
		return "", "", fmt.Errorf("%q is not DB/TABLE", arg)
	}
	return db, table, nil
}

func derivedPushCommand(f *clientFlags) *cobra.Command {
	var (
		from     string
		throttle byteSize
		noSwap   bool
		retain   int
		detach   bool
	)
	cmd := &cobra.Command{
		Use:   "push DB/TABLE --from DIR|URL [--no-swap] [--throttle 50MB] [--retain N] [--detach]",
		Short: "Push the next version of a derived table from a build (doppio bulk build)",
		Long: "Every replica fetches its partition's part of the build while the current version\n" +
			"serves; once every replica holds it, the version becomes current for the whole table\n" +
			"in one step (with --no-swap it stays staged: `doppio derived swap`). Shows the\n" +
			"progress until then; interrupting it (or --detach) leaves the push running.",
		Args: cobra.ExactArgs(1),
		RunE: runE(func(cmd *cobra.Command, args []string) error {
			db, table, err := splitTable(args[0])
			if err != nil {
				return err
			}
			if from == "" {
				return fmt.Errorf("--from is required: the build's directory or URL")
			}
			if !strings.Contains(from, "://") {
				if from, err = filepath.Abs(from); err != nil {
					return err
				}
			}
			c := f.client()
			t, err := c.PushVersion(cmd.Context(), db, table, client.DerivedPush{Source: from, Throttle: int64(throttle), NoSwap: noSwap, Retain: retain})
			if err != nil {
				return err
			}
			v := t.Versions[len(t.Versions)-1]
			fmt.Fprintf(cmd.ErrOrStderr(), "version %d of %s.%s: fetching from %s\n", v.Version, db, table, v.Source)
			if detach {
				fmt.Fprintln(cmd.OutOrStdout(), v.Version)
				return nil
			}
			return followVersion(cmd, c, db, table, v.Version)
		}),
	}
	cmd.Flags().StringVar(&from, "from", "", "the build: a directory every node can read, or an http(s) URL")
	cmd.Flags().Var(&throttle, "throttle", "bytes per second each node applies of this version, e.g. 50MB (0 = the node's --bulk-throttle)")
	cmd.Flags().BoolVar(&noSwap, "no-swap", false, "stage the version without making it current")
	cmd.Flags().IntVar(&retain, "retain", 0, "how many versions the table keeps from now on (0 = unchanged; 2 by default)")
	cmd.Flags().BoolVar(&detach, "detach", false, "print the version number and return at once")
	return cmd
}

func derivedDiscardCommand(f *clientFlags) *cobra.Command {
	var version int
	cmd := &cobra.Command{
		Use:   "discard DB/TABLE [--version N]",
		Short: "Delete a staged version (pushed with --no-swap) without swapping it in",
		Long: "The staged version is deleted from every replica and can no longer be read;\n" +
			"its number is not reused. Only a staged version is discarded.",
		Args: cobra.ExactArgs(1),
		RunE: runE(func(cmd *cobra.Command, args []string) error {
			db, table, err := splitTable(args[0])
			if err != nil {
				return err
			}
			t, err := f.client().DiscardVersion(cmd.Context(), db, table, version)
			if err != nil {
				return err
			}
			printDerived(cmd.OutOrStdout(), t, false)
			return nil
		}),
	}
	cmd.Flags().IntVar(&version, "version", 0, "the staged version to discard (default: the staged one)")
	return cmd
}

func derivedStatusCommand(f *clientFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "status DB/TABLE",
		Short: "Show a derived table's versions, their states and progress per partition",
		Args:  cobra.ExactArgs(1),
		RunE: runE(func(cmd *cobra.Command, args []string) error {
			db, table, err := splitTable(args[0])
			if err != nil {
				return err
			}
			t, err := f.client().DerivedStatus(cmd.Context(), db, table)
			if err != nil {
				return err
			}
			printDerived(cmd.OutOrStdout(), t, false)
			return nil
		}),
	}
}

// followVersion prints a pushed version's progress until it is current
// (staged, when it does not swap), redrawn in place on a terminal, and
// fails if it failed.
func followVersion(cmd *cobra.Command, c *client.Client, db, table string, version int) error {
	w := cmd.OutOrStdout()
	tty := isTerminal(w)
	lines := 0
	for {
		t, err := c.DerivedStatus(cmd.Context(), db, table)
		if err != nil {
			return err
		}
		var v client.DerivedVersion
		for _, x := range t.Versions {
			if x.Version == version {
				v = x
			}
		}
		done := v.State == client.VersionCurrent || v.State == client.VersionBackup || (v.State == client.VersionStaged && !v.Swap)
		failed := v.State == "" || v.State == client.VersionFailed || v.State == client.VersionDeleting
		switch {
		case tty:
			if lines > 0 {
				fmt.Fprintf(w, "\033[%dA", lines)
			}
			lines = printDerived(w, t, true)
		case done || failed:
			printDerived(w, t, false)
		default:
			fmt.Fprintf(w, "version %d %s  %s\n", version, v.State, versionTotals(v))
		}
		if failed {
			return fmt.Errorf("version %d of %s.%s failed%s", version, db, table, errSuffix(v.Error))
		}
		if done {
			return nil
		}
		select {
		case <-cmd.Context().Done():
			return cmd.Context().Err()
		case <-time.After(time.Second):
		}
	}
}

// printDerived writes a table's versions, one line each and a line per
// partition of those fetching or being deleted, and returns the lines
// written.
func printDerived(w io.Writer, t client.DerivedTable, bars bool) int {
	eol := "\n"
	if bars {
		eol = "\033[K\n"
	}
	announced := ""
	if !t.Announced {
		announced = " (not yet served by every node)"
	}
	fmt.Fprintf(w, "%s.%s  current version %d, keeps %d%s%s", t.Database, t.Table, t.Current, t.Retain, announced, eol)
	lines := 1
	for _, v := range t.Versions {
		fmt.Fprintf(w, "  %4d  %-8s %s  %s  from %s%s%s", v.Version, v.State, bar(bars, v.Bytes, v.TotalBytes), versionTotals(v), v.Source, errSuffix(v.Error), eol)
		lines++
		for _, p := range v.Partitions {
			fmt.Fprintf(w, "        p%-4d %-8s %s  %s / %s  %d / %d replicas ready%s", p.Partition, p.State, bar(bars, p.Bytes, p.TotalBytes),
				humanize.Bytes(p.Bytes), humanize.Bytes(p.TotalBytes), p.Ready, p.Replicas, eol)
			lines++
		}
	}
	return lines
}

func versionTotals(v client.DerivedVersion) string {
	return fmt.Sprintf("%s / %s, %d / %d records", humanize.Bytes(v.Bytes), humanize.Bytes(v.TotalBytes), v.Records, v.TotalRecords)
}
