package schema

import (
	"reflect"
	"strings"
	"testing"

	"github.com/doppio-db/doppio/internal/problem"
)

const simpleSchema = `{"type":"record","name":"R","fields":[{"name":"a","type":"string"}]}`

func TestCompileErrors(t *testing.T) {
	withSchema := func(s string) TableDef { return tableDef(s) }
	withKey := func(key ...KeyPart) TableDef {
		d := tableDef(simpleSchema)
		d.Key = key
		return d
	}
	field := func(f string) TableDef {
		return tableDef(`{"type":"record","name":"R","fields":[` + f + `]}`)
	}
	tests := []struct {
		name   string
		def    TableDef
		field  string
		detail string
	}{
		{"bad database", func() TableDef { d := tableDef(simpleSchema); d.Database = "1mail"; return d }(),
			"database", `invalid database name "1mail"`},
		{"bad table", func() TableDef { d := tableDef(simpleSchema); d.Name = "my-table"; return d }(),
			"table", `invalid table name "my-table"`},
		{"long table", func() TableDef { d := tableDef(simpleSchema); d.Name = "t" + strings.Repeat("x", 64); return d }(),
			"table", "invalid table name"},
		{"no key", withKey(), "key", "a table key has 1 to 8 parts, not 0"},
		{"nine key parts", withKey(
			KeyPart{"a", KeyString, false}, KeyPart{"b", KeyString, false}, KeyPart{"c", KeyString, false},
			KeyPart{"d", KeyString, false}, KeyPart{"e", KeyString, false}, KeyPart{"f", KeyString, false},
			KeyPart{"g", KeyString, false}, KeyPart{"h", KeyString, false}, KeyPart{"i", KeyString, false}),
			"key", "not 9"},
		{"duplicate key part", withKey(KeyPart{"a", KeyString, false}, KeyPart{"a", KeyLong, false}),
			"a", `key part "a" appears twice`},
		{"bad key part name", withKey(KeyPart{"_a", KeyString, false}), "key", `invalid name "_a"`},
		{"bad key type", withKey(KeyPart{"a", "double", false}), "a", `type must be string, int or long, not "double"`},
		{"autoIncrement not last", withKey(KeyPart{"a", KeyString, false}, KeyPart{"b", KeyLong, true}, KeyPart{"c", KeyLong, false}),
			"b", "only the last key part may be autoIncrement"},
		{"autoIncrement string", withKey(KeyPart{"a", KeyString, false}, KeyPart{"b", KeyString, true}),
			"b", "must be int or long"},
		{"autoIncrement partition key", withKey(KeyPart{"a", KeyLong, true}),
			"a", "the partition key cannot be autoIncrement"},
		{"no versions", func() TableDef { d := tableDef(); return d }(), "schema", "has no document schema"},
		{"bad version numbers", func() TableDef { d := tableDef(simpleSchema); d.Versions[0].Version = 2; return d }(),
			"versions", "found 2 at position 1"},
		{"not JSON", withSchema(`{"type":`), "schema", "invalid Avro schema"},
		{"not a record", withSchema(`"string"`), "schema", "must be an Avro record, not string"},
		{"bad field name", field(`{"name":"a-b","type":"string"}`), "schema", "invalid Avro schema"},
		{"unknown type", field(`{"name":"a","type":"Nope"}`), "schema", "invalid Avro schema"},
		{"bad default", field(`{"name":"a","type":"int","default":"x"}`), "schema", "invalid Avro schema"},
		// FuzzRequest: the Avro parser panicked on a defaulted empty union.
		{"defaulted empty union", field(`{"name":"a","type":[],"default":null}`), "schema", "invalid Avro schema"},
		{"empty union", field(`{"name":"a","type":[]}`), "schema", "a union needs at least one branch"},
		{"unknown index", field(`{"name":"a","type":"string","index":"fulltext"}`), "a", `"index" must be "attribute" or "text", not "fulltext"`},
		{"non-string index", field(`{"name":"a","type":"string","index":1}`), "a", `not 1`},
		{"text on int", field(`{"name":"n","type":"int","index":"text"}`), "n", `a "text" index needs a string`},
		{"text on nullable int", field(`{"name":"n","type":["null","int"],"index":"text"}`), "n", "not nullable int"},
		{"attribute on record", field(`{"name":"r","type":{"type":"record","name":"S","fields":[]},"index":"attribute"}`), "r", `not record S`},
		{"attribute on map", field(`{"name":"m","type":{"type":"map","values":"int"},"index":"attribute"}`), "m", "not map of int"},
		{"attribute on general union", field(`{"name":"u","type":["int","string"],"index":"attribute"}`), "u", "not union [int, string]"},
		{"nested bad index", field(`{"name":"r","type":{"type":"record","name":"S","fields":[{"name":"x","type":"bytes","index":"text"}]}}`), "r.x", `field "r.x": a "text" index`},
		{"index inside array", field(`{"name":"l","type":{"type":"array","items":{"type":"record","name":"S","fields":[{"name":"x","type":"int","index":"attribute"}]}}}`), "l.x", "only allowed on fields reached through records"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Compile(tc.def)
			wantProblem(t, err, problem.Malformed, tc.field, tc.detail)
		})
	}
}

