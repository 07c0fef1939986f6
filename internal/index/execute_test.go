package index_test

import (
	"reflect"
	"strings"
	"testing"

	"github.com/doppio-db/doppio/internal/index"
	"github.com/doppio-db/doppio/internal/problem"
	"github.com/doppio-db/doppio/internal/query"
)

const messageSchema = `{"type":"record","name":"Message","fields":[
	{"name":"subject","type":"string","index":"text"},
	{"name":"isInbox","type":"boolean","index":"attribute"},
	{"name":"createdOn","type":{"type":"long","logicalType":"timestamp-millis"},"index":"attribute"},
	{"name":"size","type":["null","double"],"default":null,"index":"attribute"},
	{"name":"tags","type":{"type":"array","items":"string"},"default":[],"index":"attribute"},
	{"name":"folder","type":{"type":"enum","name":"F","symbols":["INBOX","SENT","TRASH"]},"default":"INBOX","index":"attribute"},
	{"name":"from","type":{"type":"record","name":"From","fields":[{"name":"city","type":"string","index":"attribute"}]}},
	{"name":"note","type":"string","default":""}]}`

// messages of mailbox "m1" (ids 1..8) and one of "m2" that no m1 query sees.
var messages = []string{
	`{"subject":"Hello world","isInbox":true,"createdOn":100,"size":1.5,"tags":["work","urgent"],"from":{"city":"Paris"}}`,
	`{"subject":"Re: hello there, World","isInbox":true,"createdOn":300,"size":-2,"tags":["home"],"from":{"city":"Berlin"}}`,
	`{"subject":"Weekly report","isInbox":false,"createdOn":200,"tags":["work"],"folder":"SENT","from":{"city":"Paris"}}`,
	`{"subject":"World hello","isInbox":true,"createdOn":300,"size":10,"tags":[],"from":{"city":"Pisa"}}`,
	`{"subject":"Straße nach München","isInbox":false,"createdOn":50,"size":0,"tags":["travel","work","b"],"folder":"TRASH","from":{"city":"München"}}`,
	`{"subject":"東京へようこそ","isInbox":true,"createdOn":400,"tags":["travel"],"from":{"city":"Tokyo"}}`,
	`{"subject":"hello hello hello","isInbox":false,"createdOn":150,"size":2.25,"tags":["a","z"],"from":{"city":""}}`,
	`{"subject":"","isInbox":true,"createdOn":-10,"tags":["home","work"],"from":{"city":"paris"}}`,
}

