package index_test

import (
	"cmp"
	"flag"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/doppio-db/doppio/internal/index"
	"github.com/doppio-db/doppio/internal/schema"
)

// modelIndexes: a string, a long, a double, a boolean, an array of strings,
// a nested string attribute and a text field.
var modelIndexes = []schema.Index{
	{Path: []string{"s"}, Kind: "attribute", Type: "string"},
	{Path: []string{"n"}, Kind: "attribute", Type: "long", Nullable: true},
	{Path: []string{"f"}, Kind: "attribute", Type: "double"},
	{Path: []string{"b"}, Kind: "attribute", Type: "boolean"},
	{Path: []string{"tags"}, Kind: "attribute", Type: "string", Array: true},
	{Path: []string{"addr", "city"}, Kind: "attribute", Type: "string"},
	{Path: []string{"body"}, Kind: "text", Type: "string"},
}

var (
	strVals = []string{"", "a", "ab", "abc", "b", "ba", "c", "a\x00"}
	vocab   = []string{"alpha", "beta", "Gamma", "GAMMA", "delta", "Straße", "strasse", "東京", "ÉTÉ", "été"}
	floats  = []float64{-2.5, -1, 0, 0.5, 1, 3.25}
)

func randDoc(r *rand.Rand) schema.Document {
	d := schema.Document{
		"s": strVals[r.IntN(len(strVals))],
		"f": floats[r.IntN(len(floats))],
		"b": r.IntN(2) == 0,
	}
	if r.IntN(4) > 0 {
		d["n"] = int64(r.IntN(11) - 5)
	} else {
		d["n"] = nil
	}
	tags := []any{}
	for range r.IntN(4) {
		tags = append(tags, strVals[r.IntN(len(strVals))])
	}
	d["tags"] = tags
	if r.IntN(3) > 0 {
		d["addr"] = map[string]any{"city": strVals[r.IntN(len(strVals))]}
	} else {
		d["addr"] = nil
	}
	words := make([]string, r.IntN(9))
	for i := range words {
		words[i] = vocab[r.IntN(len(vocab))]
	}
	d["body"] = strings.Join(words, []string{" ", ", ", "-"}[r.IntN(3)])
	return d
}

func randValue(r *rand.Rand, field string) any {
	switch field {
	case "s", "tags", "addr.city":
		return strVals[r.IntN(len(strVals))]
	case "n":
		return int64(r.IntN(13) - 6)
	case "f":
		return floats[r.IntN(len(floats))]
	case "b":
		return r.IntN(2) == 0
	}
	return index.Tokenize(vocab[r.IntN(len(vocab))])[0].Term
}

func randOp(r *rand.Rand, depth int) index.Op {
	attrs := []string{"s", "n", "f", "b", "tags", "addr.city"}
	if depth > 0 && r.IntN(3) == 0 {
		switch r.IntN(3) {
		case 0:
			return index.Not{Op: randOp(r, depth-1)}
		case 1:
			ops := make(index.And, 1+r.IntN(3))
			for i := range ops {
				ops[i] = randOp(r, depth-1)
			}
			return ops
		default:
			ops := make(index.Or, 1+r.IntN(3))
			for i := range ops {
				ops[i] = randOp(r, depth-1)
			}
			return ops
		}
	}
	switch r.IntN(8) {
	case 0:
		f := attrs[r.IntN(len(attrs))]
		return index.Equal{Field: f, Value: randValue(r, f)}
	case 1:
		return index.Equal{Field: "body", Value: randValue(r, "body"), Text: true}
	case 2:
		terms := make([]string, 2+r.IntN(2))
		for i := range terms {
			terms[i] = randValue(r, "body").(string)
		}
		return index.Phrase{Field: "body", Terms: terms}
	case 3, 4:
		f := attrs[r.IntN(len(attrs))]
		op := index.Range{Field: f, LowerInclusive: r.IntN(2) == 0, UpperInclusive: r.IntN(2) == 0}
		if r.IntN(4) > 0 {
			op.Lower = randValue(r, f)
		}
		if r.IntN(4) > 0 {
			op.Upper = randValue(r, f)
		}
		return op
	case 5:
		f := []string{"s", "tags", "addr.city", "body"}[r.IntN(4)]
		p := randValue(r, f).(string)
		return index.Prefix{Field: f, Prefix: p[:r.IntN(len(p)+1)], Text: f == "body"}
	case 6:
		return index.Range{Field: []string{"body", "n", "addr.city"}[r.IntN(3)], LowerInclusive: true, UpperInclusive: true}
	}
	return index.All{}
}

// values returns the indexed values of field in d (array elements
// flattened); for the text field, one slice of terms per element.
func values(d schema.Document, field string) []any {
	var v any = d
	for _, p := range strings.Split(field, ".") {
		m, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = m[p]
	}
	if v == nil {
		return nil
	}
	if a, ok := v.([]any); ok {
		return a
	}
	return []any{v}
}