func TestCompileAccepts(t *testing.T) {
	tb := mustTable(t, messageSchema)
	if tb.Latest() != 1 || tb.Arity() != 2 || !tb.AutoIncrement() {
		t.Fatalf("Latest %d Arity %d AutoIncrement %v", tb.Latest(), tb.Arity(), tb.AutoIncrement())
	}
	var got []string
	for _, ix := range tb.Indexes() {
		got = append(got, ix.String()+":"+ix.Kind)
	}
	want := []string{"subject:text", "unread:attribute", "tags:attribute", "address.city:attribute"}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("Indexes = %v, want %v", got, want)
	}
	// Every accepted index shape.
	mustTable(t, `{"type":"record","name":"R","fields":[
		{"name":"a","type":["string","null"],"index":"text"},
		{"name":"b","type":{"type":"array","items":"string"},"index":"text"},
		{"name":"c","type":{"type":"enum","name":"E","symbols":["X"]},"index":"attribute"},
		{"name":"d","type":{"type":"long","logicalType":"timestamp-millis"},"index":"attribute"},
		{"name":"e","type":["null",{"type":"array","items":"long"}],"index":"attribute"},
		{"name":"f","type":["null","double"],"index":"attribute"},
		{"name":"g","type":["null",{"type":"record","name":"G","fields":[{"name":"x","type":"int","index":"attribute"}]}]}]}`)
	// A single-part key without autoIncrement is fine.
	d := tableDef(simpleSchema)
	d.Key = []KeyPart{{Name: "id", Type: KeyInt}}
	if _, err := Compile(d); err != nil {
		t.Fatal(err)
	}
}

func TestValidateDatabase(t *testing.T) {
	d := Database{Name: "mail"}
	if err := ValidateDatabase(&d); err != nil {
		t.Fatal(err)
	}
	if want := (Database{Name: "mail", Partitions: 8, Replicas: 1, Partitioner: "hash"}); d != want {
		t.Fatalf("got %+v, want %+v", d, want)
	}
	tests := []struct {
		db     Database
		field  string
		detail string
	}{
		{Database{Name: ""}, "name", `invalid database name ""`},
		{Database{Name: "a b"}, "name", `invalid database name "a b"`},
		{Database{Name: "m", Partitions: 4097}, "partitions", "partitions must be 1 to 4096, not 4097"},
		{Database{Name: "m", Partitions: -1}, "partitions", "not -1"},
		{Database{Name: "m", Replicas: 6}, "replicas", "replicas must be 1 to 5, not 6"},
		{Database{Name: "m", Partitioner: "range"}, "partitioner", `partitioner must be "hash", not "range"`},
	}
	for _, tc := range tests {
		err := ValidateDatabase(&tc.db)
		wantProblem(t, err, problem.Malformed, tc.field, tc.detail)
	}
}

