package api_test

import (
	"bufio"
	"context"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"
)

// watchDrops reads db's change stream from now on and sends the lines of
// its drop events.
func watchDrops(t *testing.T, db string) <-chan string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	req, err := newRequest(addr, "GET", "/_changes/"+db, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req.WithContext(ctx))
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 200 {
		t.Fatalf("GET /_changes/%s: %d", db, resp.StatusCode)
	}
	out := make(chan string, 16)
	go func() {
		defer resp.Body.Close()
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			if strings.Contains(sc.Text(), `"op":"drop"`) {
				out <- sc.Text()
			}
		}
	}()
	return out
}

func TestDropTableRefusesUnlessEmptyThenStartsAfresh(t *testing.T) {
	db := newDB(t)
	seedMessages(t, db)
	drops := watchDrops(t, db)
	expect(t, send(t, "PUT", "/"+db+"/Mailbox/alice", map[string]any{"name": "Alice"}), 201, "put mailbox")

	a := send(t, "DELETE", "/_schemas/"+db+"/Msg", nil)
	expect(t, a, 409, "drop of a table holding documents")
	if !strings.Contains(string(a.body), "force=true") || a.header.Get("Content-Type") != "application/problem+json" {
		t.Fatalf("refused drop: %s %s", a.header.Get("Content-Type"), a.body)
	}
	for _, bad := range []string{"?force=maybe", "?force=true&force=false", "?cascade=true"} {
		expect(t, send(t, "DELETE", "/_schemas/"+db+"/Msg"+bad, nil), 400, "drop with "+bad)
	}
	expect(t, send(t, "DELETE", "/_schemas/"+db+"/Msg?force=true", `{}`), 400, "drop with a body")
	expect(t, send(t, "GET", "/"+db+"/Msg/alice/1", nil), 200, "a refused drop changed nothing")

	expect(t, send(t, "DELETE", "/_schemas/"+db+"/Msg?force=true", nil), 204, "forced drop")
	expect(t, send(t, "GET", "/_schemas/"+db+"/Msg", nil), 404, "the dropped table's schema")
	expect(t, send(t, "GET", "/"+db+"/Msg/alice/1", nil), 404, "a dropped document")
	expect(t, send(t, "DELETE", "/_schemas/"+db+"/Msg", nil), 404, "a second drop")
	expect(t, send(t, "GET", "/"+db+"/Mailbox/alice", nil), 200, "another table's document")
	select {
	case line := <-drops:
		if !strings.Contains(line, `"table":"Msg"`) || !strings.Contains(line, `"key":null`) {
			t.Fatalf("drop event %s", line)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the change stream carried no drop event")
	}

	// Created again, it starts empty: no old document, no index entry.
	expect(t, send(t, "PUT", "/_schemas/"+db+"/Msg", indexedMessages), 201, "create again")
	if ids, _ := queryKeys(t, "/"+db+"/Msg/alice?query=subject:lunch"); len(ids) != 0 {
		t.Fatalf("subject:lunch after the drop finds %v", ids)
	}
	if c := canon(t, send(t, "GET", "/"+db+"/Msg/alice", nil).body); c != `{"documents":[]}` {
		t.Fatalf("collection after the drop: %s", c)
	}
	expect(t, send(t, "PUT", "/"+db+"/Msg/alice/9", map[string]any{"subject": "lunch again", "isInbox": true, "createdOn": 1}), 201, "put after")
	if ids, _ := queryKeys(t, "/"+db+"/Msg/alice?query=subject:lunch"); !slices.Equal(ids, []int64{9}) {
		t.Fatalf("subject:lunch after the drop and a put finds %v, want [9]", ids)
	}
	// An empty table drops without force, and its auto-increment
	// counters start again from 1.
	expect(t, send(t, "POST", "/"+db+"/Message/m1", message("first", 1)), 201, "insert")
	expect(t, send(t, "DELETE", "/"+db+"/Message/m1/1", nil), 204, "delete it")
	expect(t, send(t, "DELETE", "/_schemas/"+db+"/Message", nil), 204, "drop of an empty table")
	expect(t, send(t, "PUT", "/_schemas/"+db+"/Message", messageTable), 201, "create Message again")
	if loc := send(t, "POST", "/"+db+"/Message/m1", message("again", 1)).header.Get("Location"); loc != "/"+db+"/Message/m1/1" {
		t.Fatalf("first insert after the drop went to %q", loc)
	}
}

func TestDropDatabaseKeepsItsPartitionsForTheName(t *testing.T) {
	db := newDB(t)
	expect(t, send(t, "PUT", "/"+db+"/Mailbox/alice", map[string]any{"name": "Alice"}), 201, "put")
	expect(t, send(t, "DELETE", "/_schemas/"+db, nil), 409, "drop of a database holding documents")
	expect(t, send(t, "GET", "/_schemas/"+db+"/Mailbox", nil), 200, "a refused drop changed nothing")
	expect(t, send(t, "DELETE", "/_schemas/"+db+"?force=true", nil), 204, "forced drop")
	expect(t, send(t, "GET", "/_schemas/"+db, nil), 404, "the dropped database")
	expect(t, send(t, "GET", "/"+db+"/Mailbox/alice", nil), 404, "a document of the dropped database")
	expect(t, send(t, "DELETE", "/_schemas/"+db, nil), 404, "a second drop")

	a := send(t, "PUT", "/_schemas/"+db, `{"partitions":8}`)
	expect(t, a, 409, "created again with other partitions")
	if f, _ := decode(t, a.body)["field"].(string); f != "partitions" {
		t.Fatalf("conflict names field %q: %s", f, a.body)
	}
	createSchema(t, db)
	expect(t, send(t, "GET", "/"+db+"/Mailbox/alice", nil), 404, "an old document in the database created again")
	if loc := send(t, "POST", "/"+db+"/Message/m1", message("again", 1)).header.Get("Location"); loc != "/"+db+"/Message/m1/1" {
		t.Fatalf("first insert in the database created again went to %q", loc)
	}
	// An empty database drops without force.
	empty := newDB(t)
	expect(t, send(t, "DELETE", "/_schemas/"+empty, nil), 204, "drop of an empty database")
}
