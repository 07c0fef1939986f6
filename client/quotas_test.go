package client_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/doppio-db/doppio/client"
)

func TestQuotasSetGetListDelete(t *testing.T) {
	ctx, c := ctxT(t), newClient(t)
	q, created, err := c.SetQuota(ctx, client.DatabaseQuota, db, client.Quota{ReadUnitsPerSecond: 1000})
	if err != nil || !created || q != (client.Quota{Name: db, ReadUnitsPerSecond: 1000}) {
		t.Fatalf("SetQuota = %+v, %v, %v", q, created, err)
	}
	if _, created, err := c.SetQuota(ctx, client.DatabaseQuota, db, client.Quota{ReadUnitsPerSecond: 2000, WriteUnitsPerSecond: 500}); err != nil || created {
		t.Fatalf("SetQuota again: created %v, %v", created, err)
	}
	if _, _, err := c.SetQuota(ctx, client.UserQuota, "ann", client.Quota{WriteUnitsPerSecond: 9}); err != nil {
		t.Fatal(err)
	}
	if q, err := c.GetQuota(ctx, client.DatabaseQuota, db); err != nil || q != (client.Quota{Name: db, ReadUnitsPerSecond: 2000, WriteUnitsPerSecond: 500}) {
		t.Fatalf("GetQuota = %+v, %v", q, err)
	}
	all, err := c.ListQuotas(ctx)
	if err != nil || len(all.Databases) != 1 || all.Databases[0].Name != db || len(all.Users) != 1 || all.Users[0] != (client.Quota{Name: "ann", WriteUnitsPerSecond: 9}) {
		t.Fatalf("ListQuotas = %+v, %v", all, err)
	}
	if _, _, err := c.SetQuota(ctx, client.DatabaseQuota, db, client.Quota{WriteUnitsPerSecond: -1}); !hasStatus(err, 422) {
		t.Fatalf("a negative quota: %v, want 422", err)
	}
	for _, s := range []client.QuotaScope{client.DatabaseQuota, client.UserQuota} {
		name := map[client.QuotaScope]string{client.DatabaseQuota: db, client.UserQuota: "ann"}[s]
		if err := c.DeleteQuota(ctx, s, name); err != nil {
			t.Fatal(err)
		}
		if _, err := c.GetQuota(ctx, s, name); !client.IsNotFound(err) {
			t.Fatalf("GetQuota after delete: %v", err)
		}
		if err := c.DeleteQuota(ctx, s, name); !client.IsNotFound(err) {
			t.Fatalf("DeleteQuota again: %v", err)
		}
	}
}

func hasStatus(err error, status int) bool {
	var e *client.Error
	return errors.As(err, &e) && e.Status == status
}

// TestRetryHonoursRetryAfterOn429 runs against a real node: a database
// whose write quota is spent refuses writes with 429 and a Retry-After;
// the client's retry waits that long and the write then succeeds, unless
// the wait would outlast the caller's deadline or the retry time.
func TestRetryHonoursRetryAfterOn429(t *testing.T) {
	ctx, c := ctxT(t), newClient(t)
	const qdb = "QuotaDB"
	if _, _, err := c.PutDatabase(ctx, qdb, client.DatabaseSpec{Partitions: 1, Replicas: 1}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := c.PutTable(ctx, qdb, "T", client.TableSpec{Key: []client.KeyPart{{Name: "id", Type: "string"}},
		Schema: json.RawMessage(`{"type":"record","name":"T","fields":[{"name":"s","type":"string"}]}`)}); err != nil {
		t.Fatal(err)
	}
	// 2 units a second and 10 s of burst: 20 units; each write is 5.
	if _, _, err := c.SetQuota(ctx, client.DatabaseQuota, qdb, client.Quota{WriteUnitsPerSecond: 2}); err != nil {
		t.Fatal(err)
	}
	doc := map[string]string{"s": strings.Repeat("x", 4500)}
	once := client.New(serverURL, client.WithRetry(0))
	var err error
	for i := 0; i < 20 && err == nil; i++ {
		_, err = once.Put(ctx, qdb, "T", client.Key{"k"}, doc)
	}
	var e *client.Error
	if !errors.Is(err, client.ErrOverQuota) || !errors.As(err, &e) || e.RetryAfter < 2 || e.RetryAfter > 3 {
		t.Fatalf("writing past the quota: %v, want a 429 with Retry-After 2 or 3", err)
	}

	// A deadline shorter than Retry-After: the 429 at once, no waiting.
	short, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
	defer cancel()
	start := time.Now()
	if _, err := c.Put(short, qdb, "T", client.Key{"k"}, doc); !client.IsOverQuota(err) || time.Since(start) > 400*time.Millisecond {
		t.Fatalf("with a 500ms deadline: %v after %v", err, time.Since(start))
	}
	// A retry time shorter than Retry-After: the same.
	start = time.Now()
	if _, err := client.New(serverURL, client.WithRetry(time.Second)).Put(ctx, qdb, "T", client.Key{"k"}, doc); !client.IsOverQuota(err) || time.Since(start) > 400*time.Millisecond {
		t.Fatalf("with 1s of retry: %v after %v", err, time.Since(start))
	}
	// The default retry waits the quota out and writes.
	start = time.Now()
	if _, err := c.Put(ctx, qdb, "T", client.Key{"k"}, doc); err != nil {
		t.Fatalf("with the default retry: %v", err)
	}
	if el := time.Since(start); el < time.Second {
		t.Fatalf("the retried write answered after %v, before the quota had credit again", el)
	}
	if err := c.DeleteQuota(ctx, client.DatabaseQuota, qdb); err != nil {
		t.Fatal(err)
	}
}
