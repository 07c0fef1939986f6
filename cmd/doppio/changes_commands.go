package main

import (
	"context"
	"errors"
	"fmt"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/doppio-db/doppio/client"
	"github.com/doppio-db/doppio/client/changes"
	"github.com/spf13/cobra"
)

// changesCommand is `doppio changes tail DB`: the change stream as NDJSON
// on stdout, resumed from its last checkpoint when the connection drops.
func changesCommand(f *clientFlags) *cobra.Command {
	cmd := &cobra.Command{Use: "changes", Short: "Read a database's change stream"}
	var (
		tables, partitions, from string
		bootstrap, checkpoints   bool
		count                    int
	)
	tail := &cobra.Command{
		Use:   "tail DB",
		Short: "Print DB's committed changes as they happen, one JSON event per line",
		Long: `Print DB's change stream (GET /_changes/DB) as NDJSON: one event per line
with its SCN, partition, table, key, op, before and after images, txnEnd and
checkpoint. Pass an event's checkpoint to --from to resume right after it.
A dropped connection is resumed from the last checkpoint for as long as
--retry allows.`,
		Args: cobra.ExactArgs(1),
		RunE: runE(func(cmd *cobra.Command, args []string) error {
			o := changes.Options{From: from, Bootstrap: bootstrap}
			if tables != "" {
				o.Tables = strings.Split(tables, ",")
			}
			if partitions != "" {
				for _, s := range strings.Split(partitions, ",") {
					n, err := strconv.Atoi(s)
					if err != nil {
						return fmt.Errorf("--partitions: %q is not a partition number", s)
					}
					o.Partitions = append(o.Partitions, n)
				}
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), syscall.SIGINT, syscall.SIGTERM)
			defer stop()
			// The loop below is the retry: it resumes from the last
			// checkpoint, which the client's own retry could not.
			c := f.client().At(f.server, client.WithRetry(0))
			return tailChanges(ctx, cmd, c, args[0], o, f.retry, checkpoints, count)
		}),
	}
	fl := tail.Flags()
	fl.StringVar(&tables, "tables", "", "comma-separated tables (default: all)")
	fl.StringVar(&partitions, "partitions", "", "comma-separated partition numbers (default: all)")
	fl.StringVar(&from, "from", "", "resume after this checkpoint (default: from now)")
	fl.BoolVar(&bootstrap, "bootstrap", false, "start with a snapshot of the selected tables, then follow the log")
	fl.BoolVar(&checkpoints, "checkpoints", false, "also print checkpoint-only lines (heartbeats)")
	fl.IntVar(&count, "count", 0, "exit after this many events (0: run until interrupted)")
	tail.MarkFlagsMutuallyExclusive("from", "bootstrap")
	cmd.AddCommand(tail)
	return cmd
}

func tailChanges(ctx context.Context, cmd *cobra.Command, c *client.Client, db string, o changes.Options, retry time.Duration, checkpoints bool, count int) error {
	out := cmd.OutOrStdout()
	printed := 0
	var failingSince time.Time
	for {
		s, err := changes.Open(ctx, c, db, o)
		if err == nil {
			failingSince = time.Time{}
			for {
				var l changes.Line
				if l, err = s.Next(); err != nil {
					break
				}
				if l.Checkpoint != "" {
					o.From, o.Bootstrap = l.Checkpoint, false
				}
				if l.Event == nil && !checkpoints {
					continue
				}
				if _, err := fmt.Fprintf(out, "%s\n", l.Raw); err != nil {
					s.Close()
					return err
				}
				if l.Event != nil {
					if printed++; count > 0 && printed >= count {
						s.Close()
						return nil
					}
				}
			}
			s.Close()
		}
		if ctx.Err() != nil {
			return nil
		}
		if changes.IsBootstrapRequired(err) {
			return fmt.Errorf("%w (start again with --bootstrap)", err)
		}
		if o.Bootstrap && printed > 0 {
			return fmt.Errorf("the bootstrap was interrupted (start it again): %w", err)
		}
		var ce *client.Error
		if errors.As(err, &ce) && ce.Status >= 400 && ce.Status < 500 {
			return err // retrying the same request cannot help
		}
		if failingSince.IsZero() {
			failingSince = time.Now()
		}
		if time.Since(failingSince) > retry {
			return err
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(200 * time.Millisecond):
		}
	}
}
