package api_test

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"
)

const indexedMessages = `{"key":[{"name":"mailboxId","type":"string"},{"name":"messageId","type":"long"}],
  "schema":{"type":"record","name":"Msg","fields":[
    {"name":"subject","type":"string","index":"text"},
    {"name":"isInbox","type":"boolean","index":"attribute"},
    {"name":"createdOn","type":{"type":"long","logicalType":"timestamp-millis"},"index":"attribute"},
    {"name":"labels","type":{"type":"array","items":"string"},"default":[],"index":"attribute"},
    {"name":"note","type":"string","default":""}]}}`

// queryKeys runs a query read and returns the message ids and the cursor.
func queryKeys(t *testing.T, path string) ([]int64, string) {
	t.Helper()
	a := send(t, "GET", path, nil)
	expect(t, a, 200, "GET "+path)
	var body struct {
		Documents []struct {
			Key      []any           `json:"key"`
			Document json.RawMessage `json:"document"`
		}
		Next string
	}
	if err := json.Unmarshal(a.body, &body); err != nil {
		t.Fatal(err)
	}
	var ids []int64
	for _, d := range body.Documents {
		ids = append(ids, int64(d.Key[1].(float64)))
	}
	return ids, body.Next
}

func seedMessages(t *testing.T, db string) {
	t.Helper()
	expect(t, send(t, "PUT", "/_schemas/"+db+"/Msg", indexedMessages), 201, "create Msg")
	docs := []struct {
		subject string
		inbox   bool
		at      int64
		labels  []string
	}{
		{"Lunch on Friday", true, 300, []string{"work"}},
		{"Budget review", true, 100, []string{"work", "urgent"}},
		{"Friday drinks", false, 200, []string{}},
		{"lunch menu for friday", true, 400, []string{"food"}},
		{"Straße und Café", true, 50, []string{}},
	}
	for i, d := range docs {
		expect(t, send(t, "PUT", fmt.Sprintf("/%s/Msg/alice/%d", db, i+1),
			map[string]any{"subject": d.subject, "isInbox": d.inbox, "createdOn": d.at, "labels": d.labels}), 201, "put")
	}
	expect(t, send(t, "PUT", "/"+db+"/Msg/bob/1", map[string]any{"subject": "lunch", "isInbox": true, "createdOn": 1}), 201, "put bob")
}

func TestQueryOneDocumentGroup(t *testing.T) {
	db := newDB(t)
	seedMessages(t, db)
	base := "/" + db + "/Msg/alice?"
	for _, c := range []struct {
		query string
		want  []int64
	}{
		// The paper's example: the inbox, newest first.
		{"query=isInbox:true&sort=-createdOn", []int64{4, 1, 2, 5}},
		{"query=subject:lunch", []int64{1, 4}},
		{"query=lunch", []int64{1, 4}}, // bare word: every text field
		{"query=" + urlq(`subject:"lunch on friday"`), []int64{1}},
		{"query=" + urlq("subject:fri*") + "&sort=createdOn", []int64{3, 1, 4}},
		{"query=" + urlq("createdOn:[100 TO 300]") + "&sort=-createdOn", []int64{1, 3, 2}},
		{"query=" + urlq("createdOn:{100 TO *}"), []int64{1, 3, 4}},
		{"query=" + urlq("friday AND NOT isInbox:true"), []int64{3}},
		{"query=" + urlq("(labels:urgent OR labels:food) AND isInbox:true"), []int64{2, 4}},
		{"query=" + urlq("strasse"), []int64{5}}, // case folding
		{"query=" + urlq("*") + "&sort=-createdOn&limit=2", []int64{4, 1}},
	} {
		if got, _ := queryKeys(t, base+c.query); !slices.Equal(got, c.want) {
			t.Errorf("%s = %v, want %v", c.query, got, c.want)
		}
	}
	// Only the group asked for is searched.
	if got, _ := queryKeys(t, "/"+db+"/Msg/bob?query=lunch"); !slices.Equal(got, []int64{1}) {
		t.Errorf("bob's lunch = %v", got)
	}
	// count=true answers just the number.
	a := send(t, "GET", base+"query=isInbox:true&count=true", nil)
	expect(t, a, 200, "count")
	if canon(t, a.body) != `{"count":4}` {
		t.Errorf("count answered %s", a.body)
	}
	// Projection applies to query results.
	a = send(t, "GET", base+"query=subject:budget&fields=createdOn", nil)
	if !strings.Contains(string(a.body), `"document":{"createdOn":100}`) {
		t.Errorf("projected query answered %s", a.body)
	}
}

