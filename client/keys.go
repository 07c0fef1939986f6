package client

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"
)

// Key is a document's key parts in order, or the leading parts naming a
// collection. Parts are strings or integers; the server parses each one by
// its table's key type, so "7" and 7 address the same long key part.
type Key []any

// UnmarshalJSON reads a key array, keeping integers exact as int64.
func (k *Key) UnmarshalJSON(b []byte) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var raw []any
	if err := dec.Decode(&raw); err != nil {
		return err
	}
	out := make(Key, len(raw))
	for i, v := range raw {
		out[i] = normalizePart(v)
	}
	*k = out
	return nil
}

// normalizePart turns a JSON number or Go integer into int64 and leaves
// other values alone.
func normalizePart(v any) any {
	switch v := v.(type) {
	case json.Number:
		if n, err := v.Int64(); err == nil {
			return n
		}
		return v.String()
	case int:
		return int64(v)
	case int32:
		return int64(v)
	case int16:
		return int64(v)
	case int8:
		return int64(v)
	case uint32:
		return int64(v)
	case uint16:
		return int64(v)
	case uint8:
		return int64(v)
	}
	return v
}

// escapePart renders one key part as a URL path segment. Beyond
// url.PathEscape it escapes ',' and parentheses (so no part reads as a
// multi-get list) and the dot segments "." and "..".
func escapePart(v any) (string, error) {
	var s string
	switch v := v.(type) {
	case string:
		if v == "" {
			return "", fmt.Errorf("client: an empty string is not a key part")
		}
		s = v
	case json.Number:
		s = v.String()
	case int:
		s = strconv.Itoa(v)
	case int64:
		s = strconv.FormatInt(v, 10)
	case int32:
		s = strconv.FormatInt(int64(v), 10)
	case int16, int8, uint8, uint16, uint32, uint64, uint:
		s = fmt.Sprint(v)
	default:
		return "", fmt.Errorf("client: key part %v has type %T; want a string or an integer", v, v)
	}
	e := url.PathEscape(s)
	e = strings.NewReplacer(",", "%2C", "(", "%28", ")", "%29").Replace(e)
	if e == "." || e == ".." {
		e = strings.ReplaceAll(e, ".", "%2E")
	}
	return e, nil
}

// documentPath is "/db/table/k1/…/kn", every segment escaped.
func documentPath(db, table string, key Key) (string, error) {
	if len(key) == 0 {
		return "", fmt.Errorf("client: a key needs at least one part")
	}
	var b strings.Builder
	b.WriteString("/" + url.PathEscape(db) + "/" + url.PathEscape(table))
	for _, p := range key {
		s, err := escapePart(p)
		if err != nil {
			return "", err
		}
		b.WriteString("/" + s)
	}
	return b.String(), nil
}

func queryEscape(s string) string {
	// Keep ',' and '.' readable in fields=a,b.c; QueryEscape would encode ','.
	return strings.ReplaceAll(url.QueryEscape(s), "%2C", ",")
}

func sortedKeys(m map[string]string) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}
