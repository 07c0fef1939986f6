package schema

import (
	"encoding/json"
	"fmt"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"
)

// parseJSON decodes exactly one JSON value, with nothing but white space
// after it, into what encoding/json's Decoder with UseNumber gives for an
// any: map[string]any (a repeated name keeps its last value), []any,
// string (each invalid UTF-8 byte and each unpaired surrogate escape
// becoming U+FFFD), json.Number, bool and nil. It is that decoder's
// equal on every input (FuzzParseJSON holds it to that) in a single pass
// over body, without its reflection and buffering: a document's body is
// the write path's largest JSON.
func parseJSON(body []byte) (any, error) {
	p := jsonParser{b: body}
	p.space()
	if p.i == len(p.b) {
		return nil, errEmptyJSON
	}
	v, err := p.value(0)
	if err != nil {
		return nil, err
	}
	if p.space(); p.i < len(p.b) {
		return nil, errTrailingJSON
	}
	return v, nil
}

var (
	errEmptyJSON    = fmt.Errorf("empty body: expected a JSON object")
	errTrailingJSON = fmt.Errorf("unexpected data after the top-level value")
)

// maxJSONDepth is encoding/json's nesting limit.
const maxJSONDepth = 10000

type jsonParser struct {
	b []byte
	i int
}

// jsonSyntaxError is where and why the input stops being JSON.
type jsonSyntaxError struct {
	offset int
	msg    string
}

func (e *jsonSyntaxError) Error() string {
	return fmt.Sprintf("%s (at byte %d)", e.msg, e.offset)
}

func (p *jsonParser) fail(context string) error {
	if p.i >= len(p.b) {
		return &jsonSyntaxError{p.i, "unexpected end of JSON input"}
	}
	return &jsonSyntaxError{p.i, fmt.Sprintf("invalid character %s %s", quoteChar(p.b[p.i]), context)}
}

// quoteChar renders c as encoding/json's messages do, but a byte outside
// ASCII as its hexadecimal escape (encoding/json shows it as the Latin-1
// character of that number).
func quoteChar(c byte) string {
	switch {
	case c == '\'':
		return `'\''`
	case c == '"':
		return `'"'`
	case c < utf8.RuneSelf:
		s := strconv.Quote(string(rune(c)))
		return "'" + s[1:len(s)-1] + "'"
	}
	return fmt.Sprintf(`'\x%02x'`, c)
}

func (p *jsonParser) space() {
	for p.i < len(p.b) {
		switch p.b[p.i] {
		case ' ', '\t', '\n', '\r':
			p.i++
		default:
			return
		}
	}
}

func (p *jsonParser) value(depth int) (any, error) {
	if p.i >= len(p.b) {
		return nil, p.fail("")
	}
	switch c := p.b[p.i]; {
	case c == '{':
		if depth+1 > maxJSONDepth {
			return nil, &jsonSyntaxError{p.i, "exceeded max depth"}
		}
		return p.object(depth + 1)
	case c == '[':
		if depth+1 > maxJSONDepth {
			return nil, &jsonSyntaxError{p.i, "exceeded max depth"}
		}
		return p.array(depth + 1)
	case c == '"':
		s, err := p.string()
		if err != nil {
			return nil, err
		}
		return s, nil
	case c == '-' || '0' <= c && c <= '9':
		return p.number()
	case c == 't':
		return true, p.literal("true")
	case c == 'f':
		return false, p.literal("false")
	case c == 'n':
		return nil, p.literal("null")
	}
	return nil, p.fail("looking for beginning of value")
}

func (p *jsonParser) literal(word string) error {
	for k := 0; k < len(word); k++ {
		if p.i >= len(p.b) || p.b[p.i] != word[k] {
			return p.fail(fmt.Sprintf("in literal %s (expecting %s)", word, quoteChar(word[k])))
		}
		p.i++
	}
	return nil
}

