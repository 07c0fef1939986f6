package changes

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/doppio-db/doppio/client"
)

// Event is one document's change in a committed transaction, or one
// document of a bootstrap snapshot.
type Event struct {
	SCN       string          `json:"scn"` // "generation:sequence" of the transaction
	Partition int             `json:"partition"`
	Table     string          `json:"table"`
	Key       []any           `json:"key"`
	Op        string          `json:"op"` // insert, update, delete, drop or replace
	Before    json.RawMessage `json:"before"`
	After     json.RawMessage `json:"after"`
	TxnEnd    bool            `json:"txnEnd"`
	Snapshot  bool            `json:"snapshot,omitempty"`
	Timestamp int64           `json:"ts"` // commit time, Unix milliseconds
	// Checkpoint resumes the stream right after this event (empty on
	// snapshot events: an interrupted bootstrap starts again).
	Checkpoint string `json:"checkpoint,omitempty"`
}

// The operations an Event's Op names besides insert, update and delete:
// both are a table's in one partition, with no key and no images.
const (
	// OpDrop: the table's documents in the partition are gone.
	OpDrop = "drop"
	// OpReplace: a bulk load in replace mode swapped the table's
	// documents in the partition at this SCN; the loaded documents are
	// no events. Drop what the consumer holds of the table in the
	// partition and read its documents again (Reread).
	OpReplace = "replace"
)

// Reread reads the documents of the table an OpReplace event e names, in
// e's partition of db, as a bootstrap snapshot, and calls fn with each
// (op insert, Snapshot set). The snapshot is at or after e's SCN: events
// of the table that follow e in the consumer's stream may already be in
// it, and since each carries the whole after-image, applying them again
// leaves the same documents.
func Reread(ctx context.Context, c *client.Client, db string, e *Event, fn func(*Event) error) error {
	if e.Op != OpReplace {
		return fmt.Errorf("changes: Reread takes a %q event, not %q", OpReplace, e.Op)
	}
	s, err := Open(ctx, c, db, Options{Tables: []string{e.Table}, Partitions: []int{e.Partition}, Bootstrap: true})
	if err != nil {
		return err
	}
	defer s.Close()
	for {
		l, err := s.Next()
		if err != nil {
			return err
		}
		if l.Event == nil || !l.Event.Snapshot {
			return nil // the snapshot's checkpoint, or the log after it
		}
		if err := fn(l.Event); err != nil {
			return err
		}
	}
}

// Time is the event's commit time.
func (e *Event) Time() time.Time { return time.UnixMilli(e.Timestamp) }

// Line is one line of a stream: an event, or (Event nil) a checkpoint.
type Line struct {
	Event      *Event
	Checkpoint string
	Raw        []byte // the line as received, without its newline
}

// Options select what a stream carries and where it starts.
type Options struct {
	Tables     []string // default: every table
	Partitions []int    // default: every partition
	// From is a checkpoint to resume after; empty starts at the newest
	// commit (or with a snapshot, when Bootstrap is set).
	From      string
	Bootstrap bool
}

// ErrBootstrapRequired is returned (wrapped in a *client.Error with status
// 410) when a checkpoint is older than the change log retains: the
// consumer must start again with a bootstrap.
var ErrBootstrapRequired = errors.New("changes: checkpoint no longer retained; bootstrap required")

// IsBootstrapRequired reports whether err means the checkpoint fell out of
// the retained log.
func IsBootstrapRequired(err error) bool {
	var ce *client.Error
	return errors.Is(err, ErrBootstrapRequired) || errors.As(err, &ce) && ce.Status == http.StatusGone
}

// Stream is one open change stream.
type Stream struct {
	body    io.ReadCloser
	br      *bufio.Reader
	sources string
}

// Open starts streaming db's changes from c's server, through c's
// transport, TLS, credentials and retries; the stream lasts as long as it
// is read, whatever c's WithTimeout.
func Open(ctx context.Context, c *client.Client, db string, o Options) (*Stream, error) {
	q := url.Values{}
	if len(o.Tables) > 0 {
		q.Set("tables", strings.Join(o.Tables, ","))
	}
	if len(o.Partitions) > 0 {
		ps := make([]string, len(o.Partitions))
		for i, p := range o.Partitions {
			ps[i] = strconv.Itoa(p)
		}
		q.Set("partitions", strings.Join(ps, ","))
	}
	if o.From != "" {
		q.Set("from", o.From)
	}
	if o.Bootstrap {
		q.Set("bootstrap", "true")
	}
	a, err := c.Stream(ctx, "/_changes/"+url.PathEscape(db), q, "application/x-ndjson")
	if err != nil {
		return nil, err
	}
	return &Stream{body: a.Body, br: bufio.NewReaderSize(a.Body, 256<<10), sources: a.Header.Get("X-Doppio-Change-Sources")}, nil
}

// Next returns the next line. A stream that the server ends with an error
// line returns that error (a *client.Error); IsBootstrapRequired tells a
// trimmed checkpoint.
func (s *Stream) Next() (Line, error) {
	raw, err := s.br.ReadBytes('\n')
	if err != nil {
		if err == io.EOF && len(raw) > 0 {
			err = io.ErrUnexpectedEOF
		}
		return Line{}, err
	}
	raw = raw[:len(raw)-1]
	var line struct {
		Event
		Error *client.Error `json:"error"`
	}
	if err := json.Unmarshal(raw, &line); err != nil {
		return Line{}, fmt.Errorf("changes: bad line %q: %w", raw, err)
	}
	if line.Error != nil {
		return Line{}, line.Error
	}
	l := Line{Checkpoint: line.Checkpoint, Raw: raw}
	if line.SCN != "" {
		ev := line.Event
		l.Event = &ev
	}
	return l, nil
}

// Sources names, per partition, the node and role of the replica the
// server began reading ("0=n2/follower,1=n3/follower").
func (s *Stream) Sources() string { return s.sources }

// Close ends the stream.
func (s *Stream) Close() error { return s.body.Close() }
