package query

import (
	"strings"
	"testing"

	"github.com/doppio-db/doppio/internal/schema"
)

// mailbox is the schema of the plan tests: every type an index takes.
var mailbox = Schema{
	Indexes: []schema.Index{
		{Path: []string{"subject"}, Kind: "text", Type: "string"},
		{Path: []string{"body"}, Kind: "text", Type: "string", Nullable: true},
		{Path: []string{"labels"}, Kind: "text", Type: "string", Array: true},
		{Path: []string{"isInbox"}, Kind: "attribute", Type: "boolean"},
		{Path: []string{"createdOn"}, Kind: "attribute", Type: "long", Logical: "timestamp-millis"},
		{Path: []string{"size"}, Kind: "attribute", Type: "long"},
		{Path: []string{"count"}, Kind: "attribute", Type: "int"},
		{Path: []string{"day"}, Kind: "attribute", Type: "int", Logical: "date"},
		{Path: []string{"score"}, Kind: "attribute", Type: "double", Nullable: true},
		{Path: []string{"ratio"}, Kind: "attribute", Type: "float"},
		{Path: []string{"tags"}, Kind: "attribute", Type: "string", Array: true},
		{Path: []string{"folder"}, Kind: "attribute", Type: "enum"},
		{Path: []string{"blob"}, Kind: "attribute", Type: "bytes"},
		{Path: []string{"address", "city"}, Kind: "attribute", Type: "string"},
	},
	HasField: func(p string) bool { return p == "note" || p == "address" || p == "address.zip" },
}

// TestPlan runs testdata/plan: a query, optionally "sort: …", then the plan
// or the error.
func TestPlan(t *testing.T) {
	runDataDriven(t, "testdata/plan", func(in []string) string {
		q, sort := in[0], ""
		for _, l := range in[1:] {
			if s, ok := strings.CutPrefix(l, "sort: "); ok {
				sort = s
			}
		}
		p, err := Compile(q, sort, mailbox)
		if err != nil {
			return renderErr(err)
		}
		return p.String() + "\nfields: " + strings.Join(p.Fields, ",")
	})
}

func TestCompileWithoutTextFields(t *testing.T) {
	s := Schema{Indexes: []schema.Index{{Path: []string{"n"}, Kind: "attribute", Type: "long"}}}
	_, err := Compile("hello", "", s)
	if got := renderErr(err); got != `error(query): query: position 1: the bare word "hello" needs a field (field:value): the table has no text-indexed field` {
		t.Fatal(got)
	}
	_, err = Compile("x:1", "", Schema{})
	if got := renderErr(err); got != `error(query): query: position 1: unknown field "x" (the table has no indexed field)` {
		t.Fatal(got)
	}
}
