package datastream

import (
	"encoding/json"
	"fmt"
	"strconv"

	"github.com/doppio-db/doppio/internal/buildinfo"
	"github.com/doppio-db/doppio/internal/changes"
	"github.com/doppio-db/doppio/internal/keys"
	"github.com/doppio-db/doppio/internal/partition"
	"github.com/doppio-db/doppio/internal/schema"
)

// DebeziumConnector is the source.connector of every Debezium envelope.
const DebeziumConnector = "doppio"

// debezium renders change events as Debezium's envelope, the way Kafka
// Connect's JsonConverter writes it: {"schema":…,"payload":…} with
// schemas, the payload alone without. One per Records call: it caches
// each table's Connect schemas for the batch.
type debezium struct {
	def     *Definition
	now     int64 // the envelope's ts_ms: when the stream processed the batch
	schemas bool
	version string
	cache   map[*schema.Table]*debeziumSchemas
}

// debeziumSchemas are a table's key and envelope schemas as JSON.
type debeziumSchemas struct {
	key, envelope []byte
}

func newDebezium(def *Definition, now int64) *debezium {
	return &debezium{def: def, now: now, schemas: def.Sink.schemasOn(), version: buildinfo.Get().Version,
		cache: map[*schema.Table]*debeziumSchemas{}}
}

// txnOrder is an event's place in its transaction: total (1-based among
// the events the stream carries) and within its table.
type txnOrder struct {
	total, table int
}

// record returns the key and value of ev, a write of table t.
func (d *debezium) record(ev *changes.Event, t *schema.Table, order txnOrder) (key, value []byte, err error) {
	var sc *debeziumSchemas
	if d.schemas {
		if sc, err = d.tableSchemas(t); err != nil {
			return nil, nil, err
		}
	}
	payload, err := debeziumKey(nil, ev.Key, t)
	if err != nil {
		return nil, nil, err
	}
	key = wrapSchema(sc, true, payload)
	v := make([]byte, 0, 256+len(ev.Before)+len(ev.After))
	v = append(v, `{"before":`...)
	if v, err = appendImage(v, t, ev.Before, ev.BeforeVersion); err != nil {
		return nil, nil, err
	}
	v = append(v, `,"after":`...)
	if v, err = appendImage(v, t, ev.After, ev.AfterVersion); err != nil {
		return nil, nil, err
	}
	v = append(v, `,"source":{"version":`...)
	v = strconv.AppendQuote(v, d.version)
	v = append(v, `,"connector":"`+DebeziumConnector+`","name":`...)
	v = strconv.AppendQuote(v, d.def.Name)
	v = append(v, `,"ts_ms":`...)
	v = strconv.AppendInt(v, ev.Mtime, 10)
	v = append(v, `,"snapshot":"`...)
	switch {
	case ev.Snapshot && ev.TxnEnd:
		v = append(v, "last"...)
	case ev.Snapshot:
		v = append(v, "true"...)
	default:
		v = append(v, "false"...)
	}
	v = append(v, `","db":`...)
	v = strconv.AppendQuote(v, d.def.Database)
	v = append(v, `,"table":`...)
	v = strconv.AppendQuote(v, ev.Table)
	v = append(v, `,"partition":`...)
	v = strconv.AppendInt(v, int64(ev.Partition), 10)
	v = append(v, `,"scn":"`...)
	v = append(v, ev.SCN.String()...)
	v = append(v, `"},"op":"`...)
	v = append(v, debeziumOp(ev)...)
	v = append(v, `","ts_ms":`...)
	v = strconv.AppendInt(v, d.now, 10)
	v = append(v, `,"transaction":`...)
	if ev.Snapshot {
		v = append(v, "null"...)
	} else {
		v = append(v, `{"id":"`...)
		v = append(v, DebeziumTxnID(ev.Partition, ev.SCN)...)
		v = append(v, `","total_order":`...)
		v = strconv.AppendInt(v, int64(order.total), 10)
		v = append(v, `,"data_collection_order":`...)
		v = strconv.AppendInt(v, int64(order.table), 10)
		v = append(v, '}')
	}
	v = append(v, '}')
	return key, wrapSchema(sc, false, v), nil
}

// DebeziumTxnID is the transaction.id of the events of partition p's
// transaction at scn: "p:g:s", unique within the database.
func DebeziumTxnID(p int, scn partition.SCN) string {
	return strconv.Itoa(p) + ":" + scn.String()
}

// debeziumOp is Debezium's op code: r for a snapshot read, c, u, d.
func debeziumOp(ev *changes.Event) string {
	switch {
	case ev.Snapshot:
		return "r"
	case ev.Op == partition.OpInsert:
		return "c"
	case ev.Op == partition.OpDelete:
		return "d"
	}
	return "u"
}

// wrapSchema puts payload under its schema as JsonConverter does with
// schemas enabled; without schemas it is the payload itself.
func wrapSchema(sc *debeziumSchemas, key bool, payload []byte) []byte {
	if sc == nil {
		return payload
	}
	s := sc.envelope
	if key {
		s = sc.key
	}
	out := make([]byte, 0, len(s)+len(payload)+24)
	out = append(out, `{"schema":`...)
	out = append(out, s...)
	out = append(out, `,"payload":`...)
	out = append(out, payload...)
	return append(out, '}')
}

