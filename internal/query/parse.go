package query

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/doppio-db/doppio/internal/problem"
)

// Limits of a query.
const (
	MaxLength  = 4096 // characters
	MaxDepth   = 32   // nested parentheses and negations
	MaxClauses = 256  // field:value, phrase, range, prefix and * clauses
)

// Parse parses a query in the Lucene-like syntax:
//
//	field:value  field:"a phrase"  field:pre*  field:*  (has a value)
//	field:[10 TO 20]  field:{a TO *}  field:[a TO b}   ([ ] inclusive, { } exclusive, * open)
//	a AND b   a OR b   NOT a   -a   +a   a b (AND)   ( … )   field:( … )
//	word  "a phrase"  pre*   (every text-indexed field)   *  (every document)
//
// NOT binds tighter than AND, AND tighter than OR. AND, OR, NOT and TO are
// keywords only in capitals. A backslash escapes the next character, in
// words and in quotes. Field names are dotted paths (address.city).
//
// Errors are *problem.Error, Kind Malformed, Field "query", with a detail
// "query: position N: reason" (N counts characters from 1).
func Parse(q string) (Node, error) {
	if n := utf8.RuneCountInString(q); n > MaxLength {
		return nil, problem.Field(problem.Malformed, "query", "query: %d characters, more than the limit of %d", n, MaxLength)
	}
	if !utf8.ValidString(q) {
		return nil, problem.Field(problem.Malformed, "query", "query: not valid UTF-8")
	}
	p := &parser{src: []rune(q)}
	p.skipSpace()
	if p.eof() {
		return nil, p.errorf(1, "the query is empty; use * to match every document")
	}
	n, err := p.parseOr("", 0)
	if err != nil {
		return nil, err
	}
	if !p.eof() {
		if p.peek() == ')' {
			return nil, p.errorf(p.pos+1, "unbalanced ): no ( to close")
		}
		return nil, p.errorf(p.pos+1, "unexpected %s", p.describe())
	}
	return n, nil
}

type parser struct {
	src     []rune
	pos     int // index into src
	clauses int
}

func (p *parser) errorf(pos int, format string, args ...any) error {
	return problem.Field(problem.Malformed, "query", "query: position %d: %s", pos, fmt.Sprintf(format, args...))
}

func (p *parser) eof() bool  { return p.pos >= len(p.src) }
func (p *parser) peek() rune { return p.src[p.pos] }

func (p *parser) skipSpace() {
	for !p.eof() && isSpace(p.peek()) {
		p.pos++
	}
}

// describe names what is at the current position, for error messages.
func (p *parser) describe() string {
	if p.eof() {
		return "end of query"
	}
	if kw := p.keyword(); kw != "" {
		return kw
	}
	return fmt.Sprintf("%q", p.peek())
}

// keyword returns the keyword (AND, OR, NOT, TO, && or ||) at the current
// position, or "".
func (p *parser) keyword() string {
	for _, kw := range []string{"AND", "OR", "NOT", "TO"} {
		end := p.pos + len(kw)
		if end <= len(p.src) && string(p.src[p.pos:end]) == kw && (end == len(p.src) || isSpecial(p.src[end]) && p.src[end] != '\\') {
			return kw
		}
	}
	return ""
}

func (p *parser) enter(depth, pos int) error {
	if depth > MaxDepth {
		return p.errorf(pos, "nesting deeper than %d levels", MaxDepth)
	}
	return nil
}

func (p *parser) parseOr(field string, depth int) (Node, error) {
	start := p.pos + 1
	first, err := p.parseAnd(field, depth)
	if err != nil {
		return nil, err
	}
	clauses := []Node{first}
	for {
		p.skipSpace()
		if p.eof() || p.keyword() != "OR" {
			break
		}
		at := p.pos + 1
		p.pos += 2
		p.skipSpace()
		if p.eof() || p.peek() == ')' || p.keyword() == "OR" || p.keyword() == "AND" {
			return nil, p.errorf(at, "expected a clause after OR, found %s", p.describe())
		}
		n, err := p.parseAnd(field, depth)
		if err != nil {
			return nil, err
		}
		clauses = append(clauses, n)
	}
	if len(clauses) == 1 {
		return first, nil
	}
	return Or{At: At(start), Clauses: clauses}, nil
}

func (p *parser) parseAnd(field string, depth int) (Node, error) {
	start := p.pos + 1
	first, err := p.parseUnary(field, depth)
	if err != nil {
		return nil, err
	}
	clauses := []Node{first}
	for {
		p.skipSpace()
		if p.eof() || p.peek() == ')' || p.keyword() == "OR" {
			break
		}
		if p.keyword() == "AND" {
			at := p.pos + 1
			p.pos += 3
			p.skipSpace()
			if p.eof() || p.peek() == ')' || p.keyword() == "OR" || p.keyword() == "AND" {
				return nil, p.errorf(at, "expected a clause after AND, found %s", p.describe())
			}
		}
		n, err := p.parseUnary(field, depth)
		if err != nil {
			return nil, err
		}
		clauses = append(clauses, n)
	}
	if len(clauses) == 1 {
		return first, nil
	}
	return And{At: At(start), Clauses: clauses}, nil
}

