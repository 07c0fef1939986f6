package api_test

import (
	"encoding/json"
	"testing"
)

// TestTableCacheSettingsChangeWithoutAVersion: a table's cache settings
// are set at creation or later, shown by GET, changed and cleared
// without registering a schema version, and kept by a schema-only PUT.
func TestTableCacheSettingsChangeWithoutAVersion(t *testing.T) {
	db := newDB(t)
	type view struct {
		Version int `json:"version"`
		Cache   *struct {
			TTL            string `json:"ttl"`
			BootstrapEvery string `json:"bootstrapEvery"`
		} `json:"cache"`
		CacheGeneration int64 `json:"cacheGeneration"`
	}
	get := func(table string) view {
		t.Helper()
		a := send(t, "GET", "/_schemas/"+db+"/"+table, nil)
		expect(t, a, 200, "get table")
		var v view
		if err := json.Unmarshal(a.body, &v); err != nil {
			t.Fatal(err)
		}
		return v
	}
	if v := get("Mailbox"); v.Cache != nil || v.CacheGeneration != 0 {
		t.Fatalf("a table created without cache settings shows %+v", v)
	}
	a := send(t, "PUT", "/_schemas/"+db+"/Mailbox", `{"cache":{"ttl":"10m"}}`)
	expect(t, a, 200, "set cache settings")
	v := get("Mailbox")
	if v.Version != 1 || v.Cache == nil || v.Cache.TTL != "10m0s" || v.Cache.BootstrapEvery != "5m0s" || v.CacheGeneration <= 0 {
		t.Fatalf("after setting ttl 10m: %+v (want version 1, bootstrap every half the ttl, a generation)", v)
	}
	gen := v.CacheGeneration
	expect(t, send(t, "PUT", "/_schemas/"+db+"/Mailbox", mailboxTable), 200, "schema-only PUT")
	if v := get("Mailbox"); v.Cache == nil || v.Cache.TTL != "10m0s" || v.Version != 1 {
		t.Fatalf("a PUT without cache changed the settings: %+v", v)
	}
	expect(t, send(t, "PUT", "/_schemas/"+db+"/Mailbox", `{"cache":{"ttl":"1h","bootstrapEvery":"90s"}}`), 200, "change settings")
	if v := get("Mailbox"); v.Cache == nil || v.Cache.TTL != "1h0m0s" || v.Cache.BootstrapEvery != "1m30s" || v.Version != 1 || v.CacheGeneration != gen {
		t.Fatalf("after changing to 1h/90s: %+v (generation was %d)", v, gen)
	}
	expect(t, send(t, "PUT", "/_schemas/"+db+"/Mailbox", `{"cache":null}`), 200, "clear settings")
	if v := get("Mailbox"); v.Cache != nil || v.Version != 1 {
		t.Fatalf("after cache null: %+v", v)
	}
	// Created cacheable, with a generation above its predecessors'.
	a = send(t, "PUT", "/_schemas/"+db+"/Cached", `{"key":[{"name":"id","type":"string"}],"schema":{"type":"record","name":"C","fields":[{"name":"n","type":"long"}]},"cache":{"ttl":"30s","bootstrapEvery":"10s"}}`)
	expect(t, a, 201, "create a cacheable table")
	if v := get("Cached"); v.Cache == nil || v.Cache.TTL != "30s" || v.Cache.BootstrapEvery != "10s" || v.CacheGeneration <= gen {
		t.Fatalf("created cacheable: %+v (Mailbox's generation %d)", v, gen)
	}
}
