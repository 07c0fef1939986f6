package builder

import (
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/doppio-db/doppio/internal/bulk"
	"github.com/doppio-db/doppio/internal/keys"
	"github.com/doppio-db/doppio/internal/schema"
)

const typedSpec = `{
  "key": [{"name": "id", "type": "long"}],
  "schema": {"type": "record", "name": "Typed", "fields": [
    {"name": "raw", "type": "bytes"},
    {"name": "digest", "type": {"type": "fixed", "name": "Digest", "size": 4}},
    {"name": "label", "type": "string"},
    {"name": "tags", "type": {"type": "array", "items": "string"}, "default": []},
    {"name": "attrs", "type": {"type": "map", "values": "long"}, "default": {}},
    {"name": "where", "type": ["null", {"type": "record", "name": "Place", "fields": [
      {"name": "lat", "type": "double"}, {"name": "lon", "type": "double"}]}], "default": null},
    {"name": "day", "type": {"type": "int", "logicalType": "date"}},
    {"name": "midnight", "type": {"type": "long", "logicalType": "timestamp-millis"}},
    {"name": "ms", "type": {"type": "long", "logicalType": "timestamp-millis"}},
    {"name": "us", "type": {"type": "long", "logicalType": "timestamp-micros"}},
    {"name": "usDay", "type": {"type": "int", "logicalType": "date"}},
    {"name": "count", "type": "long"}
  ]}
}`

type typedPlace struct {
	Lat *float64 `parquet:"lat,optional"`
	Lon *float64 `parquet:"lon,optional"`
}

// typedRow has optional nested columns, list elements, map values and
// struct fields, as pyarrow writes them; parquet-go reads them as pointers.
type typedRow struct {
	ID       int64             `parquet:"id"`
	Raw      []byte            `parquet:"raw"`
	Digest   [4]byte           `parquet:"digest"`
	Label    string            `parquet:"label"`
	Tags     []*string         `parquet:"tags,list,optional"`
	Attrs    map[string]*int64 `parquet:"attrs,optional"`
	Where    *typedPlace       `parquet:"where,optional"`
	Day      int32             `parquet:"day,date"`
	Midnight int32             `parquet:"midnight,date"`
	MS       int64             `parquet:"ms,timestamp(microsecond)"`
	US       int64             `parquet:"us,timestamp(nanosecond)"`
	USDay    int64             `parquet:"usDay,timestamp(microsecond)"`
	Count    int64             `parquet:"count,timestamp(millisecond)"`
}

// TestParquetValuesTakeTheAvroFieldsForm writes optional lists, maps and
// structs, binary and fixed columns, dates and timestamps of each unit:
// each value becomes what the table's Avro field holds, dates in days and
// timestamps in the unit of the field's logical type.
func TestParquetValuesTakeTheAvroFieldsForm(t *testing.T) {
	spec, err := ParseSpec([]byte(typedSpec))
	if err != nil {
		t.Fatal(err)
	}
	tg, err := NewTarget("DB", "Typed", 3, 1, spec)
	if err != nil {
		t.Fatal(err)
	}
	str := func(s string) *string { return &s }
	num := func(n int64) *int64 { return &n }
	fl := func(f float64) *float64 { return &f }
	// 2024-03-05T01:02:03.456789123Z and the day before the epoch.
	ts := time.Date(2024, 3, 5, 1, 2, 3, 456789123, time.UTC)
	rows := []typedRow{
		{ID: 1, Raw: []byte("a\x00\xffb"), Digest: [4]byte{0, 1, 0xfe, 0xff}, Label: "ü",
			Tags: []*string{str("x"), str("")}, Attrs: map[string]*int64{"a": num(-1), "b": num(1 << 40)},
			Where: &typedPlace{fl(1.5), fl(-2.25)}, Day: 19787, Midnight: 19787,
			MS: ts.UnixMicro(), US: ts.UnixNano(), USDay: ts.UnixMicro(), Count: 42},
		{ID: 2, Raw: []byte{}, Label: "", Tags: []*string{}, Attrs: map[string]*int64{},
			Day: -1, Midnight: -1, MS: -1, US: -1001, USDay: -1, Count: -7},
	}
	in := writeInput(t, t.TempDir(), "typed.parquet", string(parquetBytes(t, rows)))
	out := filepath.Join(t.TempDir(), "out")
	m, err := runBuild(t, tg, out, Config{}, in)
	if err != nil {
		t.Fatal(err)
	}
	if m.Records != 2 || m.Rejected != 0 {
		rj, _ := os.ReadFile(filepath.Join(out, bulk.RejectsName))
		t.Fatalf("%d records, %d rejected:\n%s", m.Records, m.Rejected, rj)
	}
	want := map[string]schema.Document{
		keys.Tuple{int64(1)}.String(): {
			"raw": []byte("a\x00\xffb"), "digest": []byte{0, 1, 0xfe, 0xff}, "label": "ü",
			"tags": []any{"x", ""}, "attrs": map[string]any{"a": int64(-1), "b": int64(1 << 40)},
			"where":    map[string]any{"lat": 1.5, "lon": -2.25},
			"day":      int64(19787),
			"midnight": int64(19787) * 86_400_000,
			"ms":       ts.UnixMilli(),
			"us":       ts.UnixMicro(),
			"usDay":    int64(19787),
			"count":    int64(42),
		},
		keys.Tuple{int64(2)}.String(): {
			"raw": []byte{}, "digest": []byte{0, 0, 0, 0}, "label": "",
			"tags": []any{}, "attrs": map[string]any{}, "where": nil,
			"day": int64(-1), "midnight": int64(-86_400_000),
			"ms": int64(-1), "us": int64(-2), "usDay": int64(-1), "count": int64(-7),
		},
	}
	if got := readBuild(t, tg, out); !reflect.DeepEqual(got, want) {
		t.Fatalf("documents:\n got %#v\nwant %#v", got, want)
	}
}

