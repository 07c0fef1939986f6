package main

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/doppio-db/doppio/client"
	"github.com/spf13/cobra"
)

// isFullKey reports whether key names one document of the table rather
// than a collection, by the table's key arity.
func isFullKey(cmd *cobra.Command, c *client.Client, p docPath) (bool, error) {
	t, err := c.GetTable(cmd.Context(), p.db, p.table)
	if err != nil {
		return false, err
	}
	return len(p.key) >= len(t.Key), nil
}

type listedDocument struct {
	Key      client.Key      `json:"key"`
	Document json.RawMessage `json:"document"`
}

type listing struct {
	Documents []listedDocument `json:"documents"`
	Next      string           `json:"next,omitempty"`
}

func getCommand(f *clientFlags) *cobra.Command {
	var (
		fields string
		limit  int
		cursor string
		all    bool
		q      string
		sort   string
		count  bool
	)
	cmd := &cobra.Command{
		Use:   "get DB/Table[/k1[/k2…]] [--query Q [--sort [-]F] [--count]] [--fields a,b.c] [--limit N] [--cursor C] [--all]",
		Short: "Read a document (full key) or a collection (leading key parts)",
		Long: "With every key part, prints the document. With leading key parts, prints a page of\n" +
			"the collection as {\"documents\":[{\"key\":…,\"document\":…}],\"next\":cursor}; --all\n" +
			"follows cursors and prints every document. Key parts are given plain, split on '/'.",
		Args: cobra.ExactArgs(1),
		RunE: runE(func(cmd *cobra.Command, args []string) error {
			minKey := 1
			if q != "" || count {
				minKey = 0 // a query may span the whole table
			}
			p, err := parseDocPath(args[0], minKey)
			if err != nil {
				return err
			}
			c := f.client()
			ctx := cmd.Context()
			var fl []string
			if fields != "" {
				fl = strings.Split(fields, ",")
			}
			if count {
				n, err := c.Count(ctx, p.db, p.table, p.key, q)
				if err != nil {
					return err
				}
				return printJSON(cmd, map[string]int{"count": n})
			}
			full := false
			if len(p.key) > 0 {
				if full, err = isFullKey(cmd, c, p); err != nil {
					return err
				}
			}
			if full && (q != "" || sort != "") {
				return fmt.Errorf("--query and --sort search a collection: give leading key parts only")
			}
			if full {
				d, err := c.Get(ctx, p.db, p.table, p.key, client.Fields(fl...))
				if err != nil {
					return err
				}
				return printJSON(cmd, d.Body)
			}
			o := client.ListOptions{Limit: limit, Cursor: cursor, Fields: fl, Query: q, Sort: sort}
			out := listing{Documents: []listedDocument{}}
			if all {
				for d, err := range c.ListAll(ctx, p.db, p.table, p.key, o) {
					if err != nil {
						return err
					}
					out.Documents = append(out.Documents, listedDocument{d.Key, d.Body})
				}
				return printJSON(cmd, out)
			}
			page, err := c.List(ctx, p.db, p.table, p.key, o)
			if err != nil {
				return err
			}
			for _, d := range page.Documents {
				out.Documents = append(out.Documents, listedDocument{d.Key, d.Body})
			}
			out.Next = page.Next
			return printJSON(cmd, out)
		}),
	}
	fs := cmd.Flags()
	fs.StringVar(&fields, "fields", "", "project onto these comma-separated fields (dotted paths reach nested records)")
	fs.IntVar(&limit, "limit", 0, "collection page size (server default 100, at most 1000)")
	fs.StringVar(&cursor, "cursor", "", "continue a collection after the page that printed this next cursor")
	fs.BoolVar(&all, "all", false, "follow cursors through the whole collection")
	fs.StringVarP(&q, "query", "q", "", `secondary-index query over the collection, e.g. 'isInbox:true AND subject:lunch'`)
	fs.StringVar(&sort, "sort", "", "order query results by an attribute-indexed field; -field for descending")
	fs.BoolVar(&count, "count", false, "print only the number of documents matching --query")
	return cmd
}

// writeCondFlags are the conditional-write flags.
type writeCondFlags struct{ ifMatch, ifNoneMatch string }

func (w *writeCondFlags) register(cmd *cobra.Command, noneMatch bool) {
	cmd.Flags().StringVar(&w.ifMatch, "if-match", "", "write only if the document's ETag is this (quoted as printed)")
	if noneMatch {
		cmd.Flags().StringVar(&w.ifNoneMatch, "if-none-match", "", `write only if the document's ETag is not this; "*" = create only`)
	}
}

func (w *writeCondFlags) options() []client.WriteOption {
	var o []client.WriteOption
	if w.ifMatch != "" {
		o = append(o, client.IfMatch(w.ifMatch))
	}
	if w.ifNoneMatch != "" {
		o = append(o, client.IfNoneMatch(w.ifNoneMatch))
	}
	return o
}

