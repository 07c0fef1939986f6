package e2e

import (
	"encoding/json"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"
)

const foldMessageSchema = `{"key":[{"name":"box","type":"string"},{"name":"id","type":"long"}],
 "schema":{"type":"record","name":"Message","fields":[{"name":"subject","type":"string","index":"text"},{"name":"n","type":"long","index":"attribute"}]}}`

// foldedDocuments sums doppio_index_folded_documents_total over the node's
// partitions.
func foldedDocuments(t *testing.T, n *devNode) float64 {
	t.Helper()
	var sum float64
	for _, line := range strings.Split(string(n.must(200, "GET", "/metrics", nil)), "\n") {
		if rest, ok := strings.CutPrefix(line, "doppio_index_folded_documents_total{"); ok {
			f, err := strconv.ParseFloat(rest[strings.LastIndexByte(rest, ' ')+1:], 64)
			if err != nil {
				t.Fatalf("%q: %v", line, err)
			}
			sum += f
		}
	}
	return sum
}

// TestAMailboxTextIsFoldedAndAnswersTheSameAfterAKill writes 300 messages
// one at a time to one mailbox of the built binary: their text is written
// pending, then folded in the background once 256 piled up (the metric
// counts them), and text queries answer the same throughout, and after a
// kill -9 and a restart.
func TestAMailboxTextIsFoldedAndAnswersTheSameAfterAKill(t *testing.T) {
	data := t.TempDir()
	n := startDev(t, data)
	n.must(201, "PUT", "/_schemas/fold", map[string]any{"partitions": 2, "replicas": 1})
	n.must(201, "PUT", "/_schemas/fold/Message", foldMessageSchema)
	const total = 300
	want := map[string]int{
		"subject:w3":                    0,
		`subject:"w3 common"`:           0,
		"subject:w*":                    total,
		"subject:common AND n:[0 TO 9]": 10,
		"NOT subject:w0":                0,
	}
	for i := range total {
		n.must(201, "PUT", fmt.Sprintf("/fold/Message/box/%d", i), map[string]any{"subject": fmt.Sprintf("w%d common", i%7), "n": i})
		if i%7 == 3 {
			want["subject:w3"]++
			want[`subject:"w3 common"`]++
		}
		if i%7 != 0 {
			want["NOT subject:w0"]++
		}
	}
	check := func(n *devNode, when string) {
		t.Helper()
		for q, c := range want {
			var res struct {
				Count int `json:"count"`
			}
			b := n.must(200, "GET", "/fold/Message/box?count=true&query="+url.QueryEscape(q), nil)
			if err := json.Unmarshal(b, &res); err != nil || res.Count != c {
				t.Errorf("%s: %s counted %s, want %d", when, q, b, c)
			}
		}
	}
	check(n, "written")
	waitFor(t, 30*time.Second, "the mailbox's text folded", func() (bool, string) {
		got := foldedDocuments(t, n)
		return got >= 256, fmt.Sprintf("%v documents folded", got)
	})
	check(n, "folded")
	n.kill()
	n = startDev(t, data)
	check(n, "restarted")
}