func TestNextVersion(t *testing.T) {
	const v1 = `{"type":"record","name":"M","fields":[
		{"name":"subject","type":"string"},
		{"name":"size","type":"long","default":0},
		{"name":"status","type":{"type":"enum","name":"S","symbols":["A","B"]}},
		{"name":"addr","type":{"type":"record","name":"Addr","fields":[{"name":"city","type":"string"}]}}]}`
	// edit returns v1 with one replacement applied.
	edit := func(old, new string) string {
		if !strings.Contains(v1, old) {
			t.Fatalf("edit: %q not in schema", old)
		}
		return strings.Replace(v1, old, new, 1)
	}
	tests := []struct {
		name    string
		schema  string
		changed bool
		kind    problem.Kind
		field   string
		detail  string
	}{
		{name: "identical", schema: v1},
		{name: "identical reformatted", schema: strings.Join(strings.Fields(v1), " ")},
		{name: "add field with default", changed: true,
			schema: edit(`{"name":"size"`, `{"name":"unread","type":"boolean","default":true},{"name":"size"`)},
		{name: "add field without default", kind: problem.Conflict, field: "unread",
			schema: edit(`{"name":"size"`, `{"name":"unread","type":"boolean"},{"name":"size"`),
			detail: `field "unread" added without a default: documents written before cannot be read`},
		{name: "add nested field without default", kind: problem.Conflict, field: "addr.zip",
			schema: edit(`{"name":"city","type":"string"}`, `{"name":"city","type":"string"},{"name":"zip","type":"string"}`),
			detail: `field "addr.zip" added without a default`},
		{name: "remove field with default", changed: true,
			schema: edit(`{"name":"size","type":"long","default":0},`, ``)},
		{name: "remove field without default", kind: problem.Conflict, field: "subject",
			schema: edit(`{"name":"subject","type":"string"},`, ``),
			detail: `field "subject" removed but it had no default in version 1: version 1 cannot read documents written without it`},
		{name: "change type", kind: problem.Conflict, field: "size",
			schema: edit(`"type":"long","default":0`, `"type":"int","default":0`),
			detail: `field "size" changed type from long to int`},
		{name: "promotion is one way only", kind: problem.Conflict, field: "size",
			schema: edit(`"type":"long","default":0`, `"type":"double","default":0`),
			detail: `field "size" changed type from long to double`},
		{name: "make nullable", kind: problem.Conflict, field: "subject",
			schema: edit(`{"name":"subject","type":"string"}`, `{"name":"subject","type":["null","string"]}`),
			detail: `field "subject" changed type from string to nullable string`},
		{name: "change logical type", kind: problem.Conflict, field: "size",
			schema: edit(`"type":"long","default":0`, `"type":{"type":"long","logicalType":"timestamp-millis"},"default":0`),
			detail: `changed type from long to long (timestamp-millis)`},
		{name: "rename without alias", kind: problem.Conflict, field: "title",
			schema: edit(`{"name":"subject","type":"string"}`, `{"name":"title","type":"string"}`),
			detail: `field "title" added without a default`},
		{name: "rename with alias, old field without default", kind: problem.Conflict, field: "subject",
			schema: edit(`{"name":"subject","type":"string"}`, `{"name":"title","aliases":["subject"],"type":"string"}`),
			detail: `field "subject" removed but it had no default`},
		{name: "rename with alias of a defaulted field", changed: true,
			schema: edit(`{"name":"size","type":"long","default":0}`, `{"name":"bytes","aliases":["size"],"type":"long","default":0}`)},
		{name: "enum symbol added", kind: problem.Conflict, field: "status",
			schema: edit(`["A","B"]`, `["A","B","C"]`),
			detail: `symbol "C" added to enum S, whose version 1 has no default`},
		{name: "rename record type", kind: problem.Conflict, field: "addr",
			schema: edit(`"name":"Addr"`, `"name":"Address"`),
			detail: `type Addr renamed to Address`},
		{name: "index only change", changed: true,
			schema: edit(`{"name":"subject","type":"string"}`, `{"name":"subject","type":"string","index":"text"}`)},
		{name: "default only change", changed: true,
			schema: edit(`"type":"long","default":0`, `"type":"long","default":5`)},
		{name: "not a record", schema: `"string"`, kind: problem.Malformed, field: "schema",
			detail: "must be an Avro record"},
		{name: "invalid", schema: `{"type":"record"}`, kind: problem.Malformed, field: "schema",
			detail: "invalid Avro schema"},
	}
	def := tableDef(v1)
	before := len(def.Versions)
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			next, changed, err := NextVersion(def, []byte(tc.schema))
			if tc.detail != "" {
				wantProblem(t, err, tc.kind, tc.field, tc.detail)
				return
			}
			if err != nil {
				t.Fatalf("NextVersion: %v", err)
			}
			if changed != tc.changed {
				t.Fatalf("changed = %v, want %v", changed, tc.changed)
			}
			if !changed {
				if len(next.Versions) != 1 {
					t.Fatalf("unchanged def has %d versions", len(next.Versions))
				}
				return
			}
			if len(next.Versions) != 2 || next.Versions[1].Version != 2 {
				t.Fatalf("versions %+v", next.Versions)
			}
			if next.Versions[1].Created.Location().String() != "UTC" || next.Versions[1].Created.IsZero() {
				t.Fatalf("Created %v", next.Versions[1].Created)
			}
			if _, err := Compile(next); err != nil {
				t.Fatalf("Compile(next): %v", err)
			}
		})
	}
	if len(def.Versions) != before {
		t.Fatal("NextVersion mutated its input")
	}
	// The first version of a new table.
	next, changed, err := NextVersion(TableDef{Database: "d", Name: "t", Key: []KeyPart{{Name: "k", Type: KeyString}}}, []byte(v1))
	if err != nil || !changed || len(next.Versions) != 1 || next.Versions[0].Version != 1 {
		t.Fatalf("first version: %+v %v %v", next.Versions, changed, err)
	}
}

