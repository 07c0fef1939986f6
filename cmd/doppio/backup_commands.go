package main

import (
	"context"
	"errors"
	"fmt"
	"os/signal"
	"syscall"
	"time"

	"github.com/doppio-db/doppio/internal/backupdir"
	"github.com/spf13/cobra"
)

// backupCommands are `doppio backup DB --to DIR` and `doppio restore --from DIR`.
func backupCommands(f *clientFlags) []*cobra.Command {
	var (
		to       string
		full     bool
		parallel int
	)
	bk := &cobra.Command{
		Use:   "backup DB --to DIR",
		Short: "Back up a database while it serves: full, or incremental to the last backup in DIR",
		Long: `Write a consistent backup of every partition of DB (sstables read by each
partition's leader at one point, with its SCN) to DIR/{id}/, with a manifest
holding the database's schemas. If DIR holds a backup of DB already, the new
one is incremental to the newest: it carries only what changed since (a
partition whose change log no longer reaches back is copied whole, and the
output says so). --full forces a full backup.`,
		Args: cobra.ExactArgs(1),
		RunE: runE(func(cmd *cobra.Command, args []string) error {
			if to == "" {
				return errors.New("--to DIR is required")
			}
			if parallel < 1 {
				return fmt.Errorf("--parallel %d: want at least 1", parallel)
			}
			o, ctx, stop := backupOptions(cmd, f, parallel)
			defer stop()
			m, err := backupdir.Take(ctx, o, args[0], to, full)
			if err != nil {
				return err
			}
			kind := "full"
			if m.IncrementalTo != "" {
				kind = "incremental to " + m.IncrementalTo
			}
			fmt.Fprintf(cmd.OutOrStdout(), "backup %s of %s: %s, %d partitions, %d bytes\n", m.ID, m.Database, kind, m.Partitions, m.Bytes())
			return nil
		}),
	}
	bk.Flags().StringVar(&to, "to", "", "backup directory")
	bk.Flags().BoolVar(&full, "full", false, "take a full backup even if DIR holds an earlier one")
	bk.Flags().IntVar(&parallel, "parallel", 2, "partitions backed up at a time")

	var (
		from string
		ro   backupdir.RestoreOptions
	)
	rs := &cobra.Command{
		Use:   "restore --from DIR [--backup ID] [--as DB]",
		Short: "Restore a backup (and its incremental chain) into a new or empty database",
		Long: `Restore backup ID of DIR (default: the newest) into a new or empty database
(default: the backup's own name; --as another). Every file of the chain is
checked against its manifest and every partition of an existing database must
be empty before anything changes. The database and its tables are created
with the backup's schemas if missing; each partition is then loaded through
its Raft group, so every replica holds it, and continues at the backup's SCN.
Any node count and placement will do; the partition count is the backup's.
A restore interrupted and run again starts the unfinished partitions over.`,
		Args: cobra.NoArgs,
		RunE: runE(func(cmd *cobra.Command, args []string) error {
			if from == "" {
				return errors.New("--from DIR is required")
			}
			if parallel < 1 {
				return fmt.Errorf("--parallel %d: want at least 1", parallel)
			}
			if ro.Replicas < 0 {
				return fmt.Errorf("--replicas %d: want a positive count", ro.Replicas)
			}
			o, ctx, stop := backupOptions(cmd, f, parallel)
			defer stop()
			m, err := backupdir.Restore(ctx, o, from, ro)
			if err != nil {
				return err
			}
			db := ro.As
			if db == "" {
				db = m.Database
			}
			fmt.Fprintf(cmd.OutOrStdout(), "restored backup %s of %s into %s: %d partitions\n", m.ID, m.Database, db, m.Partitions)
			return nil
		}),
	}
	rs.Flags().StringVar(&from, "from", "", "backup directory")
	rs.Flags().StringVar(&ro.Backup, "backup", "", "backup id (default: the newest in DIR)")
	rs.Flags().StringVar(&ro.As, "as", "", "database to restore into (default: the backup's)")
	rs.Flags().IntVar(&ro.Replicas, "replicas", 0, "replicas of a database the restore creates (default: the backup's)")
	rs.Flags().IntVar(&parallel, "parallel", 2, "partitions restored at a time")
	return []*cobra.Command{bk, rs}
}

// backupOptions wires the client flags and progress output (stderr).
func backupOptions(cmd *cobra.Command, f *clientFlags, parallel int) (backupdir.Options, context.Context, context.CancelFunc) {
	server, _ := cmd.Flags().GetString("server")
	retry, _ := cmd.Flags().GetDuration("retry")
	if !cmd.Flags().Changed("retry") {
		retry = time.Minute // a new database's partitions elect their leaders meanwhile
	}
	errOut := cmd.ErrOrStderr()
	o := backupdir.Options{Server: server, HTTP: f.httpClient(), Retry: retry, Parallel: parallel, Progress: func(p backupdir.Progress) {
		if p.Note != "" {
			fmt.Fprintf(errOut, "%d/%d partitions, %d bytes: %s\n", p.PartitionsDone, p.Partitions, p.Bytes, p.Note)
		}
	}}
	ctx, stop := signal.NotifyContext(cmd.Context(), syscall.SIGINT, syscall.SIGTERM)
	return o, ctx, stop
}
