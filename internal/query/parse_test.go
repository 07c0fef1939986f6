package query

import (
	"fmt"
	"strings"
	"testing"

	"github.com/doppio-db/doppio/internal/problem"
)

// dump renders a tree with node kinds and positions.
func dump(n Node) string {
	switch n := n.(type) {
	case Term:
		kind := "term"
		if n.Quoted {
			kind = "quoted"
		}
		return fmt.Sprintf("%s@%d %s %q", kind, n.Pos(), orAny(n.Field), n.Value)
	case Prefix:
		return fmt.Sprintf("prefix@%d %s %q", n.Pos(), orAny(n.Field), n.Prefix)
	case Range:
		return fmt.Sprintf("range@%d %s", n.Pos(), n.String())
	case MatchAll:
		return fmt.Sprintf("all@%d", n.Pos())
	case Not:
		return fmt.Sprintf("(not@%d %s)", n.Pos(), dump(n.Clause))
	case And:
		return fmt.Sprintf("(and@%d %s)", n.Pos(), dumpAll(n.Clauses))
	case Or:
		return fmt.Sprintf("(or@%d %s)", n.Pos(), dumpAll(n.Clauses))
	}
	return "?"
}

func orAny(f string) string {
	if f == "" {
		return "<text>"
	}
	return f
}

func dumpAll(ns []Node) string {
	s := make([]string, len(ns))
	for i, n := range ns {
		s[i] = dump(n)
	}
	return strings.Join(s, " ")
}

func renderErr(err error) string {
	e, ok := problem.As(err)
	if !ok || e.Kind != problem.Malformed {
		return fmt.Sprintf("unexpected error %T: %v", err, err)
	}
	return "error(" + e.Field + "): " + e.Detail
}

func TestParse(t *testing.T) {
	runDataDriven(t, "testdata/parse", func(in []string) string {
		q := strings.Join(in, "\n")
		n, err := Parse(q)
		if err != nil {
			return renderErr(err)
		}
		// Rendering parses back to the same tree.
		again, err := Parse(n.String())
		if err != nil || again.String() != n.String() {
			t.Errorf("%q renders as %q, which parses back as %v (%v)", q, n.String(), again, err)
		}
		return dump(n)
	})
}

func TestParseLimits(t *testing.T) {
	tests := []struct {
		name, q, detail string
	}{
		{"too long", strings.Repeat("a ", 2048) + "b", "query: 4097 characters, more than the limit of 4096"},
		{"long in bytes but not in characters", strings.Repeat("é", 4096), ""},
		{"deep parentheses", strings.Repeat("(", 33) + "a" + strings.Repeat(")", 33), "query: position 33: nesting deeper than 32 levels"},
		{"32 levels", strings.Repeat("(", 32) + "a" + strings.Repeat(")", 32), ""},
		{"deep negation", strings.Repeat("NOT ", 33) + "a", "query: position 129: nesting deeper than 32 levels"},
		{"deep minus", strings.Repeat("-", 33) + "a", "query: position 33: nesting deeper than 32 levels"},
		{"too many clauses", strings.Repeat("a ", 257), "query: position 513: more than 256 clauses"},
		{"256 clauses", strings.Repeat("a ", 256), ""},
		{"invalid UTF-8", "a:\xff", "query: not valid UTF-8"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse(tc.q)
			if tc.detail == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			e, ok := problem.As(err)
			if !ok || e.Kind != problem.Malformed || e.Field != "query" || e.Detail != tc.detail {
				t.Fatalf("got %#v, want Malformed query %q", err, tc.detail)
			}
		})
	}
}

func FuzzParse(f *testing.F) {
	for _, s := range []string{`a:b AND (c OR -d:"e f")`, `x:[1 TO *}`, `p*`, `a\:b`, `NOT (a) b:(c d)`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, q string) {
		n, err := Parse(q)
		if err != nil {
			if _, ok := problem.As(err); !ok {
				t.Fatalf("%q: error is not a problem: %v", q, err)
			}
			return
		}
		again, err := Parse(n.String())
		if err != nil || again.String() != n.String() {
			t.Fatalf("%q renders as %q, which parses back as %v (%v)", q, n.String(), again, err)
		}
	})
}