func TestIndexesDescribeValueTypes(t *testing.T) {
	tb := mustTable(t, `{"type":"record","name":"R","fields":[
		{"name":"a","type":["string","null"],"index":"text"},
		{"name":"b","type":{"type":"array","items":"string"},"index":"text"},
		{"name":"c","type":{"type":"enum","name":"E","symbols":["X"]},"index":"attribute"},
		{"name":"d","type":{"type":"long","logicalType":"timestamp-millis"},"index":"attribute"},
		{"name":"e","type":["null",{"type":"array","items":"long"}],"index":"attribute"},
		{"name":"f","type":["null","double"],"index":"attribute"},
		{"name":"g","type":["null",{"type":"record","name":"G","fields":[{"name":"x","type":"int","index":"attribute"}]}]},
		{"name":"h","type":"boolean","index":"attribute"},
		{"name":"i","type":"bytes","index":"attribute"},
		{"name":"j","type":"float","index":"attribute"}]}`)
	want := []Index{
		{Path: []string{"a"}, Kind: "text", Type: "string", Nullable: true},
		{Path: []string{"b"}, Kind: "text", Type: "string", Array: true},
		{Path: []string{"c"}, Kind: "attribute", Type: "enum"},
		{Path: []string{"d"}, Kind: "attribute", Type: "long", Logical: "timestamp-millis"},
		{Path: []string{"e"}, Kind: "attribute", Type: "long", Array: true, Nullable: true},
		{Path: []string{"f"}, Kind: "attribute", Type: "double", Nullable: true},
		{Path: []string{"g", "x"}, Kind: "attribute", Type: "int"},
		{Path: []string{"h"}, Kind: "attribute", Type: "boolean"},
		{Path: []string{"i"}, Kind: "attribute", Type: "bytes"},
		{Path: []string{"j"}, Kind: "attribute", Type: "float"},
	}
	if got := tb.Indexes(); !reflect.DeepEqual(got, want) {
		t.Fatalf("Indexes =\n%+v\nwant\n%+v", got, want)
	}
}
