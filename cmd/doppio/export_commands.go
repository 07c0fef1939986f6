package main

import (
	"errors"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/doppio-db/doppio/client/export"
	"github.com/doppio-db/doppio/internal/exportfile"
	"github.com/spf13/cobra"
)

// exportCommand is `doppio export DB --to DIR --format F [--since CP]`.
func exportCommand(f *clientFlags) *cobra.Command {
	var (
		tables, to, format, since string
		throttle                  byteSize
		parallel                  int
	)
	cmd := &cobra.Command{
		Use:   "export DB --to DIR --format parquet|avro|jsonl",
		Short: "Export a database's documents (or, with --since, its changes) to files for ETL",
		Long: `Write every partition of DB as of one SCN (read from a follower when the
partition has one) to DIR/TABLE/p-NNNNN.FORMAT, one file per table and
partition, each row holding the key parts by name and the document's fields,
and DIR/manifest.json with each partition's SCN, row count, files and their
SHA-256, and the checkpoint to pass to --since next time.

With --since CHECKPOINT, write instead the changes made after that checkpoint
up to the SCNs current when the export starts: one row per document change
with _op (insert, update, delete), _scn, _mtime, the key parts and the
after-image's fields. Consecutive exports chained by their manifests'
checkpoints hold every change exactly once.

DIR must be absent or empty. The export runs here, in the CLI: its progress
shows on stderr (a bar when stdout is a terminal).`,
		Args: cobra.ExactArgs(1),
		RunE: runE(func(cmd *cobra.Command, args []string) error {
			server, _ := cmd.Flags().GetString("server")
			o := export.Options{Server: server, HTTP: f.httpClient(), DB: args[0], Dir: to, Since: since, Parallel: parallel, Throttle: int64(throttle)}
			switch format {
			case "parquet":
				o.Format = exportfile.Parquet
			case "avro":
				o.Format = exportfile.Avro
			case "jsonl":
				o.Format = export.JSONLines
			default:
				return fmt.Errorf("--format %q: want parquet, avro or jsonl", format)
			}
			if to == "" {
				return errors.New("--to DIR is required")
			}
			if parallel < 1 {
				return fmt.Errorf("--parallel %d: want at least 1", parallel)
			}
			if tables != "" {
				o.Tables = strings.Split(tables, ",")
			}
			o.Progress = exportProgress(cmd)
			ctx, stop := signal.NotifyContext(cmd.Context(), syscall.SIGINT, syscall.SIGTERM)
			defer stop()
			start := time.Now()
			m, err := export.Run(ctx, o)
			if err != nil {
				return err
			}
			var bytes int64
			for _, p := range m.Partitions {
				for _, fl := range p.Files {
					bytes += fl.Bytes
				}
			}
			fmt.Fprintf(cmd.OutOrStdout(), "exported %s (%s) to %s: %d rows, %d partitions, %d bytes of %s in %s\ncheckpoint: %s\n",
				m.Database, m.Kind, to, m.Rows, len(m.Partitions), bytes, m.FileFormat, time.Since(start).Round(time.Millisecond), m.Checkpoint)
			return nil
		}),
	}
	fl := cmd.Flags()
	fl.StringVar(&tables, "tables", "", "comma-separated tables (default: all)")
	fl.StringVar(&to, "to", "", "export directory (absent or empty)")
	fl.StringVar(&format, "format", "", "parquet, avro or jsonl")
	fl.StringVar(&since, "since", "", "export the changes after this checkpoint (an earlier export's manifest checkpoint)")
	fl.Var(&throttle, "throttle", "read at most this many bytes per second, e.g. 50MB (default: unbounded)")
	fl.IntVar(&parallel, "parallel", 2, "partitions read at a time")
	return cmd
}

// exportProgress draws a progress bar on stderr when stdout is a
// terminal, else prints a line per finished partition.
func exportProgress(cmd *cobra.Command) func(export.Progress) {
	errOut := cmd.ErrOrStderr()
	st, err := os.Stdout.Stat()
	tty := err == nil && st.Mode()&os.ModeCharDevice != 0
	last := -1
	return func(p export.Progress) {
		frac := 0.0
		if p.Partitions > 0 {
			frac = float64(p.PartitionsDone) / float64(p.Partitions)
		}
		if tty {
			fmt.Fprintf(errOut, "\r%s %d/%d partitions, %d rows, %d bytes read", progressBar(frac, 30), p.PartitionsDone, p.Partitions, p.Rows, p.Bytes)
			if p.PartitionsDone == p.Partitions {
				fmt.Fprintln(errOut)
			}
			return
		}
		if p.PartitionsDone != last {
			last = p.PartitionsDone
			fmt.Fprintf(errOut, "%d/%d partitions, %d rows, %d bytes read\n", p.PartitionsDone, p.Partitions, p.Rows, p.Bytes)
		}
	}
}
