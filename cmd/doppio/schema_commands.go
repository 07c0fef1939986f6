package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/doppio-db/doppio/client"
	"github.com/spf13/cobra"
)

func schemaCommand(f *clientFlags) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "schema",
		Short: "Create, evolve and read database and table schemas",
	}
	cmd.AddCommand(schemaPutCommand(f), schemaGetCommand(f), schemaApplyCommand(f), schemaStatusCommand(f), schemaDropCommand(f))
	return cmd
}

func schemaPutCommand(f *clientFlags) *cobra.Command {
	var (
		spec client.DatabaseSpec
		file string
	)
	cmd := &cobra.Command{
		Use:   "put DB [--partitions N] [--replicas N] | put DB/Table -f table.json",
		Short: "Create or update a database, or create a table or register its next schema version",
		Long: "With DB, creates the database or updates what may change of it.\n" +
			"With DB/Table, reads {\"key\":[…],\"schema\":{…Avro record…}} from -f (or stdin) and\n" +
			"creates the table or registers the schema as its next version.",
		Args: cobra.ExactArgs(1),
		RunE: runE(func(cmd *cobra.Command, args []string) error {
			c := f.client()
			ctx := cmd.Context()
			db, table, isTable := strings.Cut(args[0], "/")
			if !isTable {
				d, _, err := c.PutDatabase(ctx, db, spec)
				if err != nil {
					return err
				}
				return printJSON(cmd, d)
			}
			b := bodyFlags{file: file}
			raw, err := b.read(cmd)
			if err != nil {
				return err
			}
			var ts client.TableSpec
			if err := decodeStrict(raw, &ts); err != nil {
				return fmt.Errorf("table definition: %w", err)
			}
			t, _, err := c.PutTable(ctx, db, table, ts)
			if err != nil {
				return err
			}
			return printJSON(cmd, t)
		}),
	}
	cmd.Flags().IntVar(&spec.Partitions, "partitions", 0, "number of partitions (default 8, fixed at creation)")
	cmd.Flags().IntVar(&spec.Replicas, "replicas", 0, "replicas per partition (default 1)")
	cmd.Flags().StringVar(&spec.Partitioner, "partitioner", "", `partitioner (default "hash")`)
	cmd.Flags().StringVarP(&file, "file", "f", "", "table definition file (default: stdin)")
	return cmd
}

func schemaGetCommand(f *clientFlags) *cobra.Command {
	var version int
	cmd := &cobra.Command{
		Use:   "get [DB[/Table]] [--version N]",
		Short: "Show every database, one database and its tables, or one table",
		Args:  cobra.MaximumNArgs(1),
		RunE: runE(func(cmd *cobra.Command, args []string) error {
			c := f.client()
			ctx := cmd.Context()
			if len(args) == 0 {
				ds, err := c.ListDatabases(ctx)
				if err != nil {
					return err
				}
				list := map[string]any{"databases": ds}
				return printOutput(cmd, list, func(w io.Writer) error { return genericTable(w, list) })
			}
			db, table, isTable := strings.Cut(args[0], "/")
			switch {
			case !isTable:
				d, err := c.GetDatabase(ctx, db)
				if err != nil {
					return err
				}
				return printJSON(cmd, d)
			case version > 0:
				v, err := c.GetTableVersion(ctx, db, table, version)
				if err != nil {
					return err
				}
				return printJSON(cmd, v)
			default:
				t, err := c.GetTable(ctx, db, table)
				if err != nil {
					return err
				}
				return printJSON(cmd, t)
			}
		}),
	}
	cmd.Flags().IntVar(&version, "version", 0, "with DB/Table, show this schema version")
	return cmd
}

func schemaDropCommand(f *clientFlags) *cobra.Command {
	var o client.DropOptions
	cmd := &cobra.Command{
		Use:   "drop DB[/Table] [--force]",
		Short: "Drop a table, or a database with its tables, and their documents",
		Long: "Refused while what is dropped holds documents, unless --force deletes them with it.\n" +
			"A drop that failed midway is finished by running it again. A database created\n" +
			"again under a dropped name keeps its partition count.",
		Args: cobra.ExactArgs(1),
		RunE: runE(func(cmd *cobra.Command, args []string) error {
			c := f.client()
			db, table, isTable := strings.Cut(args[0], "/")
			if !isTable {
				if err := c.DropDatabase(cmd.Context(), db, o); err != nil {
					return err
				}
				fmt.Fprintf(cmd.OutOrStdout(), "database %s dropped\n", db)
				return nil
			}
			if err := c.DropTable(cmd.Context(), db, table, o); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "table %s/%s dropped\n", db, table)
			return nil
		}),
	}
	cmd.Flags().BoolVar(&o.Force, "force", false, "drop even what holds documents, deleting them")
	return cmd
}