type intKeyedRow struct {
	ID     int64            `parquet:"id"`
	Attrs  map[string]int64 `parquet:"attrs"`
	Counts map[int64]int64  `parquet:"counts,optional"`
	Inner  *intKeyedInner   `parquet:"inner,optional"`
}

type intKeyedInner struct {
	Attrs map[int64]int64 `parquet:"attrs"`
}

// TestParquetMapWithNonStringKeysIsRejected: Avro maps are keyed by
// strings, so a value of a Parquet map column keyed otherwise is a reject
// naming the column's path (a null one loads), and the build goes on.
func TestParquetMapWithNonStringKeysIsRejected(t *testing.T) {
	spec, err := ParseSpec([]byte(`{"key": [{"name": "id", "type": "long"}],
	  "schema": {"type": "record", "name": "M", "fields": [
	    {"name": "attrs", "type": {"type": "map", "values": "long"}},
	    {"name": "counts", "type": ["null", {"type": "map", "values": "long"}]},
	    {"name": "inner", "type": ["null", {"type": "record", "name": "I", "fields": [
	      {"name": "attrs", "type": {"type": "map", "values": "long"}}]}]}]}}`))
	if err != nil {
		t.Fatal(err)
	}
	tg, err := NewTarget("DB", "M", 2, 1, spec)
	if err != nil {
		t.Fatal(err)
	}
	rows := []intKeyedRow{
		{ID: 1, Attrs: map[string]int64{"a": 1}},
		{ID: 2, Attrs: map[string]int64{}, Counts: map[int64]int64{7: 1}},
		{ID: 3, Attrs: map[string]int64{}, Inner: &intKeyedInner{Attrs: map[int64]int64{8: 2}}},
	}
	in := writeInput(t, t.TempDir(), "m.parquet", string(parquetBytes(t, rows)))
	out := filepath.Join(t.TempDir(), "out")
	m, err := runBuild(t, tg, out, Config{}, in)
	if err != nil {
		t.Fatal(err)
	}
	got, _ := os.ReadFile(filepath.Join(out, bulk.RejectsName))
	want := `{"input":"` + in + `","record":2,"reason":"counts: map keys must be strings, not Parquet INT(64,true)"}` + "\n" +
		`{"input":"` + in + `","record":3,"reason":"inner: attrs: map keys must be strings, not Parquet INT(64,true)"}` + "\n"
	if m.Records != 1 || m.Rejected != 2 || string(got) != want {
		t.Fatalf("%d records, %d rejected, rejects:\n%s\nwant:\n%s", m.Records, m.Rejected, got, want)
	}
	if docs := readBuild(t, tg, out); !reflect.DeepEqual(docs, map[string]schema.Document{
		keys.Tuple{int64(1)}.String(): {"attrs": map[string]any{"a": int64(1)}, "counts": nil, "inner": nil},
	}) {
		t.Fatalf("documents: %#v", docs)
	}
}