func TestQueryPagesWithStableCursorAndSeesWrites(t *testing.T) {
	db := newDB(t)
	seedMessages(t, db)
	base := "/" + db + "/Msg/alice?query=isInbox:true&sort=-createdOn&limit=2"
	page1, next := queryKeys(t, base)
	if !slices.Equal(page1, []int64{4, 1}) || next == "" {
		t.Fatalf("page 1 = %v next %q", page1, next)
	}
	// A newer message and a deletion between pages shift nothing.
	expect(t, send(t, "PUT", "/"+db+"/Msg/alice/9", map[string]any{"subject": "new", "isInbox": true, "createdOn": 999}), 201, "put")
	expect(t, send(t, "DELETE", "/"+db+"/Msg/alice/4", nil), 204, "delete")
	page2, next := queryKeys(t, base+"&cursor="+next)
	if !slices.Equal(page2, []int64{2, 5}) {
		t.Fatalf("page 2 = %v", page2)
	}
	if next != "" {
		if page3, _ := queryKeys(t, base+"&cursor="+next); len(page3) != 0 {
			t.Fatalf("page 3 = %v", page3)
		}
	}
	// Read your writes: the query right after the write sees it.
	if got, _ := queryKeys(t, base); !slices.Equal(got, []int64{9, 1}) {
		t.Fatalf("after writes = %v", got)
	}
	// A partial update moves the message out of the inbox at once.
	expect(t, send(t, "PATCH", "/"+db+"/Msg/alice/9", `{"$set":{"isInbox":false}}`), 200, "patch")
	if got, _ := queryKeys(t, base); !slices.Equal(got, []int64{1, 2}) {
		t.Fatalf("after patch = %v", got)
	}
	// So does a transaction, and a collection delete empties the index.
	expect(t, send(t, "POST", "/"+db+"/_txn", `{"ops":[{"op":"put","table":"Msg","key":["alice",20],"document":{"subject":"t","isInbox":true,"createdOn":5000}},{"op":"delete","table":"Msg","key":["alice",1]}]}`), 200, "txn")
	if got, _ := queryKeys(t, base); !slices.Equal(got, []int64{20, 2}) {
		t.Fatalf("after txn = %v", got)
	}
	expect(t, send(t, "DELETE", "/"+db+"/Msg/alice", nil), 204, "delete collection")
	if got, _ := queryKeys(t, "/"+db+"/Msg/alice?query=*"); len(got) != 0 {
		t.Fatalf("after collection delete = %v", got)
	}
}

func TestBadQueriesAnswer400WithPosition(t *testing.T) {
	db := newDB(t)
	seedMessages(t, db)
	base := "/" + db + "/Msg/alice?"
	for _, c := range []struct{ params, field, detail string }{
		{"query=" + urlq("subject:"), "query", "position"},
		{"query=" + urlq("(lunch"), "query", "position"},
		{"query=" + urlq("nosuch:x"), "query", "nosuch"},
		{"query=" + urlq("note:x"), "query", "note"},
		{"query=" + urlq("createdOn:abc"), "query", "createdOn"},
		{"query=lunch&sort=subject", "sort", "subject"},
		{"query=lunch&sort=-nosuch", "sort", "nosuch"},
		{"query=lunch&limit=100000", "limit", "limit"},
		{"query=lunch&limit=0", "limit", "limit"},
		{"query=lunch&cursor=garbage", "cursor", "cursor"},
		{"query=lunch&count=maybe", "count", "count"},
		{"query=" + urlq(strings.Repeat("(", 40)+"a"+strings.Repeat(")", 40)), "query", ""},
	} {
		a := send(t, "GET", base+c.params, nil)
		expect(t, a, 400, c.params)
		p := decode(t, a.body)
		if p["field"] != c.field || !strings.Contains(fmt.Sprint(p["detail"]), c.detail) {
			t.Errorf("%s: problem %s", c.params, a.body)
		}
	}
}

