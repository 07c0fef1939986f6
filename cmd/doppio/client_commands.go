package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/doppio-db/doppio/client"
	"github.com/spf13/cobra"
)

// clientFlags are the persistent flags every client subcommand shares.
type clientFlags struct {
	server string
	retry  time.Duration
	auth   authFlags // see user_commands.go
}

func (f *clientFlags) client() *client.Client {
	return client.New(f.server, append([]client.Option{client.WithRetry(f.retry)}, f.auth.options()...)...)
}

// addClientCommands registers the client subcommands (schema, get, put,
// patch, insert, delete, txn, cluster, datastream, check, quota) and the
// --server flag they use.
func addClientCommands(root *cobra.Command) {
	f := &clientFlags{}
	def := os.Getenv("DOPPIO_SERVER")
	if def == "" {
		def = "http://127.0.0.1:8080"
	}
	pf := root.PersistentFlags()
	pf.StringVar(&f.server, "server", def, "Doppio server URL ($DOPPIO_SERVER sets the default)")
	pf.DurationVar(&f.retry, "retry", client.DefaultRetry, "how long to retry while the server is unavailable, over quota or refuses connections")
	root.AddCommand(schemaCommand(f), getCommand(f), putCommand(f), patchCommand(f), insertCommand(f), deleteCommand(f), txnCommand(f), clusterCommand(f), datastreamCommand(f))
	root.AddCommand(checkCommand(f), quotaCommand(f))
	f.auth.register(pf)
	root.AddCommand(userCommand(f), loginCommand(f))
}

// runE adapts a command body so a problem answered by the server is
// reported by its detail alone.
func runE(fn func(cmd *cobra.Command, args []string) error) func(*cobra.Command, []string) error {
	return func(cmd *cobra.Command, args []string) error {
		err := fn(cmd, args)
		var pe *client.Error
		if errors.As(err, &pe) {
			msg := pe.Detail
			if msg == "" {
				msg = fmt.Sprintf("%d %s", pe.Status, pe.Title)
			}
			// Keep the context a wrapper added ("Message.json: …").
			return errors.New(strings.Replace(err.Error(), pe.Error(), msg, 1))
		}
		return err
	}
}

// docPath is a parsed "DB/Table/k1/…/kn" argument.
type docPath struct {
	db, table string
	key       client.Key
}

// parseDocPath splits a plain path into database, table and key parts
// (strings: the server parses them by the table's key types).
func parseDocPath(arg string, minKey int) (docPath, error) {
	segs := strings.Split(arg, "/")
	if len(segs) < 2+minKey {
		if minKey > 0 {
			return docPath{}, fmt.Errorf("%q: want DB/Table/k1[/k2…]", arg)
		}
		return docPath{}, fmt.Errorf("%q: want DB/Table", arg)
	}
	p := docPath{db: segs[0], table: segs[1]}
	for i, s := range segs {
		if s == "" {
			return docPath{}, fmt.Errorf("%q: segment %d is empty", arg, i+1)
		}
	}
	for _, s := range segs[2:] {
		p.key = append(p.key, s)
	}
	return p, nil
}

// bodyFlags are -d and -f: a JSON body inline, from a file, or else stdin.
type bodyFlags struct{ data, file string }

func (b *bodyFlags) register(cmd *cobra.Command, what string) {
	cmd.Flags().StringVarP(&b.data, "data", "d", "", what+" as inline JSON")
	cmd.Flags().StringVarP(&b.file, "file", "f", "", what+" from a JSON file (default: stdin)")
	cmd.MarkFlagsMutuallyExclusive("data", "file")
}

func (b *bodyFlags) read(cmd *cobra.Command) ([]byte, error) {
	var raw []byte
	var err error
	switch {
	case b.data != "":
		raw = []byte(b.data)
	case b.file != "":
		raw, err = os.ReadFile(b.file)
	default:
		raw, err = io.ReadAll(cmd.InOrStdin())
	}
	if err != nil {
		return nil, err
	}
	raw = bytes.TrimSpace(raw)
	if !json.Valid(raw) {
		return nil, errors.New("the body is not valid JSON")
	}
	return raw, nil
}

// decodeStrict parses JSON into v, keeping numbers exact and refusing
// fields v does not have.
func decodeStrict(raw []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if dec.More() {
		return errors.New("data after the JSON value")
	}
	return nil
}

// printJSON writes v as indented JSON, re-indenting raw documents.
func printJSON(cmd *cobra.Command, v any) error {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if raw, ok := v.(json.RawMessage); ok {
		if err := json.Indent(&buf, raw, "", "  "); err != nil {
			return err
		}
		buf.WriteByte('\n')
	} else if err := enc.Encode(v); err != nil {
		return err
	}
	_, err := cmd.OutOrStdout().Write(buf.Bytes())
	return err
}
