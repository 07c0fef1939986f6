package builder

import "encoding/json"

// splitLine cuts a JSON Lines record into its key parts' raw values and
// the document body (the object without them) without decoding anything,
// so the body is decoded once, by the PUT path's parser. ok is false
// for whatever it does not handle simply (an escaped member name, a
// repeated key member, malformed text); fromJSON then takes the slow path,
// which reports such input precisely.
func (t *Target) splitLine(line []byte) (parts [][]byte, body []byte, ok bool) {
	parts = make([][]byte, len(t.keyIdx))
	body = make([]byte, 0, len(line))
	body = append(body, '{')
	i := skipSpace(line, 0)
	if i >= len(line) || line[i] != '{' {
		return nil, nil, false
	}
	i = skipSpace(line, i+1)
	if i < len(line) && line[i] == '}' {
		i++
	} else {
		for {
			if i >= len(line) || line[i] != '"' {
				return nil, nil, false
			}
			start := i
			end := start + 1
			for end < len(line) && line[end] != '"' {
				if line[end] == '\\' || line[end] < 0x20 {
					return nil, nil, false
				}
				end++
			}
			if end >= len(line) {
				return nil, nil, false
			}
			name := line[start+1 : end]
			i = skipSpace(line, end+1)
			if i >= len(line) || line[i] != ':' {
				return nil, nil, false
			}
			vstart := skipSpace(line, i+1)
			vend, ok := skipValue(line, vstart)
			if !ok {
				return nil, nil, false
			}
			if k, isKey := t.keyIdx[string(name)]; isKey {
				if parts[k] != nil {
					return nil, nil, false
				}
				parts[k] = line[vstart:vend]
			} else {
				if len(body) > 1 {
					body = append(body, ',')
				}
				body = append(body, line[start:vend]...)
			}
			i = skipSpace(line, vend)
			if i < len(line) && line[i] == ',' {
				i = skipSpace(line, i+1)
				continue
			}
			if i < len(line) && line[i] == '}' {
				i++
				break
			}
			return nil, nil, false
		}
	}
	if skipSpace(line, i) != len(line) {
		return nil, nil, false
	}
	return parts, append(body, '}'), true
}

func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\r' || b[i] == '\n') {
		i++
	}
	return i
}

// skipValue returns the end of the JSON value starting at i, matching
// brackets and strings only; the value's own syntax is checked by
// whoever decodes it.
func skipValue(b []byte, i int) (int, bool) {
	depth := 0
	for i < len(b) {
		switch c := b[i]; c {
		case '"':
			i++
			for i < len(b) && b[i] != '"' {
				if b[i] == '\\' {
					i++
				}
				i++
			}
			if i >= len(b) {
				return 0, false
			}
			i++
		case '{', '[':
			depth++
			i++
		case '}', ']':
			if depth == 0 {
				return i, i > 0
			}
			depth--
			i++
		case ',', ' ', '\t', '\r', '\n':
			if depth == 0 {
				return i, true
			}
			i++
		default:
			i++
		}
		if depth == 0 && i > 0 && (b[i-1] == '"' || b[i-1] == '}' || b[i-1] == ']') {
			return i, true
		}
	}
	return i, depth == 0
}

// simpleKeyValue decodes a key part's raw JSON when it is a string
// without escapes or a plain integer; ok is false otherwise.
func simpleKeyValue(raw []byte) (any, bool) {
	if len(raw) >= 2 && raw[0] == '"' && raw[len(raw)-1] == '"' {
		s := raw[1 : len(raw)-1]
		for _, c := range s {
			if c == '\\' || c == '"' || c < 0x20 {
				return nil, false
			}
		}
		return string(s), true
	}
	digits := raw
	if len(digits) > 0 && digits[0] == '-' {
		digits = digits[1:]
	}
	if len(digits) == 0 || (digits[0] == '0' && len(digits) > 1) {
		return nil, false
	}
	for _, c := range digits {
		if c < '0' || c > '9' {
			return nil, false
		}
	}
	return json.Number(raw), true
}