func TestAddingAnIndexBackfillsOnline(t *testing.T) {
	db := newDB(t)
	const unindexed = `{"key":[{"name":"box","type":"string"},{"name":"id","type":"long"}],
	  "schema":{"type":"record","name":"Note","fields":[{"name":"color","type":"string"}]}}`
	expect(t, send(t, "PUT", "/_schemas/"+db+"/Note", unindexed), 201, "create Note")
	const n = 1500
	for i := range n / 100 {
		var ops []string
		for j := range 100 {
			id := i*100 + j
			ops = append(ops, fmt.Sprintf(`{"op":"put","table":"Note","key":["b%d",%d],"document":{"color":"c%d"}}`, id%3, id, id%5))
		}
		// One transaction per group and chunk.
		for g := range 3 {
			var mine []string
			for j, op := range ops {
				if (i*100+j)%3 == g {
					mine = append(mine, op)
				}
			}
			expect(t, send(t, "POST", "/"+db+"/_txn", `{"ops":[`+strings.Join(mine, ",")+`]}`), 200, "seed")
		}
	}
	// The test node backfills 500 documents per second (TestMain): three
	// seconds of building.
	indexed := strings.Replace(unindexed, `"type":"string"}]}`, `"type":"string","index":"attribute"}]}`, 1)
	a := send(t, "PUT", "/_schemas/"+db+"/Note", indexed)
	expect(t, a, 200, "add index")
	var view struct {
		Version int
		Indexes []struct {
			Field, State string
			Progress     float64
		}
	}
	json.Unmarshal(a.body, &view)
	if view.Version != 2 || len(view.Indexes) != 1 || view.Indexes[0].State != "building" {
		t.Fatalf("table after adding the index: %s", a.body)
	}
	// A backup refuses a partition whose index is still being built: its
	// entries are partial and would restore as a complete index.
	refused := 0
	for p := range 4 {
		b := send(t, "GET", fmt.Sprintf("/_cluster/backup/%s/%d", db, p), nil)
		if b.status == 409 {
			if pr := decode(t, b.body); pr["field"] != "color" || !strings.Contains(fmt.Sprint(pr["detail"]), "is being built") {
				t.Fatalf("backup during the build: %s", b.body)
			}
			refused++
		}
	}
	if refused == 0 {
		t.Fatalf("no partition's backup was refused while its index was being built")
	}
	q := send(t, "GET", "/"+db+"/Note/b0?query=color:c1", nil)
	expect(t, q, 409, "query during the build")
	if p := decode(t, q.body); p["field"] != "color" || !strings.Contains(fmt.Sprint(p["detail"]), "%") {
		t.Fatalf("409 problem: %s", q.body)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		a := send(t, "GET", "/_schemas/"+db+"/Note", nil)
		json.Unmarshal(a.body, &view)
		if view.Indexes[0].State == "ready" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("index not built: %s", a.body)
		}
		time.Sleep(50 * time.Millisecond)
	}
	for p := range 4 {
		expect(t, send(t, "GET", fmt.Sprintf("/_cluster/backup/%s/%d", db, p), nil), 200, "backup once the index is built")
	}
	got, _ := queryKeys(t, "/"+db+"/Note/b0?query=color:c1&limit=1000")
	var want []int64
	for id := range n {
		if id%3 == 0 && id%5 == 1 {
			want = append(want, int64(id))
		}
	}
	if !slices.Equal(got, want) {
		t.Fatalf("after the backfill color:c1 in b0 = %d ids, want %d", len(got), len(want))
	}
}

func urlq(s string) string {
	r := strings.NewReplacer("%", "%25", " ", "%20", "&", "%26", "+", "%2B", "#", "%23", "\"", "%22", "[", "%5B", "]", "%5D", "{", "%7B", "}", "%7D", "*", "%2A", ":", "%3A", "(", "%28", ")", "%29")
	return r.Replace(s)
}

func TestQueryWithoutPartitionKeyMergesEveryPartition(t *testing.T) {
	db := newDB(t) // 4 partitions
	expect(t, send(t, "PUT", "/_schemas/"+db+"/Msg", indexedMessages), 201, "create Msg")
	type doc struct {
		box string
		id  int64
		at  int64
	}
	var inbox []doc
	for b := range 12 {
		for i := range 4 {
			id, at := int64(i+1), int64((b*7+i*13)%50) // ties on createdOn across mailboxes
			isInbox := (b+i)%3 != 0
			box := fmt.Sprint("box", b)
			expect(t, send(t, "PUT", fmt.Sprintf("/%s/Msg/%s/%d", db, box, id),
				map[string]any{"subject": "hello", "isInbox": isInbox, "createdOn": at, "labels": []string{}}), 201, "put")
			if isInbox {
				inbox = append(inbox, doc{box, id, at})
			}
		}
	}
	// Expected order: createdOn descending, ties by full key descending.
	slices.SortFunc(inbox, func(a, b doc) int {
		if a.at != b.at {
			return int(b.at - a.at)
		}
		if a.box != b.box {
			return strings.Compare(b.box, a.box)
		}
		return int(b.id - a.id)
	})
	var got []string
	cursor := ""
	for page := 0; ; page++ {
		path := "/" + db + "/Msg?query=isInbox:true&sort=-createdOn&limit=5"
		if cursor != "" {
			path += "&cursor=" + cursor
		}
		a := send(t, "GET", path, nil)
		expect(t, a, 200, "page")
		var body struct {
			Documents []struct{ Key []any }
			Next      string
		}
		json.Unmarshal(a.body, &body)
		for _, d := range body.Documents {
			got = append(got, fmt.Sprintf("%s/%v", d.Key[0], d.Key[1]))
		}
		if body.Next == "" {
			break
		}
		cursor = body.Next
		if page > 20 {
			t.Fatal("too many pages")
		}
	}
	var want []string
	for _, d := range inbox {
		want = append(want, fmt.Sprintf("%s/%d", d.box, d.id))
	}
	if !slices.Equal(got, want) {
		t.Fatalf("merged pages\n got %v\nwant %v", got, want)
	}
	a := send(t, "GET", "/"+db+"/Msg?query=isInbox:true&count=true", nil)
	if canon(t, a.body) != fmt.Sprintf(`{"count":%d}`, len(inbox)) {
		t.Fatalf("count = %s, want %d", a.body, len(inbox))
	}
	expect(t, send(t, "GET", "/"+db+"/Msg", nil), 400, "whole table without a query")
}
