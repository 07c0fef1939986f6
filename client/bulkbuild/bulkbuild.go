// Package bulkbuild builds a bulk load from Go records: the build
// directory `doppio bulk build` writes (one sorted file per partition,
// the rejects file, the manifest; docs/design/bulk.md), written by the
// same builder, so an application can build and load without the CLI:
//
//	res, err := bulkbuild.Build(ctx, c, bulkbuild.Config{DB: "MailboxDB", Table: "Message", Out: dir},
//		func(add func(record any) error) error {
//			for _, m := range messages {
//				if err := add(m); err != nil {
//					return err
//				}
//			}
//			return nil
//		})
//	// dir must be readable by every node, or served over http(s).
//	load, _, err := c.StartLoad(ctx, client.LoadRequest{Source: dir})
//
// A record is anything encoding/json encodes to a flat object holding
// the table's key parts by name and the document's fields, as a line of
// a JSON Lines input would. Each is validated as a PUT of the document
// would be; one that fails goes to the rejects file with the reason, as
// does every copy of a key added more than once.
//
// The package lives apart from package client because it links the
// builder, and with it the Avro and Parquet libraries the client does
// without.
package bulkbuild

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"io"

	"github.com/doppio-db/doppio/client"
	"github.com/doppio-db/doppio/internal/bulk/builder"
)

// Config says what to build.
type Config struct {
	DB, Table string
	// SchemaVersion is the table's schema version the documents are
	// encoded with (0: the latest).
	SchemaVersion int
	// Out is the build directory: absent or empty unless Overwrite,
	// which first removes what it holds.
	Out       string
	Overwrite bool
	// Name names the records in the rejects file and the manifest's
	// input fingerprint (default "records.jsonl"): builds of the same
	// records under the same name are the same load.
	Name string
	// Workers and SpillBytes are the builder's (0: GOMAXPROCS and 256 MiB).
	Workers    int
	SpillBytes int64
}

// Result is what a build holds, as its manifest records it.
type Result struct {
	Dir              string
	Database, Table  string
	SchemaVersion    int
	Partitions       int
	Records          int64 // written to the partition files
	Rejected         int64 // in Dir/rejects.jsonl
	InputFingerprint string
}

// Build asks c's server for the table's key, schema and partition count,
// then calls records with an add function, and writes every record added
// into the build directory cfg.Out. An error from records or add fails
// the build, which then removes what it wrote.
func Build(ctx context.Context, c *client.Client, cfg Config, records func(add func(record any) error) error) (Result, error) {
	if cfg.DB == "" || cfg.Table == "" || cfg.Out == "" {
		return Result{}, errors.New("bulkbuild: Config needs DB, Table and Out")
	}
	target, err := builder.ServerTarget(ctx, c, cfg.DB, cfg.Table, cfg.SchemaVersion)
	if err != nil {
		return Result{}, err
	}
	in := builder.Input{Path: cmp.Or(cfg.Name, "records.jsonl"), Format: builder.JSONLines, Open: func() (io.ReadCloser, error) {
		pr, pw := io.Pipe()
		go func() {
			enc := json.NewEncoder(pw) // one object a line
			pw.CloseWithError(records(func(record any) error { return enc.Encode(record) }))
		}()
		return pr, nil
	}}
	m, err := builder.Build(ctx, builder.Config{Target: target, Inputs: []builder.Input{in}, Out: cfg.Out, Overwrite: cfg.Overwrite,
		Workers: cfg.Workers, SpillBytes: cfg.SpillBytes, Builder: "doppio-go bulkbuild"})
	if err != nil {
		return Result{}, err
	}
	return Result{Dir: cfg.Out, Database: m.Database, Table: m.Table, SchemaVersion: m.SchemaVersion, Partitions: m.Partitions,
		Records: m.Records, Rejected: m.Rejected, InputFingerprint: m.InputFingerprint}, nil
}