func (p *jsonParser) object(depth int) (any, error) {
	m := make(map[string]any)
	err := p.elements('}', "after object key:value pair", func() error {
		if p.i >= len(p.b) || p.b[p.i] != '"' {
			return p.fail("looking for beginning of object key string")
		}
		k, err := p.string()
		if err != nil {
			return err
		}
		if p.space(); p.i >= len(p.b) || p.b[p.i] != ':' {
			return p.fail("after object key")
		}
		p.i++
		p.space()
		v, err := p.value(depth)
		if err != nil {
			return err
		}
		m[k] = v // a repeated name: the last value
		return nil
	})
	if err != nil {
		return nil, err
	}
	return m, nil
}

func (p *jsonParser) array(depth int) (any, error) {
	a := []any{}
	err := p.elements(']', "after array element", func() error {
		v, err := p.value(depth)
		if err != nil {
			return err
		}
		a = append(a, v)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return a, nil
}

// elements is members for the long way, which words its errors: each's
// error, or the failure after (at p.i) when a member is followed by
// neither a comma nor the closing byte.
func (p *jsonParser) elements(closing byte, after string, each func() error) error {
	var err error
	if p.members(closing, func() bool { err = each(); return err == nil }) {
		return nil
	}
	if err != nil {
		return err
	}
	return p.fail(after)
}

// members reads the members of the object or the elements of the array
// whose opening byte is at p.i, through its closing byte: each reads one
// (from its first byte) and reports whether it could. It reports whether
// it read them all; it stops at the first that each could not read, or
// that is followed by neither a comma nor the closing byte, with p.i
// there.
func (p *jsonParser) members(closing byte, each func() bool) bool {
	p.i++ // the opening byte
	p.space()
	if p.i < len(p.b) && p.b[p.i] == closing {
		p.i++
		return true
	}
	for {
		if !each() {
			return false
		}
		switch p.separator(closing) {
		case sepEnd:
			return true
		case sepBad:
			return false
		}
	}
}

const (
	sepMore = iota // a comma: another member or element follows
	sepEnd         // the closing bracket
	sepBad         // anything else
)

// separator reads what follows a member or element: a comma, or the
// closing byte.
func (p *jsonParser) separator(closing byte) int {
	p.space()
	if p.i < len(p.b) {
		switch p.b[p.i] {
		case ',':
			p.i++
			p.space()
			return sepMore
		case closing:
			p.i++
			return sepEnd
		}
	}
	return sepBad
}

// intPart reads a number's integer part, 0 or [1-9][0-9]*, and reports
// whether there was one.
func (p *jsonParser) intPart() bool {
	switch {
	case p.i < len(p.b) && p.b[p.i] == '0':
		p.i++
	case p.i < len(p.b) && '1' <= p.b[p.i] && p.b[p.i] <= '9':
		p.digits()
	default:
		return false
	}
	return true
}

// number reads a JSON number as written: -?(0|[1-9][0-9]*)(.[0-9]+)?([eE][+-]?[0-9]+)?
func (p *jsonParser) number() (any, error) {
	start := p.i
	if p.b[p.i] == '-' {
		p.i++
	}
	if !p.intPart() {
		return nil, p.fail("in numeric literal")
	}
	if p.i < len(p.b) && p.b[p.i] == '.' {
		p.i++
		if !p.digits() {
			return nil, p.fail("after decimal point in numeric literal")
		}
	}
	if p.i < len(p.b) && (p.b[p.i] == 'e' || p.b[p.i] == 'E') {
		p.i++
		if p.i < len(p.b) && (p.b[p.i] == '+' || p.b[p.i] == '-') {
			p.i++
		}
		if !p.digits() {
			return nil, p.fail("in exponent of numeric literal")
		}
	}
	return json.Number(p.b[start:p.i]), nil
}

// digits consumes [0-9]* and reports whether there was one.
func (p *jsonParser) digits() bool {
	start := p.i
	for p.i < len(p.b) && '0' <= p.b[p.i] && p.b[p.i] <= '9' {
		p.i++
	}
	return p.i > start
}

// string reads a string literal; p.b[p.i] is its opening quote. A string
// of plain ASCII without escapes is one copy of its bytes.
func (p *jsonParser) string() (string, error) {
	p.i++
	start := p.i
	for p.i < len(p.b) {
		for p.i+8 <= len(p.b) && plainWord(load64(p.b, p.i)) {
			p.i += 8 // no quote, backslash, control or non-ASCII byte
		}
		if p.i >= len(p.b) {
			break
		}
		c := p.b[p.i]
		switch {
		case c == '"':
			s := string(p.b[start:p.i])
			p.i++
			return s, nil
		case c == '\\' || c >= utf8.RuneSelf:
			return p.slowString(start)
		case c < ' ':
			return "", p.fail("in string literal")
		}
		p.i++
	}
	return "", p.fail("")
}

// slowString finishes a string that has escapes or non-ASCII bytes, from
// its first byte at start; p.i is at the first such byte.
func (p *jsonParser) slowString(start int) (string, error) {
	out := make([]byte, 0, p.i-start+16)
	out = append(out, p.b[start:p.i]...)
	for p.i < len(p.b) {
		c := p.b[p.i]
		switch {
		case c == '"':
			p.i++
			return string(out), nil
		case c == '\\':
			p.i++
			if p.i >= len(p.b) {
				return "", p.fail("")
			}
			switch e := p.b[p.i]; e {
			case '"', '\\', '/':
				out = append(out, e)
			case 'b':
				out = append(out, '\b')
			case 'f':
				out = append(out, '\f')
			case 'n':
				out = append(out, '\n')
			case 'r':
				out = append(out, '\r')
			case 't':
				out = append(out, '\t')
			case 'u':
				r, err := p.hex4()
				if err != nil {
					return "", err
				}
				if utf16.IsSurrogate(r) {
					r = p.pair(r)
				}
				out = utf8.AppendRune(out, r)
			default:
				return "", p.fail("in string escape code")
			}
			p.i++
		case c < ' ':
			return "", p.fail("in string literal")
		case c < utf8.RuneSelf:
			out = append(out, c)
			p.i++
		default:
			r, size := utf8.DecodeRune(p.b[p.i:])
			out = utf8.AppendRune(out, r) // an invalid byte is U+FFFD
			p.i += size
		}
	}
	return "", p.fail("")
}

// pair completes the surrogate escape just read (p.i at its last digit)
// with the \u escape right after it, as encoding/json does: the pair's
// rune, both escapes read; or U+FFFD, and what follows is read on its own.
func (p *jsonParser) pair(hi rune) rune {
	if p.i+6 >= len(p.b) || p.b[p.i+1] != '\\' || p.b[p.i+2] != 'u' {
		return utf8.RuneError
	}
	save := p.i
	p.i += 2
	if lo, err := p.hex4(); err == nil {
		if r := utf16.DecodeRune(hi, lo); r != utf8.RuneError {
			return r
		}
	}
	p.i = save
	return utf8.RuneError
}

// hex4 reads the four hexadecimal digits after "\u"; p.i is at the 'u'
// and ends at the last digit.
func (p *jsonParser) hex4() (rune, error) {
	var r rune
	for k := 0; k < 4; k++ {
		p.i++
		if p.i >= len(p.b) {
			return 0, p.fail("")
		}
		c := p.b[p.i]
		switch {
		case '0' <= c && c <= '9':
			c -= '0'
		case 'a' <= c && c <= 'f':
			c = c - 'a' + 10
		case 'A' <= c && c <= 'F':
			c = c - 'A' + 10
		default:
			return 0, p.fail("in \\u hexadecimal character escape")
		}
		r = r<<4 | rune(c)
	}
	return r, nil
}