func TestQueriesReturnExactKeysInOrder(t *testing.T) {
	tb := mustCompile(t, messageSchema)
	s := newStore(t, tb.Indexes())
	for i, m := range messages {
		s.put(str("m1"), tuple(int64(i+1)), mustJSON(t, tb, m))
	}
	s.put(str("m2"), tuple(int64(1)), mustJSON(t, tb, messages[0]))
	sch := query.SchemaOf(tb)
	tests := []struct {
		q, sort string
		want    string // ids in order
	}{
		{"*", "", "1 2 3 4 5 6 7 8"},
		{"", "", "1 2 3 4 5 6 7 8"},
		{"hello", "", "1 2 4 7"},
		{"HELLO", "", "1 2 4 7"},
		{"subject:world", "", "1 2 4"},
		{`subject:"hello world"`, "", "1"}, // not "hello there, World", not "World hello"
		{`subject:"world hello"`, "", "4"},
		{`subject:"hello hello"`, "", "7"},
		{`"re hello"`, "", "2"},
		{"subject:strasse", "", "5"},
		{"subject:münchen", "", "5"},
		{`subject:"東京"`, "", "6"},
		{"subject:東", "", "6"},
		{"subject:he*", "", "1 2 4 7"},
		{"subject:*", "", "1 2 3 4 5 6 7"},
		{"isInbox:true", "", "1 2 4 6 8"},
		{"isInbox:false", "", "3 5 7"},
		{"createdOn:300", "", "2 4"},
		{"createdOn:[100 TO 300}", "", "1 3 7"},
		{"createdOn:{100 TO *]", "", "2 3 4 6 7"},
		{"createdOn:[* TO 0]", "", "8"},
		{"size:[-2 TO 1.5]", "", "1 2 5"},
		{"size:{0 TO *}", "", "1 4 7"},
		{"size:*", "", "1 2 4 5 7"},
		{"NOT size:*", "", "3 6 8"},
		{"tags:work", "", "1 3 5 8"},
		{"tags:[a TO c}", "", "5 7"},
		{"tags:t*", "", "5 6"},
		{"folder:SENT OR folder:TRASH", "", "3 5"},
		{"from.city:Paris", "", "1 3"},
		{"from.city:P*", "", "1 3 4"},
		{`from.city:""`, "", "7"},
		{"isInbox:true AND hello", "", "1 2 4"},
		{"isInbox:true -hello", "", "6 8"},
		{"NOT isInbox:true", "", "3 5 7"},
		{"NOT (hello OR tags:work)", "", "6"},
		{"tags:work AND NOT tags:urgent AND NOT folder:TRASH", "", "3 8"},
		{"(tags:home OR tags:travel) isInbox:true", "", "2 6 8"},
		{"hello OR createdOn:[300 TO *]", "", "1 2 4 6 7"},
		{"nothing", "", ""},
		{"nothing OR NOT nothing", "", "1 2 3 4 5 6 7 8"},
		// Sorting: ties by key, reversed for descending; missing values last in key order.
		{"*", "createdOn", "8 5 1 7 3 2 4 6"},
		{"*", "-createdOn", "6 4 2 3 7 1 5 8"},
		{"isInbox:true", "-createdOn", "6 4 2 1 8"},
		{"*", "size", "2 5 1 7 4 3 6 8"},
		{"*", "-size", "4 7 1 5 2 3 6 8"},
		{"*", "tags", "7 5 2 8 6 1 3 4"},  // by smallest tag: a b home home travel urgent work, then none
		{"*", "-tags", "7 8 5 3 1 6 2 4"}, // by largest tag: z work×4 (keys descending) travel home, then none
		{"*", "from.city", "7 2 5 1 3 4 6 8"},
		{"*", "-folder", "5 3 8 7 6 4 2 1"}, // enums sort by name
	}
	for _, tc := range tests {
		t.Run(tc.q+" sort "+tc.sort, func(t *testing.T) {
			p, err := query.Compile(tc.q, tc.sort, sch)
			if err != nil {
				t.Fatal(err)
			}
			res, err := index.Execute(s.e, s.p, s.table, str("m1"), nil, p.Op, index.Options{Sort: p.Sort})
			if err != nil {
				t.Fatal(err)
			}
			if got := ids(res.Keys); got != tc.want {
				t.Fatalf("plan %s\n got %q\nwant %q", p, got, tc.want)
			}
			if res.Next != "" {
				t.Fatalf("Next = %q without a limit", res.Next)
			}
			// Every page size gives the same sequence, page after page.
			for limit := 1; limit <= 3; limit++ {
				var all [][]byte
				cursor := ""
				for pages := 0; ; pages++ {
					res, err := index.Execute(s.e, s.p, s.table, str("m1"), nil, p.Op, index.Options{Sort: p.Sort, Limit: limit, Cursor: cursor})
					if err != nil {
						t.Fatal(err)
					}
					if len(res.Keys) > limit || (res.Next != "" && len(res.Keys) != limit) {
						t.Fatalf("limit %d: page of %d, next %q", limit, len(res.Keys), res.Next)
					}
					all = append(all, res.Keys...)
					if cursor = res.Next; cursor == "" || pages > 20 {
						break
					}
				}
				if got := ids(all); got != tc.want {
					t.Fatalf("limit %d: paged\n got %q\nwant %q", limit, got, tc.want)
				}
			}
			res, err = index.Execute(s.e, s.p, s.table, str("m1"), nil, p.Op, index.Options{Count: true})
			if err != nil {
				t.Fatal(err)
			}
			if want := len(strings.Fields(tc.want)); res.Count != want || len(res.Keys) != 0 {
				t.Fatalf("Count = %d (keys %d), want %d", res.Count, len(res.Keys), want)
			}
		})
	}
}

