package client_test

import (
	"bytes"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"sync"
	"testing"

	"github.com/doppio-db/doppio/client"
)

// losingProxy forwards every request to the real node, and loses the
// first answer to each Idempotency-Key: the write is applied, then the
// connection breaks, as when a node dies after committing.
type losingProxy struct {
	mu   sync.Mutex
	seen map[string]int // attempts by key
}

func (p *losingProxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	req, _ := http.NewRequestWithContext(r.Context(), r.Method, serverURL+r.URL.RequestURI(), bytes.NewReader(body))
	req.Header = r.Header.Clone()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		http.Error(w, err.Error(), 502)
		return
	}
	defer resp.Body.Close()
	key := r.Header.Get("Idempotency-Key")
	p.mu.Lock()
	p.seen[key]++
	lose := key != "" && p.seen[key] == 1
	p.mu.Unlock()
	if lose {
		conn, _, err := w.(http.Hijacker).Hijack()
		if err == nil {
			conn.Close()
		}
		return
	}
	for k, v := range resp.Header {
		w.Header()[k] = v
	}
	w.WriteHeader(resp.StatusCode)
	io.Copy(w, resp.Body)
}

func TestClientRetriesOfInsertsAndTransactionsApplyOnce(t *testing.T) {
	p := &losingProxy{seen: map[string]int{}}
	srv := httptest.NewServer(p)
	defer srv.Close()
	c, ctx := client.New(srv.URL), ctxT(t)

	// The client's own key: the first answer is lost, the retry answers it.
	w, err := c.Insert(ctx, db, "Message", client.Key{"idem"}, map[string]any{"subject": "once"})
	if err != nil || !w.Created {
		t.Fatalf("Insert through a lossy link: %+v, %v", w, err)
	}
	res, err := c.Txn(ctx, db, client.Txn{Ops: []client.TxnOp{
		client.InsertOp("Message", client.Key{"idem"}, map[string]any{"subject": "twice"}),
	}})
	if err != nil || len(res.Results) != 1 {
		t.Fatalf("Txn through a lossy link: %+v, %v", res, err)
	}
	batch, err := c.Batch(ctx, db, []client.TxnOp{client.InsertOp("Message", client.Key{"idem"}, map[string]any{"subject": "thrice"})})
	if err != nil || len(batch) != 1 || batch[0].Status != 201 {
		t.Fatalf("Batch through a lossy link: %+v, %v", batch, err)
	}
	if len(p.seen) != 3 {
		t.Fatalf("keys seen: %v; want one per call", p.seen)
	}
	for k, n := range p.seen {
		if k == "" || n != 2 {
			t.Fatalf("key %q sent %d times; want a client key sent twice", k, n)
		}
	}
	page, err := c.List(ctx, db, "Message", client.Key{"idem"}, client.ListOptions{})
	if err != nil || len(page.Documents) != 3 {
		t.Fatalf("%d messages, %v; want 3: one per call", len(page.Documents), err)
	}

	// The application's key: a later call with it answers the first
	// outcome; with another document it is refused.
	direct := newClient(t)
	first, err := direct.Insert(ctx, db, "Message", client.Key{"idem"}, map[string]any{"subject": "mine"}, client.IdempotencyKey("app-key-1"))
	if err != nil {
		t.Fatal(err)
	}
	again, err := direct.Insert(ctx, db, "Message", client.Key{"idem"}, map[string]any{"subject": "mine"}, client.IdempotencyKey("app-key-1"))
	if err != nil || !reflect.DeepEqual(again, first) {
		t.Fatalf("second call with the key: %+v, %v; want %+v", again, err, first)
	}
	if _, err := direct.Insert(ctx, db, "Message", client.Key{"idem"}, map[string]any{"subject": "other"}, client.IdempotencyKey("app-key-1")); !errors.Is(err, client.ErrUnprocessable) {
		t.Fatalf("key reused for another document: %v; want 422", err)
	}
	if page, _ := c.List(ctx, db, "Message", client.Key{"idem"}, client.ListOptions{}); len(page.Documents) != 4 {
		t.Fatalf("%d messages; want 4", len(page.Documents))
	}
}
