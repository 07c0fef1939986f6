package export

import (
	"bufio"
	"encoding/json"
	"io"
	"strconv"

	"github.com/doppio-db/doppio/client"
)

// Kind is what an export holds.
type Kind string

const (
	// Snapshot rows are documents as of one SCN per partition.
	Snapshot Kind = "snapshot"
	// Changes rows are document changes between two checkpoints.
	Changes Kind = "changes"
)

// Table is what a Format needs of an exported table.
type Table struct {
	Name string
	// Version is the schema version the documents are rendered at (the
	// table's latest when the export began).
	Version int
	Key     []client.KeyPart
	// Schema is the Avro record schema of the table's documents at Version.
	Schema json.RawMessage
}

// Row is one exported document or change.
type Row struct {
	// Op is insert, update or delete (Changes only).
	Op string
	// SCN is the commit's "generation:sequence" (Changes only).
	SCN string
	// Mtime is the commit time, Unix milliseconds (Changes only).
	Mtime int64
	// Key holds the key parts in the table's key order: string or int64.
	Key []any
	// Doc is the document's JSON object (the after-image for changes;
	// nil on delete).
	Doc json.RawMessage
}

// Format writes rows of one table and partition to a file.
type Format interface {
	// Name is the format's name and the files' extension ("jsonl").
	Name() string
	// NewFile starts a file of t's rows on w; Close finishes it (w stays
	// open).
	NewFile(w io.Writer, t Table, kind Kind) (FileWriter, error)
}

// FileWriter writes one file's rows.
type FileWriter interface {
	Write(Row) error
	Close() error
}

// JSONLines is the JSON Lines format: one JSON object per row, the key
// parts by name first, then (for changes) _op, _scn and _mtime, then the
// document's fields as the REST API renders them.
var JSONLines Format = jsonLines{}

type jsonLines struct{}

func (jsonLines) Name() string { return "jsonl" }

func (jsonLines) NewFile(w io.Writer, t Table, kind Kind) (FileWriter, error) {
	return &jsonlFile{bw: bufio.NewWriterSize(w, 64<<10), t: t, kind: kind}, nil
}

type jsonlFile struct {
	bw   *bufio.Writer
	t    Table
	kind Kind
	buf  []byte
}

func (f *jsonlFile) Write(r Row) error {
	b := append(f.buf[:0], '{')
	for i, kp := range f.t.Key {
		if i > 0 {
			b = append(b, ',')
		}
		b = strconv.AppendQuote(b, kp.Name)
		b = append(b, ':')
		switch v := r.Key[i].(type) {
		case int64:
			b = strconv.AppendInt(b, v, 10)
		default:
			kb, err := json.Marshal(v)
			if err != nil {
				return err
			}
			b = append(b, kb...)
		}
	}
	if f.kind == Changes {
		b = append(b, `,"_op":`...)
		b = strconv.AppendQuote(b, r.Op)
		b = append(b, `,"_scn":`...)
		b = strconv.AppendQuote(b, r.SCN)
		b = append(b, `,"_mtime":`...)
		b = strconv.AppendInt(b, r.Mtime, 10)
	}
	// The document is an object rendered by the server: splice its
	// members in after the key.
	if doc := trimObject(r.Doc); len(doc) > 0 {
		b = append(b, ',')
		b = append(b, doc...)
	}
	b = append(b, '}', '\n')
	f.buf = b
	_, err := f.bw.Write(b)
	return err
}

func (f *jsonlFile) Close() error { return f.bw.Flush() }

// trimObject returns the members of a JSON object, without its braces.
func trimObject(doc json.RawMessage) []byte {
	s, e := 0, len(doc)
	for s < e && doc[s] != '{' {
		s++
	}
	for e > s && doc[e-1] != '}' {
		e--
	}
	if e-s < 2 {
		return nil
	}
	inner := doc[s+1 : e-1]
	for len(inner) > 0 && (inner[0] == ' ' || inner[0] == '\n' || inner[0] == '\t' || inner[0] == '\r') {
		inner = inner[1:]
	}
	return inner
}