func ids(ks [][]byte) string {
	var s []string
	for _, k := range render(ks) {
		s = append(s, strings.Trim(k, "[]"))
	}
	return strings.Join(s, " ")
}

func TestRestPrefixNarrowsToSubCollection(t *testing.T) {
	tb := mustCompile(t, messageSchema)
	s := newStore(t, tb.Indexes())
	doc := mustJSON(t, tb, messages[0])
	// Keys (mbox, folder, id) stored under a 2-part table for the test:
	// the index does not look at key types.
	for _, k := range []struct {
		folder string
		id     int64
	}{{"a", 1}, {"a", 2}, {"ab", 1}, {"b", 1}} {
		s.put(str("m1"), tuple(k.folder, k.id), doc)
	}
	p, _ := query.Compile("hello", "createdOn", query.SchemaOf(tb))
	for _, tc := range []struct {
		prefix []byte
		want   []string
	}{
		{nil, []string{`["a",1]`, `["a",2]`, `["ab",1]`, `["b",1]`}},
		{str("a"), []string{`["a",1]`, `["a",2]`}},
		{str("ab"), []string{`["ab",1]`}},
		{tuple("a", int64(2)), []string{`["a",2]`}},
		{str("c"), []string{}},
	} {
		for _, op := range []index.Op{p.Op, index.Not{Op: index.Equal{Field: "subject", Value: "nope"}}} {
			res, err := index.Execute(s.e, s.p, s.table, str("m1"), tc.prefix, op, index.Options{Sort: p.Sort})
			if err != nil {
				t.Fatal(err)
			}
			if got := render(res.Keys); !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("prefix %x %s: got %v, want %v", tc.prefix, op, got, tc.want)
			}
		}
	}
}

func TestBadCursorIsMalformed(t *testing.T) {
	tb := mustCompile(t, messageSchema)
	s := newStore(t, tb.Indexes())
	for i, m := range messages {
		s.put(str("m1"), tuple(int64(i+1)), mustJSON(t, tb, m))
	}
	res, err := index.Execute(s.e, s.p, s.table, str("m1"), nil, index.All{}, index.Options{Sort: index.Sort{Field: "createdOn"}, Limit: 2})
	if err != nil || res.Next == "" {
		t.Fatal(res, err)
	}
	for _, tc := range []struct {
		cursor string
		sort   index.Sort
		detail string
	}{
		{"!!", index.Sort{Field: "createdOn"}, "cursor: not a cursor"},
		{"AQ", index.Sort{Field: "createdOn"}, "cursor: not a cursor"},
		{res.Next, index.Sort{Field: "createdOn", Desc: true}, "cursor: it was made for another sort"},
		{res.Next, index.Sort{}, "cursor: it was made for another sort"},
		{res.Next[:len(res.Next)-14], index.Sort{Field: "createdOn"}, "cursor: not a cursor"},
	} {
		_, err := index.Execute(s.e, s.p, s.table, str("m1"), nil, index.All{}, index.Options{Sort: tc.sort, Limit: 2, Cursor: tc.cursor})
		e, ok := problem.As(err)
		if !ok || e.Kind != problem.Malformed || e.Field != "cursor" || !strings.HasPrefix(e.Detail, tc.detail) {
			t.Fatalf("cursor %q sort %v: got %v, want Malformed %q", tc.cursor, tc.sort, err, tc.detail)
		}
	}
}
