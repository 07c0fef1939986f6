package builder

import (
	"bytes"
	"encoding/json"
	"strconv"

	"github.com/doppio-db/doppio/internal/keys"
	"github.com/doppio-db/doppio/internal/schema"
	"github.com/hamba/avro/v2"
)

// fromCells validates one CSV record: key cells are parsed as a URI key
// segment is, by the key part's type; other cells are converted to the
// field's type (cellValue) and the document normalized as a PUT body.
func (t *Target) fromCells(header, cells []string) (keys.Tuple, schema.Document, error) {
	segs := make([]string, len(t.table.Def.Key))
	doc := make(map[string]any, len(cells))
	for i, name := range header {
		if k, ok := t.keyIdx[name]; ok {
			segs[k] = cells[i]
			continue
		}
		f, ok := t.fields[name]
		if !ok {
			doc[name] = cells[i] // unknown: Normalize names it
			continue
		}
		v, present, err := cellValue(f, cells[i])
		if err != nil {
			return nil, nil, reject("field %q: %v", name, err)
		}
		if present {
			doc[name] = v
		}
	}
	key, err := t.table.ParseKeySegments(segs)
	if err != nil {
		return nil, nil, rejection(err.Error())
	}
	d, err := t.table.Normalize(doc)
	if err != nil {
		return nil, nil, rejection(err.Error())
	}
	return key, d, nil
}

// cellValue converts a CSV cell to the JSON form of a value of type s.
// An empty cell is null where s admits null, the empty string for a
// string, and otherwise absent (so the field's default applies).
func cellValue(s avro.Schema, cell string) (any, bool, error) {
	if u, ok := s.(*avro.UnionSchema); ok {
		var other []avro.Schema
		for _, b := range u.Types() {
			if b.Type() != avro.Null {
				other = append(other, b)
			}
		}
		switch {
		case cell == "" && len(other) < len(u.Types()):
			return nil, true, nil
		case len(other) == 1:
			return cellValue(other[0], cell)
		}
		// Several branches: a cell holding JSON is that value, else a string.
		if v, err := decodeJSONCell(cell); err == nil {
			return v, true, nil
		}
		return cell, true, nil
	}
	switch s.Type() {
	case avro.String, avro.Enum, avro.Bytes, avro.Fixed:
		if cell == "" && s.Type() != avro.String {
			return nil, false, nil
		}
		return cell, true, nil
	case avro.Null:
		if cell != "" {
			return nil, false, errNotA(cell, "null (an empty cell)")
		}
		return nil, true, nil
	case avro.Boolean:
		switch cell {
		case "":
			return nil, false, nil
		case "true":
			return true, true, nil
		case "false":
			return false, true, nil
		}
		return nil, false, errNotA(cell, "boolean (true or false)")
	case avro.Int, avro.Long:
		if cell == "" {
			return nil, false, nil
		}
		if _, err := strconv.ParseInt(cell, 10, 64); err != nil && !isRange(err) {
			return nil, false, errNotA(cell, "decimal integer")
		}
		return json.Number(cell), true, nil
	case avro.Float, avro.Double:
		if cell == "" {
			return nil, false, nil
		}
		if _, err := strconv.ParseFloat(cell, 64); err != nil && !isRange(err) {
			return nil, false, errNotA(cell, "number")
		}
		return json.Number(cell), true, nil
	}
	// Arrays, maps and records are written as JSON in their cell.
	if cell == "" {
		return nil, false, nil
	}
	v, err := decodeJSONCell(cell)
	if err != nil {
		return nil, false, errNotA(cell, "JSON value")
	}
	return v, true, nil
}

func decodeJSONCell(cell string) (any, error) {
	dec := json.NewDecoder(bytes.NewReader([]byte(cell)))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	if dec.More() {
		return nil, strconv.ErrSyntax
	}
	return v, nil
}

func isRange(err error) bool {
	ne, ok := err.(*strconv.NumError)
	return ok && ne.Err == strconv.ErrRange
}

func errNotA(cell, what string) error {
	return rejection(strconv.Quote(cell) + " is not a " + what)
}
