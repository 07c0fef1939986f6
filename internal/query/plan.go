package query

import (
	"encoding/base64"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/doppio-db/doppio/internal/index"
	"github.com/doppio-db/doppio/internal/problem"
	"github.com/doppio-db/doppio/internal/schema"
)

// Schema is what planning needs to know of a table.
type Schema struct {
	// Indexes are the table's indexed fields (schema.Table.Indexes).
	Indexes []schema.Index
	// HasField reports whether a dotted path names a field of the document
	// schema, indexed or not, to tell an unknown field from a non-indexed
	// one in errors. Nil: every non-indexed name is reported unknown.
	HasField func(path string) bool
}

// SchemaOf describes the latest version of t.
func SchemaOf(t *schema.Table) Schema {
	return Schema{
		Indexes:  t.Indexes(),
		HasField: func(path string) bool { _, err := t.ParseFields(path); return err == nil },
	}
}

// Plan is a query bound to a table's indexes, ready for index.Execute.
type Plan struct {
	Op   index.Op
	Sort index.Sort
	// Fields are the indexed fields the plan reads (query and sort), sorted:
	// the caller checks that their entries are complete (not backfilling).
	Fields []string
}

// String renders the plan: the operator tree, then the sort.
func (p *Plan) String() string { return p.Op.String() + " sort " + p.Sort.String() }

// Compile parses q (empty: every document) and plans it with sort.
func Compile(q, sort string, s Schema) (*Plan, error) {
	var n Node = MatchAll{At: 1}
	if strings.TrimSpace(q) != "" {
		var err error
		if n, err = Parse(q); err != nil {
			return nil, err
		}
	}
	return Build(n, sort, s)
}

// Build binds the parsed query n to the indexes of s and plans sort
// ("field" or "+field" ascending, "-field" descending, "" document key
// order). The package doc ("Binding") gives how each clause's value is
// converted and what a prefix, a range and a sort need.
//
// Errors are *problem.Error, Kind Malformed, Field "query" (or "sort"), with
// the position of the clause and the field in the detail.
func Build(n Node, sort string, s Schema) (*Plan, error) {
	b := &binder{s: s, fields: map[string]schema.Index{}, used: map[string]bool{}}
	for _, ix := range s.Indexes {
		b.fields[ix.String()] = ix
		if ix.Kind == "text" {
			b.text = append(b.text, ix.String())
		}
	}
	op, err := b.bind(n)
	if err != nil {
		return nil, err
	}
	srt, err := b.sort(sort)
	if err != nil {
		return nil, err
	}
	p := &Plan{Op: op, Sort: srt}
	for f := range b.used {
		p.Fields = append(p.Fields, f)
	}
	slices.Sort(p.Fields)
	return p, nil
}

type binder struct {
	s      Schema
	fields map[string]schema.Index
	text   []string // text-indexed fields, in schema order
	used   map[string]bool
}

func errAt(pos int, format string, args ...any) error {
	return problem.Field(problem.Malformed, "query", "query: position %d: %s", pos, fmt.Sprintf(format, args...))
}

// field resolves a field name of a clause.
func (b *binder) field(name string, pos int) (schema.Index, error) {
	ix, ok := b.fields[name]
	if !ok {
		known := make([]string, 0, len(b.fields))
		for _, ix := range b.s.Indexes {
			known = append(known, ix.String())
		}
		list := "the table has no indexed field"
		if len(known) > 0 {
			list = "indexed fields: " + strings.Join(known, ", ")
		}
		if b.s.HasField != nil && b.s.HasField(name) {
			return ix, errAt(pos, "field %q is not indexed (%s)", name, list)
		}
		return ix, errAt(pos, "unknown field %q (%s)", name, list)
	}
	b.used[name] = true
	return ix, nil
}

// everyText applies mk to each text field: a bare word or phrase.
func (b *binder) everyText(pos int, what string, mk func(ix schema.Index) (index.Op, error)) (index.Op, error) {
	if len(b.text) == 0 {
		return nil, errAt(pos, "%s needs a field (field:value): the table has no text-indexed field", what)
	}
	var ops index.Or
	for _, f := range b.text {
		ix, _ := b.field(f, pos)
		op, err := mk(ix)
		if err != nil {
			return nil, err
		}
		ops = append(ops, op)
	}
	if len(ops) == 1 {
		return ops[0], nil
	}
	return ops, nil
}

