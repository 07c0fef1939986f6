package cachecheck_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"testing"
	"time"

	"github.com/doppio-db/doppio/internal/cache"
	"github.com/doppio-db/doppio/internal/cache/cachecheck"
	"github.com/doppio-db/doppio/internal/keys"
	"github.com/doppio-db/doppio/internal/node"
	"github.com/doppio-db/doppio/internal/redistest"
	"github.com/doppio-db/doppio/internal/scn"
)

func call(t *testing.T, method, url, body string) (int, http.Header) {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = bytes.NewReader([]byte(body))
	}
	req, err := http.NewRequest(method, url, rd)
	if err != nil {
		t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode >= 300 && resp.StatusCode != 404 {
		t.Fatalf("%s %s: %d %s", method, url, resp.StatusCode, b)
	}
	return resp.StatusCode, resp.Header
}

// TestCheckReportsEveryEntryThatShowsAnotherState writes entries
// straight into a real Redis next to a real node's documents: a current
// entry, an outdated one, a tombstone of a deleted document, a tombstone
// of a live one and a document that was deleted; the check reports
// exactly the three wrong ones.
func TestCheckReportsEveryEntryThatShowsAnotherState(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	n, err := node.Start(ctx, node.Config{ID: "n1", DataDir: t.TempDir(), HTTPAddr: "127.0.0.1:0",
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	base := "http://" + n.Addr()
	rc := redistest.Start(t, 0)
	call(t, "PUT", base+"/_schemas/shop", `{"partitions":2,"replicas":1}`)
	call(t, "PUT", base+"/_schemas/shop/Order", `{"key":[{"name":"customer","type":"string"},{"name":"id","type":"long"}],
	  "schema":{"type":"record","name":"Order","fields":[{"name":"n","type":"long"}]},"cache":{"ttl":"1m"}}`)
	var tv struct {
		CacheGeneration int64 `json:"cacheGeneration"`
	}
	resp, err := http.Get(base + "/_schemas/shop/Order")
	if err != nil {
		t.Fatal(err)
	}
	json.NewDecoder(resp.Body).Decode(&tv)
	resp.Body.Close()

	scnOf := func(h http.Header) scn.SCN {
		var g, s uint64
		if _, err := fmt.Sscanf(h.Get("X-Doppio-SCN"), "%d:%d", &g, &s); err != nil {
			t.Fatalf("X-Doppio-SCN %q: %v", h.Get("X-Doppio-SCN"), err)
		}
		return scn.SCN{Generation: g, Sequence: s}
	}
	st, err := cache.Open(cache.Config{Addrs: rc.Addrs()})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	write := func(id int64, e cache.Entry) {
		k, _ := keys.EncodeTuple(keys.Tuple{"ann", id})
		pk, _ := keys.EncodeTuple(keys.Tuple{"ann"})
		ref := cache.Ref{DB: "shop", Generation: tv.CacheGeneration, Table: "Order", Partition: keys.PartitionOf(pk, 2), Key: k}
		if _, err := st.Upsert(ctx, cache.Write{Ref: ref, Entry: e, TTL: time.Minute}); err != nil {
			t.Fatal(err)
		}
	}
	now := time.Now().UnixMilli()
	doc := func(s scn.SCN) cache.Entry {
		return cache.Entry{SCN: s, AsOf: now, Version: 1, Data: []byte{2}, Mtime: now}
	}

	_, h := call(t, "PUT", base+"/shop/Order/ann/1", `{"n":1}`)
	write(1, doc(scnOf(h))) // current
	_, h = call(t, "PUT", base+"/shop/Order/ann/2", `{"n":1}`)
	old := scnOf(h)
	call(t, "PUT", base+"/shop/Order/ann/2", `{"n":2}`)
	write(2, doc(old)) // outdated
	_, h = call(t, "PUT", base+"/shop/Order/ann/3", `{"n":1}`)
	s3 := scnOf(h)
	call(t, "DELETE", base+"/shop/Order/ann/3", "")
	write(3, cache.Entry{SCN: scn.SCN{Generation: s3.Generation, Sequence: s3.Sequence + 1}, AsOf: now}) // tombstone of a deleted document
	_, h = call(t, "PUT", base+"/shop/Order/ann/4", `{"n":1}`)
	write(4, cache.Entry{SCN: scnOf(h), AsOf: now}) // tombstone of a live document
	_, h = call(t, "PUT", base+"/shop/Order/ann/5", `{"n":1}`)
	write(5, doc(scnOf(h)))
	call(t, "DELETE", base+"/shop/Order/ann/5", "") // deleted behind the tier's back

	rep, err := cachecheck.Check(ctx, st, cachecheck.HTTPSource{URL: base}, "shop", 2, []cachecheck.Table{{Name: "Order", Generation: tv.CacheGeneration}})
	if err != nil {
		t.Fatal(err)
	}
	got := map[int64]bool{}
	for _, d := range rep.Diverged {
		got[d.Key[1].(int64)] = true
		t.Log(d)
	}
	if rep.Checked != 5 || len(rep.Diverged) != 3 || !got[2] || !got[4] || !got[5] {
		t.Fatalf("checked %d, diverged %v; want 5 checked and ids 2, 4, 5", rep.Checked, rep.Diverged)
	}
}