// debeziumKey appends the key struct of an encoded document key: an
// object of the table's key parts.
func debeziumKey(dst, encoded []byte, t *schema.Table) ([]byte, error) {
	tuple, err := keys.DecodeTuple(encoded)
	if err != nil {
		return nil, fmt.Errorf("event key: %w", err)
	}
	if len(tuple) != len(t.Def.Key) {
		return nil, fmt.Errorf("event key of %d parts for table %s of %d", len(tuple), t.Def.Name, len(t.Def.Key))
	}
	dst = append(dst, '{')
	for i, part := range t.Def.Key {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = strconv.AppendQuote(dst, part.Name)
		dst = append(dst, ':')
		switch x := tuple[i].(type) {
		case string:
			b, _ := json.Marshal(x)
			dst = append(dst, b...)
		case int64:
			dst = strconv.AppendInt(dst, x, 10)
		default:
			return nil, fmt.Errorf("event key part %s of type %T", part.Name, x)
		}
	}
	return append(dst, '}'), nil
}

// tableSchemas returns t's Connect schemas, built once per batch.
func (d *debezium) tableSchemas(t *schema.Table) (*debeziumSchemas, error) {
	if sc, ok := d.cache[t]; ok {
		return sc, nil
	}
	sc, err := buildDebeziumSchemas(d.def.Database, t)
	if err != nil {
		return nil, err
	}
	d.cache[t] = sc
	return sc, nil
}

// connectSchema is a Kafka Connect schema in JsonConverter's JSON form.
type connectSchema struct {
	Type       string            `json:"type"`
	Items      *connectSchema    `json:"items,omitempty"`
	Keys       *connectSchema    `json:"keys,omitempty"`
	Values     *connectSchema    `json:"values,omitempty"`
	Fields     []connectSchema   `json:"fields,omitempty"`
	Optional   bool              `json:"optional"`
	Name       string            `json:"name,omitempty"`
	Version    int               `json:"version,omitempty"`
	Parameters map[string]string `json:"parameters,omitempty"`
	Default    any               `json:"default,omitempty"`
	Field      string            `json:"field,omitempty"`
}

// buildDebeziumSchemas makes the key and envelope schemas of table t of
// database db, at t's latest version. Schema names are
// doppio.{db}.{table}.Key, .Value and .Envelope.
func buildDebeziumSchemas(db string, t *schema.Table) (*debeziumSchemas, error) {
	base := "doppio." + db + "." + t.Def.Name
	key := connectSchema{Type: "struct", Name: base + ".Key"}
	for _, k := range t.Def.Key {
		typ := "int64"
		switch k.Type {
		case schema.KeyString:
			typ = "string"
		case schema.KeyInt:
			typ = "int32"
		}
		key.Fields = append(key.Fields, connectSchema{Type: typ, Field: k.Name})
	}
	var avro any
	if err := json.Unmarshal(t.Def.Versions[t.Latest()-1].Schema, &avro); err != nil {
		return nil, fmt.Errorf("table %s: schema: %w", t.Def.Name, err)
	}
	c := avroToConnect{named: map[string]any{}, building: map[string]bool{}}
	value, err := c.convert(avro, "")
	if err != nil {
		return nil, fmt.Errorf("table %s: no Kafka Connect schema for it (use \"schemas\": false): %w", t.Def.Name, err)
	}
	value.Name, value.Optional = base+".Value", true
	before, after := value, value
	before.Field, after.Field = "before", "after"
	str := func(name string, optional bool) connectSchema {
		return connectSchema{Type: "string", Field: name, Optional: optional}
	}
	source := connectSchema{Type: "struct", Name: "io.debezium.connector.doppio.Source", Field: "source", Fields: []connectSchema{
		str("version", false), str("connector", false), str("name", false),
		{Type: "int64", Field: "ts_ms"},
		{Type: "string", Optional: true, Name: "io.debezium.data.Enum", Version: 1,
			Parameters: map[string]string{"allowed": "true,last,false"}, Default: "false", Field: "snapshot"},
		str("db", false), str("table", false),
		{Type: "int32", Field: "partition"},
		str("scn", false),
	}}
	txn := connectSchema{Type: "struct", Name: "event.block", Version: 1, Optional: true, Field: "transaction", Fields: []connectSchema{
		str("id", false), {Type: "int64", Field: "total_order"}, {Type: "int64", Field: "data_collection_order"},
	}}
	env := connectSchema{Type: "struct", Name: base + ".Envelope", Version: 1, Fields: []connectSchema{
		before, after, source, str("op", false), {Type: "int64", Optional: true, Field: "ts_ms"}, txn,
	}}
	kb, err := json.Marshal(key)
	if err != nil {
		return nil, err
	}
	eb, err := json.Marshal(env)
	if err != nil {
		return nil, err
	}
	return &debeziumSchemas{key: kb, envelope: eb}, nil
}

