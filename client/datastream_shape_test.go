package client_test

import (
	"encoding"
	"encoding/json"
	"maps"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/doppio-db/doppio/client"
	"github.com/doppio-db/doppio/internal/datastream"
)

var (
	jsonMarshaler = reflect.TypeFor[json.Marshaler]()
	textMarshaler = reflect.TypeFor[encoding.TextMarshaler]()
)

// jsonShape flattens t's JSON form into path -> JSON type, ",omitempty"
// appended where the field has it: what a peer decoding it relies on.
func jsonShape(t reflect.Type, path string, out map[string]string) {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t.Implements(jsonMarshaler) || t.Implements(textMarshaler) {
		out[path] += "string" // time.Time and datastream.Duration
		return
	}
	switch t.Kind() {
	case reflect.Struct:
		out[path] += "object"
		for f := range fieldsOf(t) {
			name, opts, _ := strings.Cut(f.Tag.Get("json"), ",")
			if name == "-" {
				continue
			}
			if name == "" {
				name = f.Name
			}
			p := path + "." + name
			if strings.Contains(opts, "omitempty") {
				out[p] = "omitempty "
			}
			jsonShape(f.Type, p, out)
		}
	case reflect.Slice, reflect.Array:
		out[path] += "array"
		jsonShape(t.Elem(), path+"[]", out)
	case reflect.String:
		out[path] += "string"
	case reflect.Bool:
		out[path] += "bool"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64,
		reflect.Float32, reflect.Float64:
		out[path] += "number"
	default:
		out[path] += t.Kind().String()
	}
}

// fieldsOf yields t's exported fields, those of embedded structs promoted.
func fieldsOf(t reflect.Type) func(func(reflect.StructField) bool) {
	return func(yield func(reflect.StructField) bool) {
		for f := range t.Fields() {
			if f.Anonymous && f.Tag.Get("json") == "" && f.Type.Kind() == reflect.Struct {
				for g := range fieldsOf(f.Type) {
					if !yield(g) {
						return
					}
				}
				continue
			}
			if f.IsExported() && !yield(f) {
				return
			}
		}
	}
}

func shapeOf(v any) map[string]string {
	out := map[string]string{}
	jsonShape(reflect.TypeOf(v), "", out)
	return out
}

// The server renders a datastream as datastream.View and the client
// decodes it into client.Datastream: a field either gains is a field the
// other drops. The sink's and auto-pause's zero values are omitted by the
// client, whose types double as the request (zero: the server's default).
func TestDatastreamWireTypesAgree(t *testing.T) {
	server, cl := shapeOf(datastream.View{}), shapeOf(client.Datastream{})
	clientOnlyOmitempty := []string{".sink.topics", ".sink.topicPrefix", ".sink.format", ".autoPause.failures", ".autoPause.resumeAfter"}
	for _, p := range clientOnlyOmitempty {
		if server[p] != strings.TrimPrefix(cl[p], "omitempty ") {
			t.Errorf("%s: server %q, client %q; only the client's omitempty may differ", p, server[p], cl[p])
		}
		cl[p] = server[p]
	}
	for _, p := range slices.Sorted(maps.Keys(server)) {
		if cl[p] != server[p] {
			t.Errorf("%s: server renders %q, client.Datastream has %q", p, server[p], cl[p])
		}
	}
	for _, p := range slices.Sorted(maps.Keys(cl)) {
		if _, ok := server[p]; !ok {
			t.Errorf("%s: client.Datastream has %q, the server renders no such field", p, cl[p])
		}
	}
}

// A client.DatastreamSpec is the definition the server parses, less the
// name (it is in the URL); every field is optional in the request.
func TestDatastreamSpecNamesTheDefinitionsFields(t *testing.T) {
	def, spec := shapeOf(datastream.Definition{}), shapeOf(client.DatastreamSpec{})
	delete(def, ".name")
	strip := func(m map[string]string) map[string]string {
		out := map[string]string{}
		for k, v := range m {
			out[k] = strings.TrimPrefix(v, "omitempty ")
		}
		return out
	}
	if d, s := strip(def), strip(spec); !maps.Equal(d, s) {
		t.Errorf("datastream.Definition (less name) %v\nclient.DatastreamSpec %v", d, s)
	}
}