func (p *parser) parseUnary(field string, depth int) (Node, error) {
	p.skipSpace()
	at := p.pos + 1
	neg := false
	switch {
	case p.keyword() == "NOT":
		p.pos += 3
		neg = true
	case p.peek() == '-' || p.peek() == '+':
		neg = p.peek() == '-'
		p.pos++
		if p.eof() || isSpace(p.peek()) {
			return nil, p.errorf(at, "expected a clause right after %q", p.src[at-1])
		}
		if !neg {
			return p.parseUnary(field, depth)
		}
	default:
		return p.parsePrimary(field, depth)
	}
	if err := p.enter(depth+1, at); err != nil {
		return nil, err
	}
	p.skipSpace()
	if p.eof() || p.peek() == ')' || p.keyword() == "AND" || p.keyword() == "OR" {
		return nil, p.errorf(at, "expected a clause after NOT, found %s", p.describe())
	}
	n, err := p.parseUnary(field, depth+1)
	if err != nil {
		return nil, err
	}
	return Not{At: At(at), Clause: n}, nil
}

func (p *parser) clause(at int) error {
	if p.clauses++; p.clauses > MaxClauses {
		return p.errorf(at, "more than %d clauses", MaxClauses)
	}
	return nil
}

func (p *parser) parsePrimary(field string, depth int) (Node, error) {
	at := p.pos + 1
	switch c := p.peek(); {
	case c == '(':
		return p.parseGroup(field, depth)
	case c == ')':
		return nil, p.errorf(at, "unbalanced ): no ( to close")
	case c == '"':
		v, err := p.readQuoted()
		if err != nil {
			return nil, err
		}
		return Term{At: At(at), Field: field, Value: v, Quoted: true}, p.clause(at)
	case c == '*' && p.starAlone():
		p.pos++
		if field != "" {
			return openRange(at, field), p.clause(at)
		}
		return MatchAll{At: At(at)}, p.clause(at)
	case c == '[' || c == '{' || c == ']' || c == '}' || c == ':':
		if field != "" && (c == '[' || c == '{') {
			return p.parseRange(field, at)
		}
		return nil, p.errorf(at, "unexpected %q; quote or escape it (\\%c) to search for it", c, c)
	}
	if kw := p.keyword(); kw != "" {
		return nil, p.errorf(at, "expected a clause, found %s; escape it (\\%s) to search for the word", kw, kw)
	}
	w, err := p.readWord(false)
	if err != nil {
		return nil, err
	}
	if !p.eof() && p.peek() == ':' {
		if w.escaped || w.prefix || !validField(w.text) {
			return nil, p.errorf(at, "invalid field name %q: want names of letters, digits and _ joined by dots", string(p.src[at-1:p.pos]))
		}
		p.pos++
		return p.parseValue(w.text, at, depth)
	}
	if w.prefix && w.text == "" {
		return nil, p.errorf(at, "expected a value before *")
	}
	if w.prefix {
		return Prefix{At: At(at), Field: field, Prefix: w.text}, p.clause(at)
	}
	return Term{At: At(at), Field: field, Value: w.text}, p.clause(at)
}

// parseValue parses what follows "field:".
func (p *parser) parseValue(field string, at, depth int) (Node, error) {
	if p.eof() || isSpace(p.peek()) || p.peek() == ')' {
		return nil, p.errorf(p.pos+1, "expected a value after %q", field+":")
	}
	switch p.peek() {
	case '(':
		return p.parseGroup(field, depth)
	case '[', '{':
		return p.parseRange(field, at)
	case '"':
		v, err := p.readQuoted()
		if err != nil {
			return nil, err
		}
		return Term{At: At(at), Field: field, Value: v, Quoted: true}, p.clause(at)
	case '*':
		if p.starAlone() {
			p.pos++
			return openRange(at, field), p.clause(at)
		}
	case ']', '}', ':':
		return nil, p.errorf(p.pos+1, "unexpected %q after %q; quote or escape it", p.peek(), field+":")
	}
	w, err := p.readWord(true)
	if err != nil {
		return nil, err
	}
	if w.prefix && w.text == "" {
		return nil, p.errorf(at, "expected a value before *")
	}
	if w.prefix {
		return Prefix{At: At(at), Field: field, Prefix: w.text}, p.clause(at)
	}
	return Term{At: At(at), Field: field, Value: w.text}, p.clause(at)
}

// starAlone reports whether the * at the current position stands alone:
// followed by the end, a space or a parenthesis.
func (p *parser) starAlone() bool {
	n := p.pos + 1
	return n == len(p.src) || isSpace(p.src[n]) || p.src[n] == ')' || p.src[n] == '('
}

func openRange(at int, field string) Range {
	return Range{At: At(at), Field: field, LowerOpen: true, UpperOpen: true, LowerInclusive: true, UpperInclusive: true}
}

