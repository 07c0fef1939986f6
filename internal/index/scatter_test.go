package index_test

import (
	"encoding/base64"
	"fmt"
	"strings"
	"testing"

	"github.com/doppio-db/doppio/internal/index"
	"github.com/doppio-db/doppio/internal/problem"
	"github.com/doppio-db/doppio/internal/query"
)

// TestQueryWithoutPartitionKeyReturnsExactKeysInOrder: mailboxes m1, m3 in
// one partition, m2, m4 in another; ExecuteAll on both, merged.
func TestQueryWithoutPartitionKeyReturnsExactKeysInOrder(t *testing.T) {
	tb := mustCompile(t, messageSchema)
	c := newCluster(t, tb.Indexes(), 2)
	c.groupOf[string(str("m2"))] = 1
	c.groupOf[string(str("m4"))] = 1
	for i, at := range []struct {
		mbox string
		id   int64
	}{{"m1", 1}, {"m1", 2}, {"m3", 1}, {"m2", 1}, {"m2", 2}, {"m4", 1}, {"m4", 2}, {"m4", 3}} {
		c.put(str(at.mbox), tuple(at.id), mustJSON(t, tb, messages[i]))
	}
	sch := query.SchemaOf(tb)
	for _, tc := range []struct {
		q, sort string
		want    string
	}{
		{"*", "", "m1/1 m1/2 m2/1 m2/2 m3/1 m4/1 m4/2 m4/3"},
		{"hello", "", "m1/1 m1/2 m2/1 m4/2"},
		{"NOT isInbox:true", "", "m2/2 m3/1 m4/2"},
		{"nothing", "", ""},
		{"*", "createdOn", "m4/3 m2/2 m1/1 m4/2 m3/1 m1/2 m2/1 m4/1"}, // 300: m1/2 before m2/1
		{"*", "-createdOn", "m4/1 m2/1 m1/2 m3/1 m4/2 m1/1 m2/2 m4/3"},
		{"isInbox:true", "-createdOn", "m4/1 m2/1 m1/2 m1/1 m4/3"},
		{"*", "size", "m1/2 m2/2 m1/1 m4/2 m2/1 m3/1 m4/1 m4/3"}, // no size: last, by key
		{"*", "-size", "m2/1 m4/2 m1/1 m2/2 m1/2 m3/1 m4/1 m4/3"},
		{"*", "tags", "m4/2 m2/2 m1/2 m4/3 m4/1 m1/1 m3/1 m2/1"},  // smallest tag
		{"*", "-tags", "m4/2 m4/3 m3/1 m2/2 m1/1 m4/1 m1/2 m2/1"}, // largest tag, ties by key descending
		{"tags:work", "-tags", "m4/3 m3/1 m2/2 m1/1"},
	} {
		t.Run(tc.q+" sort "+tc.sort, func(t *testing.T) {
			p, err := query.Compile(tc.q, tc.sort, sch)
			if err != nil {
				t.Fatal(err)
			}
			for limit := range 4 {
				if got := mailIDs(c.query(t, p.Op, p.Sort, limit)); got != tc.want {
					t.Fatalf("limit %d:\n got %q\nwant %q", limit, got, tc.want)
				}
			}
			var counts []index.Result
			for _, part := range c.parts {
				res, err := index.ExecuteAll(part.e, part.p, part.table, p.Op, index.Options{Count: true})
				if err != nil {
					t.Fatal(err)
				}
				counts = append(counts, res)
			}
			if got, want := index.Merge(p.Sort, 0, counts...).Count, len(strings.Fields(tc.want)); got != want {
				t.Fatalf("count %d, want %d", got, want)
			}
		})
	}
}

// mailIDs renders whole keys ["m1",2] as m1/2.
func mailIDs(ks []string) string {
	var out []string
	for _, k := range render(toBytes(ks)) {
		var mbox string
		var id int
		fmt.Sscanf(strings.NewReplacer(`[`, "", `]`, "", `"`, "", ",", " ").Replace(k), "%s %d", &mbox, &id)
		out = append(out, fmt.Sprintf("%s/%d", mbox, id))
	}
	return strings.Join(out, " ")
}