// bindAll binds each clause, in order, stopping at the first error.
func (b *binder) bindAll(clauses []Node) ([]index.Op, error) {
	ops := make([]index.Op, 0, len(clauses))
	for _, c := range clauses {
		op, err := b.bind(c)
		if err != nil {
			return nil, err
		}
		ops = append(ops, op)
	}
	return ops, nil
}

func (b *binder) bind(n Node) (index.Op, error) {
	switch n := n.(type) {
	case MatchAll:
		return index.All{}, nil
	case Not:
		op, err := b.bind(n.Clause)
		if err != nil {
			return nil, err
		}
		return index.Not{Op: op}, nil
	case And:
		ops, err := b.bindAll(n.Clauses)
		if err != nil {
			return nil, err
		}
		return index.And(ops), nil
	case Or:
		ops, err := b.bindAll(n.Clauses)
		if err != nil {
			return nil, err
		}
		return index.Or(ops), nil
	case Term:
		if n.Field == "" {
			what := fmt.Sprintf("the bare word %q", n.Value)
			if n.Quoted {
				what = fmt.Sprintf("the bare phrase %q", n.Value)
			}
			return b.everyText(n.Pos(), what, func(ix schema.Index) (index.Op, error) { return b.term(n, ix) })
		}
		ix, err := b.field(n.Field, n.Pos())
		if err != nil {
			return nil, err
		}
		return b.term(n, ix)
	case Prefix:
		if n.Field == "" {
			return b.everyText(n.Pos(), fmt.Sprintf("the bare prefix %q", n.Prefix+"*"), func(ix schema.Index) (index.Op, error) { return b.prefix(n, ix) })
		}
		ix, err := b.field(n.Field, n.Pos())
		if err != nil {
			return nil, err
		}
		return b.prefix(n, ix)
	case Range:
		if n.Field == "" {
			return nil, errAt(n.Pos(), "a range needs a field (field:[a TO b])")
		}
		ix, err := b.field(n.Field, n.Pos())
		if err != nil {
			return nil, err
		}
		return b.rng(n, ix)
	}
	return nil, fmt.Errorf("query: unknown node %T", n)
}

func (b *binder) term(n Term, ix schema.Index) (index.Op, error) {
	f := ix.String()
	if ix.Kind == "text" {
		toks := index.Tokenize(n.Value)
		switch len(toks) {
		case 0:
			return nil, errAt(n.Pos(), "%q has no word to search for in text field %q (words are letters and digits)", n.Value, f)
		case 1:
			return index.Equal{Field: f, Value: toks[0].Term, Text: true}, nil
		}
		terms := make([]string, len(toks))
		for i, t := range toks {
			terms[i] = t.Term
		}
		return index.Phrase{Field: f, Terms: terms}, nil
	}
	v, err := convert(n.Value, ix, n.Pos())
	if err != nil {
		return nil, err
	}
	return index.Equal{Field: f, Value: v}, nil
}

func (b *binder) prefix(n Prefix, ix schema.Index) (index.Op, error) {
	f := ix.String()
	switch {
	case ix.Kind == "text":
		if n.Prefix == "" {
			return index.Range{Field: f, LowerInclusive: true, UpperInclusive: true}, nil
		}
		toks := index.Tokenize(n.Prefix)
		if len(toks) != 1 {
			return nil, errAt(n.Pos(), "the prefix %q on text field %q must be one word", n.Prefix+"*", f)
		}
		return index.Prefix{Field: f, Prefix: toks[0].Term, Text: true}, nil
	case ix.Type == "string" || ix.Type == "enum":
		return index.Prefix{Field: f, Prefix: n.Prefix}, nil
	}
	return nil, errAt(n.Pos(), "a prefix (%q) needs a string, enum or text field; %q is %s", n.Prefix+"*", f, ix.Type)
}

