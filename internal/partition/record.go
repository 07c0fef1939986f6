package partition

import (
	"encoding/binary"
	"encoding/hex"

	"github.com/cespare/xxhash/v2"
)

// Record is a stored document: its Avro binary tagged with the writer's
// schema version, the SCN that wrote it and its modification time.
type Record struct {
	Version uint32
	SCN     SCN
	Mtime   int64 // Unix milliseconds
	Avro    []byte
}

const recordFormat = 1

func (r Record) encode() []byte {
	b := make([]byte, 0, len(r.Avro)+24)
	b = append(b, recordFormat)
	b = binary.AppendUvarint(b, uint64(r.Version))
	b = binary.AppendUvarint(b, r.SCN.Generation)
	b = binary.AppendUvarint(b, r.SCN.Sequence)
	b = binary.AppendVarint(b, r.Mtime)
	return append(b, r.Avro...)
}

func decodeRecord(b []byte) (Record, error) {
	d := decoder{b: b}
	if d.byte() != recordFormat {
		return Record{}, errCorrupt
	}
	r := Record{
		Version: uint32(d.uvarint()),
		SCN:     SCN{Generation: d.uvarint(), Sequence: d.uvarint()},
		Mtime:   d.varint(),
	}
	if d.err != nil {
		return Record{}, d.err
	}
	r.Avro = d.b
	return r, nil
}

// ETag is the quoted checksum of the stored document (schema version and
// Avro bytes): equal documents have equal ETags.
func ETag(version uint32, avro []byte) string {
	h := xxhash.New()
	var v [binary.MaxVarintLen32]byte
	_, _ = h.Write(v[:binary.PutUvarint(v[:], uint64(version))])
	_, _ = h.Write(avro)
	var sum [8]byte
	binary.BigEndian.PutUint64(sum[:], h.Sum64())
	return `"` + hex.EncodeToString(sum[:]) + `"`
}

// ETag of the record.
func (r Record) ETag() string { return ETag(r.Version, r.Avro) }
