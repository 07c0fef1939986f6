package client_test

import (
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/doppio-db/doppio/client"
)

var allSentinels = []error{client.ErrNotFound, client.ErrConflict, client.ErrPreconditionFailed,
	client.ErrUnprocessable, client.ErrOverQuota, client.ErrUnavailable, client.ErrOutcomeUnknown}

// checkSentinel fails unless err is the problem of status, matches want
// and no other sentinel, and still carries the server's detail.
func checkSentinel(t *testing.T, what string, err error, status int, want error) {
	t.Helper()
	var e *client.Error
	if !errors.As(err, &e) || e.Status != status || e.Detail == "" {
		t.Fatalf("%s = %#v; want a %d problem with its detail", what, err, status)
	}
	for _, s := range allSentinels {
		if errors.Is(err, s) != (s == want) {
			t.Errorf("%s: errors.Is(%v, %v) = %t", what, err, s, s != want)
		}
	}
	// Wrapped, as an application would, it still matches.
	if !errors.Is(fmt.Errorf("loading: %w", err), want) {
		t.Errorf("%s wrapped does not match %v", what, want)
	}
}

func TestProblemsMatchTheirSentinelsAgainstANode(t *testing.T) {
	c, ctx := newClient(t), ctxT(t)
	key := client.Key{"sentinels"}

	_, err := c.Get(ctx, db, "Mailbox", key)
	checkSentinel(t, "Get of an absent document", err, 404, client.ErrNotFound)

	w, err := c.Put(ctx, db, "Mailbox", key, mailbox{Owner: "ann"})
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.Put(ctx, db, "Mailbox", key, mailbox{Owner: "bob"}, client.IfNoneMatch("*"))
	checkSentinel(t, "Put IfNoneMatch(*) over a document", err, 412, client.ErrPreconditionFailed)

	_, err = c.Put(ctx, db, "Mailbox", key, map[string]any{"unreadCount": "many"}, client.IfMatch(w.ETag))
	checkSentinel(t, "Put of a mismatching document", err, 422, client.ErrUnprocessable)

	spec := client.TableSpec{Key: []client.KeyPart{{Name: "other", Type: "long"}}, Schema: mailboxSchema}
	_, _, err = c.PutTable(ctx, db, "Mailbox", spec)
	checkSentinel(t, "PutTable changing the key", err, 409, client.ErrConflict)

	if d, err := c.Get(ctx, db, "Mailbox", key); err != nil || d.ETag != w.ETag {
		t.Fatalf("a refused request changed the document: %+v, %v", d, err)
	}
}

// A write whose outcome the server could not learn is 504: no node can be
// made to answer it on demand, so a server answers the node's problem.
func TestOutcomeUnknownMatchesItsSentinelAndIsNotRetried(t *testing.T) {
	calls := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls++
		w.Header().Set("Content-Type", "application/problem+json")
		w.WriteHeader(http.StatusGatewayTimeout)
		fmt.Fprint(w, `{"type":"https://doppio.dev/problems/outcome-unknown","title":"Outcome unknown","status":504,"detail":"replication did not confirm the write in time"}`)
	}))
	defer srv.Close()
	_, err := client.New(srv.URL).Put(ctxT(t), "D", "T", client.Key{"k"}, map[string]int{"a": 1})
	checkSentinel(t, "Put answered 504", err, 504, client.ErrOutcomeUnknown)
	if calls != 1 {
		t.Fatalf("a write of unknown outcome was sent %d times; want once", calls)
	}
}
