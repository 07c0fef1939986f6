package client_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"testing"
	"time"

	"github.com/doppio-db/doppio/client"
	"github.com/doppio-db/doppio/internal/node"
)

// serverURL is the base URL of the node every test and example of this
// package talks to: one real node (embedded etcd, Pebble) per test binary.
var serverURL string

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	dir, err := os.MkdirTemp("", "doppio-client-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	ctx := context.Background()
	n, err := node.Start(ctx, node.Config{
		DataDir:  dir,
		HTTPAddr: "127.0.0.1:0",
		Logger:   slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, "start node:", err)
		return 1
	}
	defer n.Close()
	serverURL = "http://" + n.Addr()
	if err := setupMailbox(ctx, client.New(serverURL)); err != nil {
		fmt.Fprintln(os.Stderr, "set up schema:", err)
		return 1
	}
	return m.Run()
}

const db = "MailboxDB"

var mailboxSchema = json.RawMessage(`{"type":"record","name":"Mailbox","fields":[
	{"name":"owner","type":"string","default":""},
	{"name":"unreadCount","type":"long","default":0},
	{"name":"totalCount","type":"long","default":0}]}`)

var messageSchema = json.RawMessage(`{"type":"record","name":"Message","fields":[
	{"name":"subject","type":"string","index":"text"},
	{"name":"body","type":"string","default":""},
	{"name":"unread","type":"boolean","default":true}]}`)

var noteSchema = json.RawMessage(`{"type":"record","name":"Note","fields":[{"name":"text","type":"string"}]}`)

// setupMailbox creates the database and tables the tests use: Mailbox
// [mailboxId], Message [mailboxId, messageId auto-increment] and Note
// [owner, name] with two string key parts.
func setupMailbox(ctx context.Context, c *client.Client) error {
	if _, _, err := c.PutDatabase(ctx, db, client.DatabaseSpec{Partitions: 4, Replicas: 1}); err != nil {
		return err
	}
	tables := []struct {
		name string
		spec client.TableSpec
	}{
		{"Mailbox", client.TableSpec{Key: []client.KeyPart{{Name: "mailboxId", Type: "string"}}, Schema: mailboxSchema}},
		{"Message", client.TableSpec{Key: []client.KeyPart{{Name: "mailboxId", Type: "string"}, {Name: "messageId", Type: "long", AutoIncrement: true}}, Schema: messageSchema}},
		{"Note", client.TableSpec{Key: []client.KeyPart{{Name: "owner", Type: "string"}, {Name: "name", Type: "string"}}, Schema: noteSchema}},
	}
	for _, t := range tables {
		if _, _, err := c.PutTable(ctx, db, t.name, t.spec); err != nil {
			return fmt.Errorf("table %s: %w", t.name, err)
		}
	}
	return nil
}

func newClient(t *testing.T) *client.Client {
	t.Helper()
	return client.New(serverURL, client.WithTimeout(10*time.Second))
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}
