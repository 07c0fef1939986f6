package api_test

import (
	"encoding/json"
	"fmt"
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