func terms(d schema.Document) [][]string {
	var out [][]string
	for _, v := range values(d, "body") {
		var ts []string
		for _, t := range index.Tokenize(v.(string)) {
			ts = append(ts, t.Term)
		}
		out = append(out, ts)
	}
	return out
}

func compare(a, b any) int {
	switch a := a.(type) {
	case string:
		return strings.Compare(a, b.(string))
	case int64:
		return cmp.Compare(a, b.(int64))
	case float64:
		return cmp.Compare(a, b.(float64))
	case bool:
		x, y := 0, 0
		if a {
			x = 1
		}
		if b.(bool) {
			y = 1
		}
		return cmp.Compare(x, y)
	}
	panic(fmt.Sprintf("compare %T", a))
}

// match is the brute-force meaning of an operator.
func match(op index.Op, d schema.Document) bool {
	switch op := op.(type) {
	case index.All:
		return true
	case index.Not:
		return !match(op.Op, d)
	case index.And:
		for _, o := range op {
			if !match(o, d) {
				return false
			}
		}
		return true
	case index.Or:
		for _, o := range op {
			if match(o, d) {
				return true
			}
		}
		return false
	case index.Equal:
		if op.Field == "body" {
			for _, ts := range terms(d) {
				if slices.Contains(ts, op.Value.(string)) {
					return true
				}
			}
			return false
		}
		for _, v := range values(d, op.Field) {
			if compare(v, op.Value) == 0 {
				return true
			}
		}
		return false
	case index.Phrase:
		for _, ts := range terms(d) {
			for i := 0; i+len(op.Terms) <= len(ts); i++ {
				if slices.Equal(ts[i:i+len(op.Terms)], op.Terms) {
					return true
				}
			}
		}
		return false
	case index.Prefix:
		if op.Field == "body" {
			for _, ts := range terms(d) {
				for _, t := range ts {
					if strings.HasPrefix(t, op.Prefix) {
						return true
					}
				}
			}
			return false
		}
		for _, v := range values(d, op.Field) {
			if strings.HasPrefix(v.(string), op.Prefix) {
				return true
			}
		}
		return false
	case index.Range:
		if op.Field == "body" {
			for _, ts := range terms(d) {
				if len(ts) > 0 {
					return true
				}
			}
			return false
		}
		for _, v := range values(d, op.Field) {
			if op.Lower != nil {
				if c := compare(v, op.Lower); c < 0 || (c == 0 && !op.LowerInclusive) {
					continue
				}
			}
			if op.Upper != nil {
				if c := compare(v, op.Upper); c > 0 || (c == 0 && !op.UpperInclusive) {
					continue
				}
			}
			return true
		}
		return false
	}
	panic(fmt.Sprintf("match %T", op))
}

// expected is the brute-force answer: matches in sort order.
func expected(docs map[string]schema.Document, group, restPrefix []byte, op index.Op, s index.Sort) []string {
	type hit struct {
		rest string
		key  any // sort value, nil if none
	}
	var hits []hit
	for id, d := range docs {
		rest, ok := strings.CutPrefix(id, string(group))
		if !ok || !strings.HasPrefix(rest, string(restPrefix)) || !match(op, d) {
			continue
		}
		h := hit{rest: rest}
		if s.Field != "" {
			for _, v := range values(d, s.Field) {
				if h.key == nil || (compare(v, h.key) < 0) != s.Desc && compare(v, h.key) != 0 {
					h.key = v
				}
			}
		}
		hits = append(hits, h)
	}
	slices.SortFunc(hits, func(a, b hit) int {
		switch {
		case a.key == nil && b.key == nil:
			return strings.Compare(a.rest, b.rest)
		case a.key == nil:
			return 1
		case b.key == nil:
			return -1
		}
		c := cmp.Or(compare(a.key, b.key), strings.Compare(a.rest, b.rest))
		if s.Desc {
			return -c
		}
		return c
	})
	out := []string{}
	for _, h := range hits {
		out = append(out, h.rest)
	}
	return out
}

// TestIndexAnswersEqualBruteForce writes random documents, updates and
// deletes them through Diff, and checks random queries, sorts and page
// sizes against a brute-force evaluation of the same documents.
func TestIndexAnswersEqualBruteForce(t *testing.T) {
	for _, probing := range []bool{false, true} {
		t.Run(map[bool]string{false: "bitmaps", true: "probing"}[probing], func(t *testing.T) {
			t.Parallel()
			var knobs *index.TestingKnobs
			if probing {
				// Tiny budgets: every sorted, limited query of equalities
				// probes, and many give up midway and fall back.
				knobs = &index.TestingKnobs{ProbeBudget: 3, ProbeSlack: 2}
			}
			indexAnswersEqualBruteForce(t, knobs)
		})
	}
}

