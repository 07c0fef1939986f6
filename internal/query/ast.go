package query

import "strings"

// Node is a node of a parsed query. Pos is the 1-based character position
// of the clause in the query text, for error messages.
type Node interface {
	Pos() int
	// String renders the node in query syntax; parsing it gives the same
	// tree (positions aside).
	String() string
	node()
}

// At is the 1-based character position of a node in the query.
type At int

// Pos returns the position.
func (a At) Pos() int { return int(a) }

// Term is field:value, field:"quoted value", or a bare word or phrase (Field
// ""), which searches every text-indexed field.
type Term struct {
	At
	Field  string
	Value  string // unescaped
	Quoted bool
}

// Prefix is field:pre* (or a bare pre*): a value or term starting with
// Prefix.
type Prefix struct {
	At
	Field  string
	Prefix string
}

// Range is field:[lower TO upper], with [ ] inclusive and { } exclusive
// bounds; an unbounded end (*) is marked Open. field:* is a range with both
// ends open: the field has a value.
type Range struct {
	At
	Field                          string
	Lower, Upper                   string
	LowerOpen, UpperOpen           bool
	LowerInclusive, UpperInclusive bool
}

// And matches what every clause matches (AND, or clauses side by side).
type And struct {
	At
	Clauses []Node
}

// Or matches what some clause matches.
type Or struct {
	At
	Clauses []Node
}

// Not matches what Clause does not (NOT x, -x).
type Not struct {
	At
	Clause Node
}

// MatchAll is * alone: every document.
type MatchAll struct{ At }

func (Term) node()     {}
func (Prefix) node()   {}
func (Range) node()    {}
func (And) node()      {}
func (Or) node()       {}
func (Not) node()      {}
func (MatchAll) node() {}

func (n Term) String() string {
	v := quote(n.Value)
	if !n.Quoted {
		v = escapeWord(n.Value)
	}
	return fieldPrefix(n.Field) + v
}

func (n Prefix) String() string { return fieldPrefix(n.Field) + escapeWord(n.Prefix) + "*" }

func (n Range) String() string {
	if n.LowerOpen && n.UpperOpen && n.LowerInclusive && n.UpperInclusive {
		return fieldPrefix(n.Field) + "*"
	}
	b := []byte(fieldPrefix(n.Field))
	if n.LowerInclusive {
		b = append(b, '[')
	} else {
		b = append(b, '{')
	}
	b = append(b, bound(n.Lower, n.LowerOpen)...)
	b = append(b, " TO "...)
	b = append(b, bound(n.Upper, n.UpperOpen)...)
	if n.UpperInclusive {
		b = append(b, ']')
	} else {
		b = append(b, '}')
	}
	return string(b)
}

func (n And) String() string { return join(n.Clauses, " AND ") }
func (n Or) String() string  { return join(n.Clauses, " OR ") }
func (n Not) String() string { return "NOT " + n.Clause.String() }
func (MatchAll) String() string {
	return "*"
}

func join(cs []Node, sep string) string {
	s := make([]string, len(cs))
	for i, c := range cs {
		s[i] = c.String()
	}
	return "(" + strings.Join(s, sep) + ")"
}

func fieldPrefix(f string) string {
	if f == "" {
		return ""
	}
	return f + ":"
}

func bound(v string, open bool) string {
	if open {
		return "*"
	}
	return quote(v)
}

func quote(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range s {
		if r == '"' || r == '\\' {
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	b.WriteByte('"')
	return b.String()
}

// escapeWord escapes the characters that would end or change a bare word.
func escapeWord(s string) string {
	if s == "" {
		return `""`
	}
	if s == "AND" || s == "OR" || s == "NOT" || s == "TO" {
		return `\` + s
	}
	var b strings.Builder
	for i, r := range s {
		if isSpecial(r) || (i == 0 && (r == '-' || r == '+')) {
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	return b.String()
}

// isSpecial reports the characters that end a bare word.
func isSpecial(r rune) bool {
	switch r {
	case '(', ')', '"', ':', '[', ']', '{', '}', '*', '\\':
		return true
	}
	return isSpace(r)
}

func isSpace(r rune) bool {
	return r == ' ' || r == '\t' || r == '\n' || r == '\r' || r == '\f' || r == '\v' || r == 0x85 || r == 0xA0 || r == 0x3000
}