func (p *parser) parseGroup(field string, depth int) (Node, error) {
	at := p.pos + 1
	if err := p.enter(depth+1, at); err != nil {
		return nil, err
	}
	p.pos++
	p.skipSpace()
	if p.eof() {
		return nil, p.errorf(at, "unbalanced (: no ) closes it")
	}
	if p.peek() == ')' {
		return nil, p.errorf(at, "empty parentheses")
	}
	n, err := p.parseOr(field, depth+1)
	if err != nil {
		return nil, err
	}
	p.skipSpace()
	if p.eof() || p.peek() != ')' {
		return nil, p.errorf(at, "unbalanced (: no ) closes it")
	}
	p.pos++
	return n, nil
}

func (p *parser) parseRange(field string, at int) (Node, error) {
	open := p.pos + 1
	r := Range{At: At(at), Field: field, LowerInclusive: p.peek() == '['}
	p.pos++
	var err error
	p.skipSpace()
	if r.Lower, r.LowerOpen, err = p.readBound("a lower bound"); err != nil {
		return nil, err
	}
	p.skipSpace()
	if p.keyword() != "TO" {
		return nil, p.errorf(p.pos+1, "expected TO in the range opened at position %d, found %s", open, p.describe())
	}
	p.pos += 2
	p.skipSpace()
	if r.Upper, r.UpperOpen, err = p.readBound("an upper bound"); err != nil {
		return nil, err
	}
	p.skipSpace()
	if p.eof() || (p.peek() != ']' && p.peek() != '}') {
		return nil, p.errorf(p.pos+1, "expected ] or } to close the range opened at position %d, found %s", open, p.describe())
	}
	r.UpperInclusive = p.peek() == ']'
	p.pos++
	return r, p.clause(at)
}

func (p *parser) readBound(what string) (string, bool, error) {
	at := p.pos + 1
	if p.eof() || p.peek() == ']' || p.peek() == '}' || p.keyword() == "TO" {
		return "", false, p.errorf(at, "expected %s, found %s", what, p.describe())
	}
	if p.peek() == '"' {
		v, err := p.readQuoted()
		return v, false, err
	}
	w, err := p.readWord(true)
	if err != nil {
		return "", false, err
	}
	if w.prefix && w.text == "" {
		return "", true, nil
	}
	if w.prefix {
		return "", false, p.errorf(at, "a range bound cannot be a prefix; escape the * (\\*) to search for it")
	}
	if w.text == "" {
		return "", false, p.errorf(at, "expected %s, found %s", what, p.describe())
	}
	return w.text, false, nil
}

type word struct {
	text    string
	prefix  bool // ended with an unescaped *
	escaped bool // held a backslash escape
}

// readWord reads a bare word: up to a space or a special character, with
// backslash escapes; an unescaped * is allowed only at its end. In a value
// (colon set), a colon is part of the word: createdOn:2024-01-02T03:04:05Z.
func (p *parser) readWord(colon bool) (word, error) {
	var b strings.Builder
	var w word
	for !p.eof() {
		c := p.peek()
		switch {
		case c == '\\':
			if p.pos+1 == len(p.src) {
				return w, p.errorf(p.pos+1, "a \\ at the end of the query escapes nothing")
			}
			b.WriteRune(p.src[p.pos+1])
			w.escaped = true
			p.pos += 2
			continue
		case c == '*':
			p.pos++
			if !p.eof() && (!isSpecial(p.peek()) || (colon && p.peek() == ':')) {
				return w, p.errorf(p.pos, "a * wildcard is only allowed at the end of a value; escape it (\\*) to search for it")
			}
			w.prefix = true
			w.text = b.String()
			return w, nil
		case isSpecial(c) && !(colon && c == ':'):
			w.text = b.String()
			return w, nil
		}
		b.WriteRune(c)
		p.pos++
	}
	w.text = b.String()
	return w, nil
}

// readQuoted reads a "quoted" value with backslash escapes.
func (p *parser) readQuoted() (string, error) {
	open := p.pos + 1
	p.pos++
	var b strings.Builder
	for !p.eof() {
		c := p.peek()
		switch c {
		case '\\':
			if p.pos+1 == len(p.src) {
				return "", p.errorf(open, "unterminated quote")
			}
			b.WriteRune(p.src[p.pos+1])
			p.pos += 2
			continue
		case '"':
			p.pos++
			return b.String(), nil
		}
		b.WriteRune(c)
		p.pos++
	}
	return "", p.errorf(open, "unterminated quote")
}

// validField reports whether s is a dotted path of names.
func validField(s string) bool {
	if s == "" {
		return false
	}
	for seg := range strings.SplitSeq(s, ".") {
		if seg == "" {
			return false
		}
		for i, r := range seg {
			if !(r == '_' || unicode.IsLetter(r) || (i > 0 && unicode.IsDigit(r))) {
				return false
			}
		}
	}
	return true
}
