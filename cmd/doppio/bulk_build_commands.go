package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/dustin/go-humanize"

	"github.com/doppio-db/doppio/client"
	"github.com/doppio-db/doppio/internal/bulk/builder"
	"github.com/spf13/cobra"
)

// bulkBuildCommand is `doppio bulk build`.
func bulkBuildCommand(f *clientFlags) *cobra.Command {
	var (
		db, table, out, format, schemaFile string
		inputs                             []string
		version, partitions, workers       int
		spill                              int64
		maxDoc                             int
		overwrite                          bool
	)
	cmd := &cobra.Command{
		Use:   "build --db DB --table T --input PATH... --out DIR",
		Short: "Validate, partition and sort input files into a build directory for `bulk load`",
		Long: `Read JSON Lines (.jsonl, .ndjson), CSV with a header line (.csv), Avro
container files (.avro) or Parquet (.parquet); each record is a flat object
holding the key parts by name and the document's fields. Every record is
validated as a PUT of the document would be; failures and every copy of a
duplicated key go to DIR/rejects.jsonl with the reason. The valid records are
partitioned as the server partitions, sorted by key and written as one file
per partition, with DIR/manifest.json written last (docs/design/bulk.md).

The table's key, schema and partition count come from the server (--server,
$DOPPIO_SERVER, and the credentials flags), at the latest schema version or
--schema-version; or offline from --schema-file (the table definition as
PUT /_schemas/{db}/{table} takes it) with --schema-version and --partitions.`,
		Args: cobra.ArbitraryArgs,
		RunE: runE(func(cmd *cobra.Command, args []string) error {
			inputs = append(inputs, args...)
			switch {
			case db == "" || table == "":
				return errors.New("--db and --table are required")
			case out == "":
				return errors.New("--out DIR is required")
			case len(inputs) == 0:
				return errors.New("at least one --input PATH is required")
			}
			cfg := builder.Config{Out: out, Overwrite: overwrite, Workers: workers, SpillBytes: spill,
				MaxDocumentBytes: maxDoc, Builder: "doppio-go " + builderVersion}
			for _, p := range inputs {
				fm, err := builder.FormatOf(p, format)
				if err != nil {
					return err
				}
				cfg.Inputs = append(cfg.Inputs, builder.Input{Path: p, Format: fm})
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), syscall.SIGINT, syscall.SIGTERM)
			defer stop()
			var err error
			if schemaFile != "" {
				cfg.Target, err = offlineTarget(db, table, schemaFile, version, partitions)
			} else {
				cfg.Target, err = serverTarget(ctx, f.client(), db, table, version, cmd.Flags().Changed("partitions"))
			}
			if err != nil {
				return err
			}
			errOut := cmd.ErrOrStderr()
			cfg.Progress, cfg.ProgressEvery = buildProgress(errOut)
			m, err := builder.Build(ctx, cfg)
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "built %s: %s.%s schema version %d, %d records in %d partitions, %d rejected\n",
				out, m.Database, m.Table, m.SchemaVersion, m.Records, m.Partitions, m.Rejected)
			return nil
		}),
	}
	fl := cmd.Flags()
	fl.StringVar(&db, "db", "", "database")
	fl.StringVar(&table, "table", "", "table")
	fl.StringArrayVar(&inputs, "input", nil, "input file (repeatable; arguments are inputs too)")
	fl.StringVar(&out, "out", "", "build directory (absent or empty, unless --overwrite)")
	fl.StringVar(&format, "format", "", "input format for every input: jsonl, csv, avro or parquet (default: from the extension)")
	fl.StringVar(&schemaFile, "schema-file", "", "build offline from this table definition file instead of asking the server")
	fl.IntVar(&version, "schema-version", 0, "schema version to encode at (default: the table's latest; required with --schema-file)")
	fl.IntVar(&partitions, "partitions", 0, "the database's partition count (with --schema-file)")
	fl.IntVar(&workers, "workers", 0, "parallel workers (default: GOMAXPROCS)")
	fl.Int64Var(&spill, "spill-bytes", builder.DefaultSpillBytes, "records held in memory before sorted runs spill to temporary files in DIR")
	fl.IntVar(&maxDoc, "max-document-bytes", builder.DefaultMaxDocumentBytes, "reject documents whose encoding is larger (the server's limit)")
	fl.BoolVar(&overwrite, "overwrite", false, "replace the contents of a non-empty --out")
	return cmd
}

// builderVersion names this builder in a build's manifest.
const builderVersion = "0.1.0"

func offlineTarget(db, table, file string, version, partitions int) (*builder.Target, error) {
	if version < 1 || partitions < 1 {
		return nil, errors.New("--schema-file needs --schema-version N and --partitions N")
	}
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	spec, err := builder.ParseSpec(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	return builder.NewTarget(db, table, partitions, version, spec)
}

func serverTarget(ctx context.Context, c *client.Client, db, table string, version int, partitionsGiven bool) (*builder.Target, error) {
	if partitionsGiven {
		return nil, errors.New("--partitions is for --schema-file builds: the server knows the database's")
	}
	return builder.ServerTarget(ctx, c, db, table, version)
}

// buildProgress draws a progress bar on a terminal and otherwise writes
// a plain line now and then.
func buildProgress(w io.Writer) (func(builder.Progress), time.Duration) {
	if isTerminal(w) {
		return func(p builder.Progress) {
			eol := ""
			if p.Phase == "done" {
				eol = "\n"
			}
			fmt.Fprintf(w, "\r%s %s\033[K%s", progressBar(fraction(p.BytesRead, p.BytesTotal), 30), progressLine(p), eol)
		}, 200 * time.Millisecond
	}
	return func(p builder.Progress) { fmt.Fprintln(w, progressLine(p)) }, 5 * time.Second
}

func progressLine(p builder.Progress) string {
	return fmt.Sprintf("%s: %s of %s read, %d records, %d rejected, %d partitions written",
		p.Phase, humanize.IBytes(uint64(p.BytesRead)), humanize.IBytes(uint64(p.BytesTotal)), p.Records, p.Rejected, p.Partitions)
}

func fraction(n, total int64) float64 {
	if total == 0 {
		return 1
	}
	return float64(n) / float64(total)
}