func indexAnswersEqualBruteForce(t *testing.T, knobs *index.TestingKnobs) {
	seed := *modelSeed
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	t.Logf("seed %d (replay: go test -run TestIndexAnswersEqualBruteForce -model.seed %d)", seed, seed)
	r := rand.New(rand.NewPCG(seed, 7))
	s := newStore(t, modelIndexes)
	groups := [][]byte{str("g1"), str("g2")}
	sorts := []index.Sort{{}, {Field: "s"}, {Field: "n", Desc: true}, {Field: "n"}, {Field: "f", Desc: true},
		{Field: "b"}, {Field: "tags", Multi: true}, {Field: "tags", Desc: true, Multi: true}, {Field: "addr.city", Desc: true}}
	queries, nonEmpty := 0, 0
	for step := range 300 {
		g := groups[r.IntN(len(groups))]
		rest := tuple([]string{"x", "y"}[r.IntN(2)], int64(r.IntN(40)))
		s.bulk = r.IntN(4) == 0 // some writes as a bulk write makes them
		if _, ok := s.docs[string(g)+string(rest)]; ok && r.IntN(4) == 0 {
			s.put(g, rest, nil)
		} else {
			s.put(g, rest, randDoc(r))
			if r.IntN(8) == 0 {
				s.backfill(g, rest)
			}
		}
		if r.IntN(10) == 0 {
			// Some documents' text is folded into segments, some pending,
			// some in term entries, some updated or deleted after.
			s.fold(g)
		}
		if r.IntN(12) == 0 {
			// Dead postings purged, or some of their blocks only.
			s.purge(g, r.IntN(3)-1)
		}
		if step%5 != 0 {
			continue
		}
		for range 10 {
			queries++
			op := randOp(r, 3)
			srt := sorts[r.IntN(len(sorts))]
			var restPrefix []byte
			if r.IntN(3) == 0 {
				restPrefix = str("x")
			}
			g := groups[r.IntN(len(groups))]
			want := expected(s.docs, g, restPrefix, op, srt)
			limit := []int{0, 1, 2, 3, 7}[r.IntN(5)]
			var got []string
			cursor := ""
			for pages := 0; ; pages++ {
				res, err := index.Execute(s.e, s.p, s.table, g, restPrefix, op, index.Options{Sort: srt, Limit: limit, Cursor: cursor, Knobs: knobs})
				if err != nil {
					t.Fatalf("seed %d step %d: %s sort %s: %v", seed, step, op, srt, err)
				}
				for _, k := range res.Keys {
					got = append(got, string(k))
				}
				if cursor = res.Next; cursor == "" || pages > 100 {
					break
				}
			}
			if len(want) > 0 {
				nonEmpty++
			}
			if !slices.Equal(got, want) {
				t.Fatalf("seed %d step %d: %s sort %s limit %d prefix %q:\n got %v\nwant %v", seed, step, op, srt, limit, restPrefix,
					render(toBytes(got)), render(toBytes(want)))
			}
			res, err := index.Execute(s.e, s.p, s.table, g, restPrefix, op, index.Options{Count: true, Knobs: knobs})
			if err != nil || res.Count != len(want) {
				t.Fatalf("seed %d step %d: %s: count %d (%v), want %d", seed, step, op, res.Count, err, len(want))
			}
		}
	}
	// Every entry of the store belongs to a live document: deletes and
	// updates left nothing behind that a query could read, in any form
	// (a segment's postings of documents changed since are hidden by dead
	// postings).
	for _, g := range groups {
		s.fold(g)
	}
	audit := index.NewAudit(modelIndexes)
	for id, d := range s.docs {
		for _, g := range groups {
			if rest, ok := strings.CutPrefix(id, string(g)); ok {
				audit.Live(s.p, s.table, g, []byte(rest), d)
			}
		}
	}
	audited := 0
	for _, g := range groups {
		for _, ix := range modelIndexes {
			n, err := audit.List(s.e, s.p.Index(s.table, g, ix.String()))
			if err != nil {
				t.Fatalf("seed %d: %v", seed, err)
			}
			audited += n
		}
	}
	start := s.p.IndexTable(s.table)
	it, _ := s.e.NewIter(start, append(slices.Clone(start), 0xff))
	n := 0
	for ok := it.First(); ok; ok = it.Next() {
		n++
	}
	it.Close()
	if n != audited {
		t.Fatalf("seed %d: %d index entries stored, %d in the fields' lists", seed, n, audited)
	}
	t.Logf("%d queries (%d with matches) over %d documents", queries, nonEmpty, len(s.docs))
}

func toBytes(ss []string) [][]byte {
	out := make([][]byte, len(ss))
	for i, s := range ss {
		out[i] = []byte(s)
	}
	return out
}

var modelSeed = flag.Uint64("model.seed", 0, "seed of the model-based test (0: time)")