func TestMergeSortValuesAndEmptyPages(t *testing.T) {
	tb := mustCompile(t, messageSchema)
	c := newCluster(t, tb.Indexes(), 3) // partition 3 stays empty
	c.groupOf[string(str("m2"))] = 1
	c.put(str("m1"), tuple(int64(1)), mustJSON(t, tb, messages[0])) // size 1.5
	c.put(str("m2"), tuple(int64(1)), mustJSON(t, tb, messages[2])) // no size
	p, _ := query.Compile("*", "size", query.SchemaOf(tb))
	var pages []index.Result
	for _, part := range c.parts {
		res, err := index.ExecuteAll(part.e, part.p, part.table, p.Op, index.Options{Sort: p.Sort, Limit: 1})
		if err != nil {
			t.Fatal(err)
		}
		pages = append(pages, res)
	}
	if len(pages[2].Keys) != 0 || pages[2].Next != "" {
		t.Fatalf("empty partition: %+v", pages[2])
	}
	res := index.Merge(p.Sort, 1, pages...)
	if mailIDs([]string{string(res.Keys[0])}) != "m1/1" || len(res.SortValues) != 1 || res.SortValues[0] == nil || res.Next == "" {
		t.Fatalf("first page %+v", res)
	}
	pages = pages[:0]
	for _, part := range c.parts {
		r, err := index.ExecuteAll(part.e, part.p, part.table, p.Op, index.Options{Sort: p.Sort, Limit: 1, Cursor: res.Next})
		if err != nil {
			t.Fatal(err)
		}
		pages = append(pages, r)
	}
	res = index.Merge(p.Sort, 1, pages...)
	if mailIDs([]string{string(res.Keys[0])}) != "m2/1" || res.SortValues[0] != nil || res.Next != "" {
		t.Fatalf("second page %+v", res)
	}
	if res := index.Merge(p.Sort, 5); len(res.Keys) != 0 || res.Next != "" {
		t.Fatalf("no pages: %+v", res)
	}
}

func TestCursorsOfOneAndEveryGroupDoNotMix(t *testing.T) {
	tb := mustCompile(t, messageSchema)
	s := newStore(t, tb.Indexes())
	for i, m := range messages {
		s.put(str("m1"), tuple(int64(i+1)), mustJSON(t, tb, m))
	}
	srt := index.Sort{Field: "createdOn"}
	one, err := index.Execute(s.e, s.p, s.table, str("m1"), nil, index.All{}, index.Options{Sort: srt, Limit: 2})
	if err != nil || one.Next == "" {
		t.Fatal(one, err)
	}
	every, err := index.ExecuteAll(s.e, s.p, s.table, index.All{}, index.Options{Sort: srt, Limit: 2})
	if err != nil || every.Next == "" {
		t.Fatal(every, err)
	}
	b, _ := base64.RawURLEncoding.DecodeString(every.Next)
	b = b[:len(b)-12] // cuts the key inside the partition key "m1"
	for _, tc := range []struct {
		all    bool
		cursor string
		detail string
	}{
		{true, one.Next, "cursor: it was made for a query of one partition key"},
		{false, every.Next, "cursor: it was made for a query without a partition key"},
		{true, base64.RawURLEncoding.EncodeToString(b), "cursor: not a cursor"},
		{true, "AQ", "cursor: not a cursor"},
	} {
		o := index.Options{Sort: srt, Limit: 2, Cursor: tc.cursor}
		if tc.all {
			_, err = index.ExecuteAll(s.e, s.p, s.table, index.All{}, o)
		} else {
			_, err = index.Execute(s.e, s.p, s.table, str("m1"), nil, index.All{}, o)
		}
		e, ok := problem.As(err)
		if !ok || e.Kind != problem.Malformed || e.Field != "cursor" || !strings.HasPrefix(e.Detail, tc.detail) {
			t.Fatalf("all %v cursor %q: got %v, want Malformed %q", tc.all, tc.cursor, err, tc.detail)
		}
	}
}
