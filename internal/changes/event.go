package changes

import (
	"encoding/json"
	"fmt"
	"strconv"

	"github.com/doppio-db/doppio/internal/keys"
	"github.com/doppio-db/doppio/internal/partition"
	"github.com/doppio-db/doppio/internal/schema"
)

// Event is one document's change in one committed transaction, or one
// document of a bootstrap snapshot.
type Event struct {
	Partition int
	SCN       partition.SCN
	Mtime     int64 // commit time, Unix milliseconds
	partition.Write
	// TxnEnd marks the last event of its transaction that the stream
	// carries (after filtering); for a snapshot, the last document of the
	// partition's snapshot.
	TxnEnd bool
	// Snapshot marks a bootstrap event: the document as of SCN, op insert.
	Snapshot bool
	// Next is the reader's position once this event is read.
	Next Position
}

// AppendJSON appends the event's JSON object to dst, images rendered as
// documents of table's latest schema version:
//
//	{"scn":"g:s","partition":p,"table":t,"key":[…],"op":"update","before":{…},"after":{…},"txnEnd":true,"ts":ms}
//
// with "snapshot":true on bootstrap events. A table's drop (op "drop")
// and a replace load's swap (op "replace": the table's documents in the
// partition are, from this SCN, the load's) have a null key and null
// images, and need no table (table may be nil).
func (e *Event) AppendJSON(dst []byte, table *schema.Table) ([]byte, error) {
	dst = append(dst, `{"scn":"`...)
	dst = strconv.AppendUint(dst, e.SCN.Generation, 10)
	dst = append(dst, ':')
	dst = strconv.AppendUint(dst, e.SCN.Sequence, 10)
	dst = append(dst, `","partition":`...)
	dst = strconv.AppendInt(dst, int64(e.Partition), 10)
	dst = append(dst, `,"table":`...)
	dst = strconv.AppendQuote(dst, e.Table) // table names are identifiers: JSON-safe
	dst = append(dst, `,"key":`...)
	if e.Op == partition.OpDrop || e.Op == partition.OpReplace {
		// The table's, not a document's: no key, no images.
		dst = append(dst, `null,"op":"`...)
		dst = append(dst, e.Op.String()...)
		dst = append(dst, `","before":null,"after":null,"txnEnd":`...)
		dst = strconv.AppendBool(dst, e.TxnEnd)
		dst = append(dst, `,"ts":`...)
		dst = strconv.AppendInt(dst, e.Mtime, 10)
		return append(dst, '}'), nil
	}
	tuple, err := keys.DecodeTuple(e.Key)
	if err != nil {
		return dst, fmt.Errorf("event key: %w", err)
	}
	kb, err := json.Marshal(tuple)
	if err != nil {
		return dst, err
	}
	dst = append(dst, kb...)
	dst = append(dst, `,"op":"`...)
	dst = append(dst, e.Op.String()...)
	dst = append(dst, `","before":`...)
	if dst, err = appendImage(dst, table, e.Before, e.BeforeVersion); err != nil {
		return dst, err
	}
	dst = append(dst, `,"after":`...)
	if dst, err = appendImage(dst, table, e.After, e.AfterVersion); err != nil {
		return dst, err
	}
	dst = append(dst, `,"txnEnd":`...)
	dst = strconv.AppendBool(dst, e.TxnEnd)
	dst = append(dst, `,"ts":`...)
	dst = strconv.AppendInt(dst, e.Mtime, 10)
	if e.Snapshot {
		dst = append(dst, `,"snapshot":true`...)
	}
	return append(dst, '}'), nil
}

func appendImage(dst []byte, t *schema.Table, avro []byte, version uint32) ([]byte, error) {
	if avro == nil {
		return append(dst, "null"...), nil
	}
	return t.AppendAvroAsJSON(dst, avro, int(version), t.Latest())
}