func (b *binder) rng(n Range, ix schema.Index) (index.Op, error) {
	f := ix.String()
	op := index.Range{Field: f, LowerInclusive: n.LowerInclusive, UpperInclusive: n.UpperInclusive}
	if n.LowerOpen && n.UpperOpen {
		return op, nil // field:*: has a value, text or attribute
	}
	if ix.Kind == "text" {
		return nil, errAt(n.Pos(), "ranges are not supported on text field %q; index it as an attribute to query ranges", f)
	}
	var err error
	if !n.LowerOpen {
		if op.Lower, err = convert(n.Lower, ix, n.Pos()); err != nil {
			return nil, err
		}
	}
	if !n.UpperOpen {
		if op.Upper, err = convert(n.Upper, ix, n.Pos()); err != nil {
			return nil, err
		}
	}
	return op, nil
}

// convert parses a query value as a value of the attribute field ix, in
// normalized document form.
func convert(s string, ix schema.Index, pos int) (any, error) {
	f := ix.String()
	bad := func(want string) error {
		return errAt(pos, "field %q is %s: %q is not %s", f, describeType(ix), s, want)
	}
	switch ix.Type {
	case "string", "enum":
		return s, nil
	case "boolean":
		switch s {
		case "true":
			return true, nil
		case "false":
			return false, nil
		}
		return nil, bad("true or false")
	case "int", "long":
		if v, err := strconv.ParseInt(s, 10, 64); err == nil {
			if ix.Type == "int" && (v < math.MinInt32 || v > math.MaxInt32) {
				return nil, errAt(pos, "field %q is int: %s is out of its range", f, s)
			}
			return v, nil
		}
		switch ix.Logical {
		case "timestamp-millis", "local-timestamp-millis":
			if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
				return t.UnixMilli(), nil
			}
			return nil, bad("an integer (milliseconds) or an RFC 3339 time")
		case "timestamp-micros", "local-timestamp-micros":
			if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
				return t.UnixMicro(), nil
			}
			return nil, bad("an integer (microseconds) or an RFC 3339 time")
		case "date":
			if t, err := time.Parse(time.DateOnly, s); err == nil {
				return t.Unix() / 86400, nil
			}
			return nil, bad("an integer (days) or a YYYY-MM-DD date")
		}
		return nil, bad("an integer")
	case "float", "double":
		v, err := strconv.ParseFloat(s, 64)
		if err != nil || math.IsNaN(v) || math.IsInf(v, 0) {
			return nil, bad("a finite number")
		}
		if ix.Type == "float" {
			v = float32Value(v)
		}
		return v, nil
	case "bytes":
		v, err := base64.StdEncoding.DecodeString(s)
		if err != nil {
			return nil, bad("base64")
		}
		return v, nil
	}
	return nil, errAt(pos, "field %q of type %s cannot be queried", f, ix.Type)
}

func describeType(ix schema.Index) string {
	t := ix.Type
	if ix.Logical != "" {
		t += " (" + ix.Logical + ")"
	}
	if ix.Array {
		t = "an array of " + t
	}
	return t
}

func (b *binder) sort(s string) (index.Sort, error) {
	if s == "" {
		return index.Sort{}, nil
	}
	var srt index.Sort
	name := s
	switch s[0] {
	case '-':
		srt.Desc, name = true, s[1:]
	case '+':
		name = s[1:]
	}
	bad := func(format string, args ...any) error {
		return problem.Field(problem.Malformed, "sort", "sort: "+format, args...)
	}
	if strings.Contains(name, ",") {
		return srt, bad("sort by one field, not %q", s)
	}
	ix, ok := b.fields[name]
	switch {
	case name == "":
		return srt, bad("expected a field name after %q", s)
	case !ok && b.s.HasField != nil && b.s.HasField(name):
		return srt, bad("field %q is not indexed; sort by an attribute-indexed field", name)
	case !ok:
		return srt, bad("unknown field %q; sort by an attribute-indexed field", name)
	case ix.Kind != "attribute":
		return srt, bad("field %q has a text index; sort by an attribute-indexed field", name)
	}
	b.used[name] = true
	srt.Field, srt.Multi = name, ix.Array
	return srt, nil
}

// float32Value is a float field's value as documents hold it (see
// schema's normalized form): the double nearest to the shortest decimal that
// identifies the float32, so ratio:0.1 finds the 0.1 stored.
func float32Value(v float64) float64 {
	f := float32(v)
	if f == 0 || math.IsInf(float64(f), 0) {
		return float64(f)
	}
	d, err := strconv.ParseFloat(strconv.FormatFloat(float64(f), 'g', -1, 32), 64)
	if err != nil {
		return float64(f)
	}
	return d
}
