// Package checkpoint is the wire format of change-stream checkpoints: a
// stream's position in every partition it reads, opaque to consumers. It
// is a leaf (stdlib and internal/scn only) so that the Go client can split
// and merge checkpoints without linking the server.
package checkpoint

import (
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"sort"

	"github.com/doppio-db/doppio/internal/scn"
)

// Position is where a reader stands in one partition's change log: every
// event of the entries up to SCN has been read, except that when Part > 0
// only the first Part writes of the entry at SCN have (the stream stopped
// inside a transaction).
type Position struct {
	Partition int
	SCN       scn.SCN
	Part      uint32
}

// Checkpoint is a stream's position in every partition it reads: opaque to
// consumers, who hand it back to resume.
type Checkpoint struct {
	DB        string
	Positions []Position // sorted by partition, at most one per partition
}

// Get returns the position of partition p.
func (c *Checkpoint) Get(p int) (Position, bool) {
	i := sort.Search(len(c.Positions), func(i int) bool { return c.Positions[i].Partition >= p })
	if i < len(c.Positions) && c.Positions[i].Partition == p {
		return c.Positions[i], true
	}
	return Position{}, false
}

// Set records pos as its partition's position.
func (c *Checkpoint) Set(pos Position) {
	i := sort.Search(len(c.Positions), func(i int) bool { return c.Positions[i].Partition >= pos.Partition })
	if i < len(c.Positions) && c.Positions[i].Partition == pos.Partition {
		c.Positions[i] = pos
		return
	}
	c.Positions = append(c.Positions, Position{})
	copy(c.Positions[i+1:], c.Positions[i:])
	c.Positions[i] = pos
}

const format = 1

// Append appends the checkpoint's wire form to dst: URL-safe base64 of
// (format, database, positions, CRC-32C), so a mangled one is refused
// rather than misread.
func (c *Checkpoint) Append(dst []byte) []byte {
	var buf [256]byte
	b := append(buf[:0], format)
	b = binary.AppendUvarint(b, uint64(len(c.DB)))
	b = append(b, c.DB...)
	b = binary.AppendUvarint(b, uint64(len(c.Positions)))
	for _, p := range c.Positions {
		b = binary.AppendUvarint(b, uint64(p.Partition))
		b = binary.AppendUvarint(b, p.SCN.Generation)
		b = binary.AppendUvarint(b, p.SCN.Sequence)
		b = binary.AppendUvarint(b, uint64(p.Part))
	}
	b = binary.BigEndian.AppendUint32(b, crc32.Checksum(b, castagnoli))
	return base64.RawURLEncoding.AppendEncode(dst, b)
}

// String is the checkpoint's wire form.
func (c *Checkpoint) String() string { return string(c.Append(nil)) }

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// ErrMalformed is returned by Parse for anything that is not a checkpoint
// this package wrote.
var ErrMalformed = errors.New("malformed checkpoint")

// maxPartitions bounds what a checkpoint may name (and what its decoder
// allocates).
const maxPartitions = 1 << 16

// Parse parses the wire form of a checkpoint.
func Parse(s string) (Checkpoint, error) {
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil || len(b) < 5 {
		return Checkpoint{}, ErrMalformed
	}
	body, sum := b[:len(b)-4], binary.BigEndian.Uint32(b[len(b)-4:])
	if crc32.Checksum(body, castagnoli) != sum || body[0] != format {
		return Checkpoint{}, ErrMalformed
	}
	d := body[1:]
	bad := false
	uv := func() uint64 {
		v, n := binary.Uvarint(d)
		if n <= 0 {
			bad = true
			return 0
		}
		d = d[n:]
		return v
	}
	var c Checkpoint
	n := uv()
	if bad || n > uint64(len(d)) {
		return Checkpoint{}, ErrMalformed
	}
	c.DB, d = string(d[:n]), d[n:]
	count := uv()
	if bad || count > maxPartitions {
		return Checkpoint{}, ErrMalformed
	}
	for range count {
		p := Position{Partition: int(uv()), SCN: scn.SCN{Generation: uv(), Sequence: uv()}}
		part := uv()
		if bad || part > 1<<32-1 || p.Partition >= maxPartitions {
			return Checkpoint{}, ErrMalformed
		}
		p.Part = uint32(part)
		if len(c.Positions) > 0 && c.Positions[len(c.Positions)-1].Partition >= p.Partition {
			return Checkpoint{}, ErrMalformed
		}
		c.Positions = append(c.Positions, p)
	}
	if len(d) != 0 {
		return Checkpoint{}, ErrMalformed
	}
	return c, nil
}

// String renders "partition@g:s", with "+part" inside a transaction.
func (p Position) String() string {
	if p.Part > 0 {
		return fmt.Sprintf("%d@%s+%d", p.Partition, p.SCN, p.Part)
	}
	return fmt.Sprintf("%d@%s", p.Partition, p.SCN)
}
