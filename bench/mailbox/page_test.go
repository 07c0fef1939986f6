package main

import (
	"encoding/binary"
	"encoding/json"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/doppio-db/doppio/bench/internal/mailboxdata"
)

// TestParsePageAgreesWithEncodingJSON: on a real-shaped page the splitter
// returns what encoding/json does, and it refuses every truncation and
// every corruption that encoding/json refuses.
func TestParsePageAgreesWithEncodingJSON(t *testing.T) {
	msgs := mailboxdata.Loaded(1, "A", 0, 20)
	type item struct {
		Key      []any               `json:"key"`
		Document mailboxdata.Message `json:"document"`
	}
	var page struct {
		Documents []item `json:"documents"`
		Next      string `json:"next"`
	}
	for i, m := range msgs {
		page.Documents = append(page.Documents, item{Key: []any{"A000000", i + 1}, Document: m})
	}
	page.Next = "c\"ur\\sor\u00e9"
	b, err := json.Marshal(page)
	if err != nil {
		t.Fatal(err)
	}
	var want struct {
		Documents []struct {
			Key      []json.RawMessage `json:"key"`
			Document json.RawMessage   `json:"document"`
		} `json:"documents"`
	}
	if err := json.Unmarshal(b, &want); err != nil {
		t.Fatal(err)
	}
	keys, docs, err := parsePage(b)
	if err != nil {
		t.Fatal(err)
	}
	if len(docs) != len(want.Documents) {
		t.Fatalf("%d documents, want %d", len(docs), len(want.Documents))
	}
	for i, d := range want.Documents {
		if string(docs[i]) != string(d.Document) {
			t.Fatalf("document %d differs", i)
		}
		for j := range d.Key {
			if string(keys[i][j]) != string(d.Key[j]) {
				t.Fatalf("key %d part %d: %s, want %s", i, j, keys[i][j], d.Key[j])
			}
		}
	}
	for n := range len(b) {
		if _, _, err := parsePage(b[:n]); err == nil {
			t.Fatalf("accepted the first %d bytes", n)
		}
	}
	const alphabet = `{}[],:"\ 0123456789.eE+-tfnulx`
	r := rand.New(rand.NewPCG(1, 2))
	for range 3000 {
		c := slices.Clone(b)
		for range 1 + r.IntN(3) {
			c[r.IntN(len(c))] = alphabet[r.IntN(len(alphabet))]
		}
		// Never accepts what is not JSON (it may refuse valid JSON of
		// another shape, e.g. an item without its document).
		if _, _, err := parsePage(c); err == nil && !json.Valid(c) {
			t.Fatalf("accepted invalid JSON: %s", c)
		}
	}
	for _, s := range []string{`{"documents":[]}`, ` { "documents" : [ { "document" : null , "key" : [ "a" , -1.5e+3 ] } ] , "next" : "" } `} {
		if _, _, err := parsePage([]byte(s)); err != nil {
			t.Errorf("%s: %v", s, err)
		}
	}
}

// BenchmarkPageDecode: a page of 20 messages split by parsePage and by
// encoding/json into the same parts, as the client did before.
func BenchmarkPageDecode(b *testing.B) {
	type item struct {
		Key      []any               `json:"key"`
		Document mailboxdata.Message `json:"document"`
	}
	var page struct {
		Documents []item `json:"documents"`
	}
	for i, m := range mailboxdata.Loaded(1, "A", 0, 20) {
		page.Documents = append(page.Documents, item{Key: []any{"A000000", i + 1}, Document: m})
	}
	body, err := json.Marshal(page)
	if err != nil {
		b.Fatal(err)
	}
	b.Run("encoding-json", func(b *testing.B) {
		b.SetBytes(int64(len(body)))
		b.ReportAllocs()
		for b.Loop() {
			var p struct {
				Documents []struct {
					Key      []json.RawMessage `json:"key"`
					Document json.RawMessage   `json:"document"`
				} `json:"documents"`
			}
			if err := json.Unmarshal(body, &p); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("parsePage", func(b *testing.B) {
		b.SetBytes(int64(len(body)))
		b.ReportAllocs()
		for b.Loop() {
			if _, _, err := parsePage(body); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// TestSpecialFindsEveryByteStringsEscape: the eight-byte test agrees with
// the byte table on words holding each byte value at each position, and on
// random words.
func TestSpecialFindsEveryByteStringsEscape(t *testing.T) {
	check := func(w [8]byte) {
		want := false
		for _, c := range w {
			want = want || !plain[c]
		}
		if got := special(binary.LittleEndian.Uint64(w[:])); got != want {
			t.Fatalf("special(%q) = %v, want %v", w, got, want)
		}
	}
	for c := range 256 {
		for at := range 8 {
			w := [8]byte{'a', 'b', 0xc3, 0xa9, ' ', '~', 0x7f, 0xff}
			w[at] = byte(c)
			check(w)
		}
	}
	r := rand.New(rand.NewPCG(3, 4))
	for range 100000 {
		var w [8]byte
		for i := range w {
			w[i] = byte(r.IntN(256))
		}
		check(w)
	}
}
