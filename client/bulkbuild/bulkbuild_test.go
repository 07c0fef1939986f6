package bulkbuild_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/doppio-db/doppio/client"
	"github.com/doppio-db/doppio/client/bulkbuild"
	"github.com/doppio-db/doppio/internal/node"
	"github.com/doppio-db/doppio/internal/testwait"
)

// note is a record as an application holds it: the key part and the
// document's fields, tagged as the table names them.
type note struct {
	Owner string `json:"owner"`
	Text  string `json:"text"`
	Stars int64  `json:"stars"`
}

// A build made by the client from Go records loads, and reads back
// exactly: every valid record present, the invalid and duplicated ones in
// the rejects file with their reasons, and the build refused whole when
// the records' producer fails.
func TestBuildFromGoRecordsLoadsAndReadsBack(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	n, err := node.Start(ctx, node.Config{DataDir: t.TempDir(), HTTPAddr: "127.0.0.1:0", Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	c := client.New("http://" + n.Addr())
	if _, _, err := c.PutDatabase(ctx, "N", client.DatabaseSpec{Partitions: 3, Replicas: 1}); err != nil {
		t.Fatal(err)
	}
	schema := json.RawMessage(`{"type":"record","name":"Note","fields":[{"name":"text","type":"string"},{"name":"stars","type":"long","index":"attribute"}]}`)
	if _, _, err := c.PutTable(ctx, "N", "Note", client.TableSpec{Key: []client.KeyPart{{Name: "owner", Type: "string"}}, Schema: schema}); err != nil {
		t.Fatal(err)
	}

	const valid = 500
	out := filepath.Join(t.TempDir(), "build")
	res, err := bulkbuild.Build(ctx, c, bulkbuild.Config{DB: "N", Table: "Note", Out: out}, func(add func(any) error) error {
		for i := range valid {
			if err := add(note{Owner: fmt.Sprintf("o%04d", i), Text: fmt.Sprintf("note %d", i), Stars: int64(i % 7)}); err != nil {
				return err
			}
		}
		// Record 501 lacks a field, 502 and 503 share a key.
		for _, r := range []any{map[string]any{"owner": "bad", "text": "no stars"}, note{Owner: "dup", Text: "a"}, note{Owner: "dup", Text: "b"}} {
			if err := add(r); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if res.Records != valid || res.Rejected != 3 || res.Partitions != 3 || res.SchemaVersion != 1 || res.Dir != out {
		t.Fatalf("build: %+v", res)
	}
	rejects := readRejects(t, filepath.Join(out, "rejects.jsonl"))
	if len(rejects) != 3 || rejects[0].Record != 501 || rejects[0].Input != "records.jsonl" ||
		rejects[1].Record != 502 || rejects[1].Reason != "duplicate key" || rejects[2].Record != 503 {
		t.Fatalf("rejects: %+v", rejects)
	}

	l, started, err := c.StartLoad(ctx, client.LoadRequest{Source: out})
	if err != nil || !started {
		t.Fatalf("start load: %v (started %v)", err, started)
	}
	testwait.Until(t, 60*time.Second, "the load done", func() bool {
		if l, err = c.GetLoad(ctx, l.ID); err != nil {
			t.Fatal(err)
		}
		return l.State == client.LoadDone || l.State == client.LoadFailed
	})
	if l.State != client.LoadDone || l.Records != valid {
		t.Fatalf("load: %+v", l)
	}
	for i := range valid {
		d, err := c.Get(ctx, "N", "Note", client.Key{fmt.Sprintf("o%04d", i)})
		if err != nil {
			t.Fatal(err)
		}
		var got note
		if err := json.Unmarshal(d.Body, &got); err != nil || got.Text != fmt.Sprintf("note %d", i) || got.Stars != int64(i%7) {
			t.Fatalf("o%04d: %s (%v)", i, d.Body, err)
		}
	}
	for _, id := range []string{"bad", "dup"} {
		if _, err := c.Get(ctx, "N", "Note", client.Key{id}); !client.IsNotFound(err) {
			t.Fatalf("rejected %s: %v, want not found", id, err)
		}
	}

	// A producer's error fails the build and leaves no build behind.
	failed := filepath.Join(t.TempDir(), "failed")
	boom := errors.New("the source went away")
	_, err = bulkbuild.Build(ctx, c, bulkbuild.Config{DB: "N", Table: "Note", Out: failed}, func(add func(any) error) error {
		if err := add(note{Owner: "x", Text: "x"}); err != nil {
			return err
		}
		return boom
	})
	if !errors.Is(err, boom) {
		t.Fatalf("build with a failing producer: %v, want %v", err, boom)
	}
	if _, err := os.Stat(filepath.Join(failed, "manifest.json")); !os.IsNotExist(err) {
		t.Fatalf("a failed build left a manifest: %v", err)
	}
}

type reject struct {
	Input  string `json:"input"`
	Record int    `json:"record"`
	Reason string `json:"reason"`
}

func readRejects(t *testing.T, path string) []reject {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []reject
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var r reject
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatal(err)
		}
		out = append(out, r)
	}
	return out
}