// avroToConnect maps an Avro schema (parsed JSON) to the Connect schema
// whose JSON form is how the documents render: unions of null and one
// type are that type, optional; logical types take Connect's names.
type avroToConnect struct {
	named    map[string]any // full name -> definition
	building map[string]bool
}

func (c *avroToConnect) convert(s any, ns string) (connectSchema, error) {
	switch x := s.(type) {
	case string:
		if cs, ok := connectPrimitive(x); ok {
			return cs, nil
		}
		full := fullName(x, ns)
		def, ok := c.named[full]
		if !ok {
			def, ok = c.named[x]
		}
		if !ok {
			return connectSchema{}, fmt.Errorf("unknown type %q", x)
		}
		return c.convert(def, ns)
	case []any:
		var other []any
		nullable := false
		for _, b := range x {
			if b == "null" {
				nullable = true
				continue
			}
			other = append(other, b)
		}
		if len(other) != 1 {
			return connectSchema{}, fmt.Errorf("a union of %d types other than null", len(other))
		}
		cs, err := c.convert(other[0], ns)
		cs.Optional = nullable
		return cs, err
	case map[string]any:
		typ, _ := x["type"].(string)
		name, _ := x["name"].(string)
		if n, ok := x["namespace"].(string); ok && n != "" {
			ns = n
		}
		full := fullName(name, ns)
		switch typ {
		case "record":
			if c.building[full] {
				return connectSchema{}, fmt.Errorf("record %s is recursive", full)
			}
			c.named[full] = x
			c.building[full] = true
			defer delete(c.building, full)
			out := connectSchema{Type: "struct", Name: full}
			fields, _ := x["fields"].([]any)
			for _, f := range fields {
				fm, _ := f.(map[string]any)
				fname, _ := fm["name"].(string)
				fs, err := c.convert(fm["type"], namespaceOf(full))
				if err != nil {
					return connectSchema{}, fmt.Errorf("field %s: %w", fname, err)
				}
				fs.Field = fname
				out.Fields = append(out.Fields, fs)
			}
			return out, nil
		case "enum":
			c.named[full] = x
			return connectSchema{Type: "string", Name: "io.debezium.data.Enum", Version: 1, Parameters: map[string]string{"allowed": joinSymbols(x["symbols"])}}, nil
		case "fixed":
			c.named[full] = x
			return connectSchema{Type: "bytes"}, nil
		case "array":
			items, err := c.convert(x["items"], ns)
			if err != nil {
				return connectSchema{}, err
			}
			return connectSchema{Type: "array", Items: &items}, nil
		case "map":
			values, err := c.convert(x["values"], ns)
			if err != nil {
				return connectSchema{}, err
			}
			return connectSchema{Type: "map", Keys: &connectSchema{Type: "string"}, Values: &values}, nil
		}
		cs, err := c.convert(x["type"], ns)
		if err != nil {
			return cs, err
		}
		logical, _ := x["logicalType"].(string)
		if name, ok := connectLogical[logical]; ok {
			cs.Name, cs.Version = name, 1
		}
		if logical == "decimal" {
			scale := 0
			if f, ok := x["scale"].(float64); ok {
				scale = int(f)
			}
			cs.Parameters = map[string]string{"scale": strconv.Itoa(scale)}
		}
		return cs, nil
	}
	return connectSchema{}, fmt.Errorf("unreadable schema node %v", s)
}

// connectLogical names the Connect (or Debezium) type of an Avro logical
// type; the values render the same either way.
var connectLogical = map[string]string{
	"date":             "org.apache.kafka.connect.data.Date",
	"time-millis":      "org.apache.kafka.connect.data.Time",
	"timestamp-millis": "org.apache.kafka.connect.data.Timestamp",
	"time-micros":      "io.debezium.time.MicroTime",
	"timestamp-micros": "io.debezium.time.MicroTimestamp",
	"uuid":             "io.debezium.data.Uuid",
	"decimal":          "org.apache.kafka.connect.data.Decimal",
}

func connectPrimitive(name string) (connectSchema, bool) {
	typ, ok := map[string]string{"boolean": "boolean", "int": "int32", "long": "int64", "float": "float",
		"double": "float64", "bytes": "bytes", "string": "string"}[name]
	return connectSchema{Type: typ}, ok
}

func fullName(name, ns string) string {
	for i := 0; i < len(name); i++ {
		if name[i] == '.' {
			return name
		}
	}
	if ns == "" {
		return name
	}
	return ns + "." + name
}

func namespaceOf(full string) string {
	for i := len(full) - 1; i >= 0; i-- {
		if full[i] == '.' {
			return full[:i]
		}
	}
	return ""
}

func joinSymbols(v any) string {
	syms, _ := v.([]any)
	out := ""
	for i, s := range syms {
		if i > 0 {
			out += ","
		}
		str, _ := s.(string)
		out += str
	}
	return out
}

// appendImage appends an Avro image as the JSON document it is at t's
// latest version, or null when absent.
func appendImage(dst []byte, t *schema.Table, avro []byte, version uint32) ([]byte, error) {
	if avro == nil {
		return append(dst, "null"...), nil
	}
	return t.AppendAvroAsJSON(dst, avro, int(version), t.Latest())
}