func putCommand(f *clientFlags) *cobra.Command {
	var (
		body bodyFlags
		cond writeCondFlags
	)
	cmd := &cobra.Command{
		Use:   "put DB/Table/k1[/k2…] (-d JSON | -f FILE | < FILE) [--if-match ETAG] [--if-none-match ETAG|*]",
		Short: "Create or replace the document at a full key; prints the write result",
		Args:  cobra.ExactArgs(1),
		RunE: runE(func(cmd *cobra.Command, args []string) error {
			p, err := parseDocPath(args[0], 1)
			if err != nil {
				return err
			}
			raw, err := body.read(cmd)
			if err != nil {
				return err
			}
			w, err := f.client().Put(cmd.Context(), p.db, p.table, p.key, json.RawMessage(raw), cond.options()...)
			if err != nil {
				return err
			}
			return printJSON(cmd, w)
		}),
	}
	body.register(cmd, "the document")
	cond.register(cmd, true)
	return cmd
}

func patchCommand(f *clientFlags) *cobra.Command {
	var (
		body bodyFlags
		cond writeCondFlags
	)
	cmd := &cobra.Command{
		Use:   `patch DB/Table/k1[/k2…] -d '{"$set":{…},"$unset":[…],"$inc":{…}}' [--if-match ETAG]`,
		Short: "Partially update the document at a full key; prints the write result",
		Args:  cobra.ExactArgs(1),
		RunE: runE(func(cmd *cobra.Command, args []string) error {
			p, err := parseDocPath(args[0], 1)
			if err != nil {
				return err
			}
			raw, err := body.read(cmd)
			if err != nil {
				return err
			}
			var pt client.Patch
			if err := decodeStrict(raw, &pt); err != nil {
				return err
			}
			w, err := f.client().Patch(cmd.Context(), p.db, p.table, p.key, pt, cond.options()...)
			if err != nil {
				return err
			}
			return printJSON(cmd, w)
		}),
	}
	body.register(cmd, "the patch")
	cond.register(cmd, true)
	return cmd
}

// idempotencyFlag is --idempotency-key, of the commands whose retry could
// apply twice.
type idempotencyFlag struct{ key string }

func (i *idempotencyFlag) register(cmd *cobra.Command) {
	cmd.Flags().StringVar(&i.key, "idempotency-key", "", "send under this Idempotency-Key: run again with it (after a 504), the command prints the first outcome instead of applying twice")
	// A key names one request: from the environment or a file it would
	// send every later insert under it, each refused as a reuse.
	markNotConfig(cmd, "idempotency-key")
}

func (i *idempotencyFlag) options() []client.WriteOption {
	if i.key == "" {
		return nil
	}
	return []client.WriteOption{client.IdempotencyKey(i.key)}
}

func insertCommand(f *clientFlags) *cobra.Command {
	var body bodyFlags
	var idem idempotencyFlag
	cmd := &cobra.Command{
		Use:   "insert DB/Table/k1[/k2…] (-d JSON | -f FILE | < FILE)",
		Short: "Insert a document under leading key parts with an auto-increment last part; prints its key",
		Args:  cobra.ExactArgs(1),
		RunE: runE(func(cmd *cobra.Command, args []string) error {
			p, err := parseDocPath(args[0], 1)
			if err != nil {
				return err
			}
			raw, err := body.read(cmd)
			if err != nil {
				return err
			}
			w, err := f.client().Insert(cmd.Context(), p.db, p.table, p.key, json.RawMessage(raw), idem.options()...)
			if err != nil {
				return err
			}
			return printJSON(cmd, w)
		}),
	}
	body.register(cmd, "the document")
	idem.register(cmd)
	return cmd
}

func deleteCommand(f *clientFlags) *cobra.Command {
	var cond writeCondFlags
	cmd := &cobra.Command{
		Use:   "delete DB/Table/k1[/k2…] [--if-match ETAG]",
		Short: "Delete a document (full key) or a whole collection (leading key parts); prints {\"deleted\":n}",
		Args:  cobra.ExactArgs(1),
		RunE: runE(func(cmd *cobra.Command, args []string) error {
			p, err := parseDocPath(args[0], 1)
			if err != nil {
				return err
			}
			c := f.client()
			full, err := isFullKey(cmd, c, p)
			if err != nil {
				return err
			}
			n := 1
			if full {
				err = c.Delete(cmd.Context(), p.db, p.table, p.key, cond.options()...)
			} else {
				n, err = c.DeleteCollection(cmd.Context(), p.db, p.table, p.key)
			}
			if err != nil {
				return err
			}
			return printJSON(cmd, map[string]int{"deleted": n})
		}),
	}
	cond.register(cmd, false)
	return cmd
}

func txnCommand(f *clientFlags) *cobra.Command {
	var body bodyFlags
	var idem idempotencyFlag
	cmd := &cobra.Command{
		Use:   "txn DB (-f txn.json | -d JSON | < txn.json)",
		Short: `Apply {"partitionKey":…,"ops":[{"op":"put|insert|patch|delete","table":…,"key":[…],…}]} atomically`,
		Args:  cobra.ExactArgs(1),
		RunE: runE(func(cmd *cobra.Command, args []string) error {
			raw, err := body.read(cmd)
			if err != nil {
				return err
			}
			var t client.Txn
			if err := json.Unmarshal(raw, &t); err != nil {
				return err
			}
			res, err := f.client().Txn(cmd.Context(), args[0], t, idem.options()...)
			if err != nil {
				return err
			}
			return printJSON(cmd, res)
		}),
	}
	body.register(cmd, "the transaction")
	idem.register(cmd)
	return cmd
}
