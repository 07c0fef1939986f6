package main

import (
	"encoding/binary"
	"fmt"
)

// parsePage splits a query answer, {"documents":[{"key":[...],"document":
// {...}},...],"next":"..."}, into each document's key parts and document,
// as slices of b. It validates the whole answer as JSON in one pass, as
// strictly as encoding/json does, but does not build values: the client
// takes each document as bytes, as pgx hands over a jsonb column and Bleve
// a stored field. (encoding/json scanned the 27 KiB page of 20 messages
// three times, validating, decoding and copying each document: a third of
// the benchmark process's CPU per query.)
func parsePage(b []byte) (keys [][][]byte, docs [][]byte, err error) {
	p := &jsonScanner{b: b}
	p.ws()
	if !p.lit('{') {
		return nil, nil, p.fail("an object")
	}
	first := true
	for {
		p.ws()
		if p.lit('}') {
			break
		}
		if !first && !p.lit(',') {
			return nil, nil, p.fail("',' or '}'")
		}
		first = false
		p.ws()
		name, ok := p.str()
		if !ok {
			return nil, nil, p.fail("a member name")
		}
		p.ws()
		if !p.lit(':') {
			return nil, nil, p.fail("':'")
		}
		p.ws()
		if string(name) != `"documents"` {
			if _, ok := p.value(); !ok {
				return nil, nil, p.fail("a value")
			}
			continue
		}
		if !p.lit('[') {
			return nil, nil, p.fail("the documents array")
		}
		for i := 0; ; i++ {
			p.ws()
			if p.lit(']') {
				break
			}
			if i > 0 {
				if !p.lit(',') {
					return nil, nil, p.fail("',' or ']'")
				}
				p.ws()
			}
			key, doc, ok := p.item()
			if !ok {
				return nil, nil, p.fail("a document item")
			}
			keys, docs = append(keys, key), append(docs, doc)
		}
	}
	p.ws()
	if p.i != len(p.b) {
		return nil, nil, p.fail("the end of the answer")
	}
	return keys, docs, nil
}

// jsonScanner reads JSON from b at i.
type jsonScanner struct {
	b []byte
	i int
}

func (p *jsonScanner) fail(want string) error {
	return fmt.Errorf("query answer: want %s at offset %d", want, p.i)
}

func (p *jsonScanner) ws() {
	for p.i < len(p.b) {
		switch p.b[p.i] {
		case ' ', '\t', '\n', '\r':
			p.i++
		default:
			return
		}
	}
}

func (p *jsonScanner) lit(c byte) bool {
	if p.i < len(p.b) && p.b[p.i] == c {
		p.i++
		return true
	}
	return false
}

// item reads {"key":[...],"document":value} in any member order.
func (p *jsonScanner) item() (key [][]byte, doc []byte, ok bool) {
	if !p.lit('{') {
		return nil, nil, false
	}
	for n := 0; ; n++ {
		p.ws()
		if p.lit('}') {
			return key, doc, doc != nil
		}
		if n > 0 {
			if !p.lit(',') {
				return nil, nil, false
			}
			p.ws()
		}
		name, ok := p.str()
		p.ws()
		if !ok || !p.lit(':') {
			return nil, nil, false
		}
		p.ws()
		switch string(name) {
		case `"key"`:
			if !p.lit('[') {
				return nil, nil, false
			}
			for j := 0; ; j++ {
				p.ws()
				if p.lit(']') {
					break
				}
				if j > 0 {
					if !p.lit(',') {
						return nil, nil, false
					}
					p.ws()
				}
				v, ok := p.value()
				if !ok {
					return nil, nil, false
				}
				key = append(key, v)
			}
		case `"document"`:
			if doc, ok = p.value(); !ok {
				return nil, nil, false
			}
		default:
			if _, ok := p.value(); !ok {
				return nil, nil, false
			}
		}
	}
}

// value reads one JSON value and returns its bytes.
func (p *jsonScanner) value() ([]byte, bool) {
	start := p.i
	if !p.skipValue(0) {
		return nil, false
	}
	return p.b[start:p.i:p.i], true
}

