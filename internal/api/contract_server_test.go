package api_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"
)

// TestDatabaseSettingsTakeAnyJSONInteger guards what the contract
// declares: partitions and replicas are JSON Schema integers, so 4.0 and
// 4e0 are the number 4, as a generated client may write them.
func TestDatabaseSettingsTakeAnyJSONInteger(t *testing.T) {
	db := fmt.Sprintf("int%d", time.Now().UnixNano()%1e9)
	expect(t, send(t, "PUT", "/_schemas/"+db, `{"partitions":4.0,"replicas":1e0,"partitioner":"hash"}`), 201, "create")
	var view struct {
		Partitions  int    `json:"partitions"`
		Replicas    int    `json:"replicas"`
		Partitioner string `json:"partitioner"`
	}
	if err := json.Unmarshal(send(t, "GET", "/_schemas/"+db, nil).body, &view); err != nil {
		t.Fatal(err)
	}
	if view.Partitions != 4 || view.Replicas != 1 || view.Partitioner != "hash" {
		t.Fatalf("database %+v, want 4 partitions, 1 replica, hash", view)
	}
}

// TestOpenAPIKeysParameter: /_openapi serves the document as written by
// default and for keys=spanning, the generators' form for keys=split, and
// refuses any other value or parameter with 400.
func TestOpenAPIKeysParameter(t *testing.T) {
	whole := send(t, "GET", "/_openapi", nil)
	expect(t, whole, 200, "the document")
	if !strings.Contains(string(whole.body), "/{db}/{table}/{key}:") {
		t.Fatalf("the default document lacks the spanning key path")
	}
	if a := send(t, "GET", "/_openapi?keys=spanning", nil); a.status != 200 || string(a.body) != string(whole.body) {
		t.Fatalf("keys=spanning: %d, same as default: %v", a.status, string(a.body) == string(whole.body))
	}
	split := send(t, "GET", "/_openapi?keys=split", nil)
	expect(t, split, 200, "the split document")
	if !strings.Contains(string(split.body), "/{db}/{table}/{key1}/{key2}:") || strings.Contains(string(split.body), "/{db}/{table}/{key}:") {
		t.Fatalf("keys=split did not split the key path")
	}
	expect(t, send(t, "GET", "/_openapi?keys=both", nil), 400, "an unknown keys value")
	expect(t, send(t, "GET", "/_openapi?format=json", nil), 400, "an unknown parameter")
}
