package main

import (
	"bytes"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/doppio-db/doppio/client"
	"github.com/doppio-db/doppio/internal/certs"
	"github.com/spf13/cobra"
)

// clientFlags are the persistent flags every subcommand shares: the
// client's server, retry and TLS, and the certs directory a node or
// `doppio cert` uses.
type clientFlags struct {
	server   string
	retry    time.Duration
	certsDir string
	auth     authFlags // see user_commands.go
	// tls is the client's TLS, set by setupTLS when certsDir is.
	tls *tls.Config
	// sources says where each flag of the running command got its value
	// (applyConfig), for --print-config.
	sources map[string]configSource
}

func (f *clientFlags) client() *client.Client {
	return client.New(f.server, append(f.transport(), f.auth.options()...)...)
}

// transport are the client options of the flags but the credentials:
// retry and TLS.
func (f *clientFlags) transport() []client.Option {
	opts := []client.Option{client.WithRetry(f.retry)}
	if f.tls != nil {
		opts = append(opts, client.WithTLS(f.tls))
	}
	return opts
}

// httpClient is a client without timeout speaking TLS and sending the
// credentials as the flags say, for the commands that make their own
// requests (a change stream, a consistency check, a backup).
func (f *clientFlags) httpClient() *http.Client {
	var rt http.RoundTripper = http.DefaultTransport
	if f.tls != nil {
		tr := http.DefaultTransport.(*http.Transport).Clone()
		tr.TLSClientConfig = f.tls.Clone()
		rt = tr
	}
	if h := client.New("", f.auth.options()...).Authorization(); h != "" {
		rt = withHeader{base: rt, name: "Authorization", value: h}
	}
	return &http.Client{Transport: rt}
}

// serverCommand marks the commands that read --certs-dir as a node's
// (start, router, dev) or as the place to write certificates (cert):
// the client's TLS is not set up for them.
const serverCommand = "doppio/server"

// setupTLS makes the client speak https when a certs directory is given:
// it trusts the directory's ca.crt and presents client.USER.crt and .key
// when they are there.
func (f *clientFlags) setupTLS(cmd *cobra.Command) error {
	for c := cmd; c != nil; c = c.Parent() {
		if c.Annotations[serverCommand] != "" {
			return nil
		}
	}
	if f.certsDir == "" {
		return nil
	}
	user := f.auth.user
	if user == "" {
		user = "root"
	}
	cfg, err := certs.ClientTLS(f.certsDir, user)
	if err != nil {
		return err
	}
	f.tls = cfg
	if rest, ok := strings.CutPrefix(f.server, "http://"); ok {
		f.server = "https://" + rest
	}
	return nil
}

// addClientCommands registers the client subcommands (schema, get, put,
// patch, insert, delete, txn, cluster, datastream, check, quota) and the
// persistent flags (--server, --retry, --certs-dir, --user) every
// command sees.
func addClientCommands(root *cobra.Command) *clientFlags {
	f := &clientFlags{}
	pf := root.PersistentFlags()
	registerOutputFlag(pf)
	pf.String(configFlag, "", "YAML `FILE` of flag values (flag names as keys, lists for several values); DOPPIO_CONFIG names it too. A flag given wins over its DOPPIO_<FLAG> environment variable, which wins over the file")
	pf.StringVar(&f.server, "server", "http://127.0.0.1:8080", "Doppio server `URL` (http:// becomes https:// with --certs-dir)")
	pf.DurationVar(&f.retry, "retry", client.DefaultRetry, "how long to retry while the server is unavailable, over quota or refuses connections")
	pf.StringVar(&f.certsDir, "certs-dir", "", "certificates `DIR`: a client speaks TLS trusting its ca.crt and presents client.USER.crt; a node runs in secure mode with its ca.crt, node.crt, node.key")
	root.PersistentPreRunE = func(cmd *cobra.Command, _ []string) error {
		sources, err := applyConfig(cmd)
		if err != nil {
			return err
		}
		f.sources = sources
		return f.setupTLS(cmd)
	}
	root.AddCommand(schemaCommand(f), getCommand(f), putCommand(f), patchCommand(f), insertCommand(f), deleteCommand(f), txnCommand(f), clusterCommand(f), datastreamCommand(f))
	root.AddCommand(checkCommand(f), quotaCommand(f), cacheCommand(f))
	f.auth.register(pf)
	root.AddCommand(userCommand(f), loginCommand(f))
	return f
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
			// Keep the context a wrapper added ("Message.json: …"), and
			// the problem itself for the exit code.
			return detailError{msg: strings.Replace(err.Error(), pe.Error(), msg, 1), err: err}
		}
		return err
	}
}

// detailError prints as msg and unwraps to the error it rephrases.
type detailError struct {
	msg string
	err error
}

func (e detailError) Error() string { return e.msg }
func (e detailError) Unwrap() error { return e.err }

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
			return docPath{}, usageError{fmt.Errorf("%q: want DB/Table/k1[/k2…]", arg)}
		}
		return docPath{}, usageError{fmt.Errorf("%q: want DB/Table", arg)}
	}
	p := docPath{db: segs[0], table: segs[1]}
	for i, s := range segs {
		if s == "" {
			return docPath{}, usageError{fmt.Errorf("%q: segment %d is empty", arg, i+1)}
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
	markNotConfig(cmd, "data", "file")
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