// databaseFile is database.json of a schema directory.
type databaseFile struct {
	Name string `json:"name"`
	client.DatabaseSpec
}

func schemaApplyCommand(f *clientFlags) *cobra.Command {
	var dbName string
	cmd := &cobra.Command{
		Use:   "apply DIR [--db NAME]",
		Short: "Create or evolve a database and its tables from a directory of JSON files",
		Long: "Applies DIR/database.json ({\"name\":…,\"partitions\":…,\"replicas\":…}; the name\n" +
			"defaults to --db, else the directory's name), then every other *.json file that\n" +
			"holds a \"schema\" as the table named by the file (Message.json → table Message),\n" +
			"in name order. Files holding \"ops\" (transactions) are skipped; any other file is\n" +
			"an error. Applying again registers changed schemas as new versions.",
		Args: cobra.ExactArgs(1),
		RunE: runE(func(cmd *cobra.Command, args []string) error {
			dir := args[0]
			c := f.client()
			ctx := cmd.Context()
			out := cmd.OutOrStdout()

			var dbf databaseFile
			raw, err := os.ReadFile(filepath.Join(dir, "database.json"))
			if err != nil {
				return err
			}
			if err := decodeStrict(raw, &dbf); err != nil {
				return fmt.Errorf("database.json: %w", err)
			}
			name := dbName
			if name == "" {
				name = dbf.Name
			}
			if name == "" {
				abs, err := filepath.Abs(dir)
				if err != nil {
					return err
				}
				name = filepath.Base(abs)
			}
			before, _ := c.GetDatabase(ctx, name) // absent: the zero Database
			after, created, err := c.PutDatabase(ctx, name, dbf.DatabaseSpec)
			if err != nil {
				return fmt.Errorf("database.json: %w", err)
			}
			same := before.Partitions == after.Partitions && before.Replicas == after.Replicas && before.Partitioner == after.Partitioner
			fmt.Fprintf(out, "database %s: %s\n", name, outcomeWord(created, same))

			files, err := filepath.Glob(filepath.Join(dir, "*.json"))
			if err != nil {
				return err
			}
			slices.Sort(files)
			for _, file := range files {
				base := filepath.Base(file)
				if base == "database.json" {
					continue
				}
				raw, err := os.ReadFile(file)
				if err != nil {
					return err
				}
				var probe map[string]json.RawMessage
				if err := json.Unmarshal(raw, &probe); err != nil {
					return fmt.Errorf("%s: %w", base, err)
				}
				if _, ok := probe["schema"]; !ok {
					if _, ok := probe["ops"]; ok {
						fmt.Fprintf(out, "skipped %s: a transaction, not a table\n", base)
						continue
					}
					return fmt.Errorf("%s: neither a table definition (\"key\", \"schema\") nor a transaction (\"ops\")", base)
				}
				var ts client.TableSpec
				if err := decodeStrict(raw, &ts); err != nil {
					return fmt.Errorf("%s: %w", base, err)
				}
				table := strings.TrimSuffix(base, ".json")
				before, _ := c.GetTable(ctx, name, table) // absent: the zero Table
				t, created, err := c.PutTable(ctx, name, table, ts)
				if err != nil {
					return fmt.Errorf("%s: %w", base, err)
				}
				same := before.Version == t.Version && slices.EqualFunc(before.Indexes, t.Indexes, func(a, b client.IndexStatus) bool {
					return a.Field == b.Field && a.Kind == b.Kind
				})
				fmt.Fprintf(out, "table %s/%s: %s, version %d\n", name, table, outcomeWord(created, same), t.Version)
			}
			return nil
		}),
	}
	cmd.Flags().StringVar(&dbName, "db", "", "database name (overrides database.json's name)")
	return cmd
}

// outcomeWord says what applying did: created, unchanged (the server
// holds what it held before) or updated.
func outcomeWord(created, same bool) string {
	switch {
	case created:
		return "created"
	case same:
		return "unchanged"
	}
	return "updated"
}

func createdWord(created bool) string {
	return outcomeWord(created, false)
}