func (p *jsonScanner) skipValue(depth int) bool {
	if p.i >= len(p.b) || depth > 1000 {
		return false
	}
	switch c := p.b[p.i]; {
	case c == '"':
		_, ok := p.str()
		return ok
	case c == '{':
		p.i++
		for n := 0; ; n++ {
			p.ws()
			if p.lit('}') {
				return true
			}
			if n > 0 {
				if !p.lit(',') {
					return false
				}
				p.ws()
			}
			if _, ok := p.str(); !ok {
				return false
			}
			p.ws()
			if !p.lit(':') {
				return false
			}
			p.ws()
			if !p.skipValue(depth + 1) {
				return false
			}
		}
	case c == '[':
		p.i++
		for n := 0; ; n++ {
			p.ws()
			if p.lit(']') {
				return true
			}
			if n > 0 {
				if !p.lit(',') {
					return false
				}
				p.ws()
			}
			if !p.skipValue(depth + 1) {
				return false
			}
		}
	case c == 't':
		return p.word("true")
	case c == 'f':
		return p.word("false")
	case c == 'n':
		return p.word("null")
	default:
		return p.number()
	}
}

func (p *jsonScanner) word(w string) bool {
	if len(p.b)-p.i >= len(w) && string(p.b[p.i:p.i+len(w)]) == w {
		p.i += len(w)
		return true
	}
	return false
}

// str reads a string, quotes included, checking its escapes and that it
// holds no control character.
func (p *jsonScanner) str() ([]byte, bool) {
	start := p.i
	if !p.lit('"') {
		return nil, false
	}
	for p.i < len(p.b) {
		// Most bytes of a page are plain string bytes: skip them eight
		// at a time while a word holds none of '"', '\\' and the control
		// characters, then one at a time.
		i := p.i
		for i+8 <= len(p.b) && !special(binary.LittleEndian.Uint64(p.b[i:])) {
			i += 8
		}
		for i < len(p.b) && plain[p.b[i]] {
			i++
		}
		if p.i = i; i == len(p.b) {
			break
		}
		c := p.b[i]
		switch {
		case c == '"':
			p.i++
			return p.b[start:p.i], true
		case c == '\\':
			if p.i+1 >= len(p.b) {
				return nil, false
			}
			switch p.b[p.i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				p.i += 2
			case 'u':
				if p.i+6 > len(p.b) {
					return nil, false
				}
				for _, h := range p.b[p.i+2 : p.i+6] {
					if !('0' <= h && h <= '9' || 'a' <= h && h <= 'f' || 'A' <= h && h <= 'F') {
						return nil, false
					}
				}
				p.i += 6
			default:
				return nil, false
			}
		default: // a control character
			return nil, false
		}
	}
	return nil, false
}

// special reports whether one of the eight bytes of w is '"', '\\' or a
// control character (below 0x20): the classic tests for a zero byte and a
// byte below n (Hacker's Delight 6-1), which never miss one; a byte of
// 0x80 or more is never reported.
func special(w uint64) bool {
	const ones, highs = 0x0101010101010101, 0x8080808080808080
	zero := func(x uint64) uint64 { return (x - ones) & ^x & highs }
	return (zero(w^('"'*ones)) | zero(w^('\\'*ones)) | (w-0x20*ones)&^w&highs) != 0
}

// plain marks the bytes a JSON string holds as they are.
var plain = func() (t [256]bool) {
	for c := 0x20; c < 256; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()

// number reads -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
func (p *jsonScanner) number() bool {
	p.lit('-')
	digits := func() int {
		n := 0
		for p.i < len(p.b) && '0' <= p.b[p.i] && p.b[p.i] <= '9' {
			p.i++
			n++
		}
		return n
	}
	if p.lit('0') {
		// no leading zeros
	} else if digits() == 0 {
		return false
	}
	if p.lit('.') && digits() == 0 {
		return false
	}
	if p.i < len(p.b) && (p.b[p.i] == 'e' || p.b[p.i] == 'E') {
		p.i++
		if !p.lit('+') {
			p.lit('-')
		}
		if digits() == 0 {
			return false
		}
	}
	return true
}
