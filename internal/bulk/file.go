package bulk

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
)

// magic opens every partition file.
const magic = "DOPPIOB1"

// Bounds a Reader enforces so a corrupt length cannot ask for an absurd
// allocation; they are far above what a valid document key or document
// can be.
const (
	MaxKeyBytes = 1 << 16
	MaxDocBytes = 1 << 26
)

// Record is one document of a partition file: Key is keys.EncodeTuple of
// the document's whole key, Doc its Avro encoding without the key parts.
type Record struct {
	Key, Doc []byte
}

// Writer writes one partition file. Records must come in strictly
// increasing key order; Close writes the trailer. The zero Writer is not
// usable: use NewWriter.
type Writer struct {
	bw      *bufio.Writer
	sum     hash.Hash
	bytes   int64
	records int64
	first   []byte
	last    []byte
	closed  bool
	err     error
	scratch [binary.MaxVarintLen64]byte
}

// NewWriter returns a Writer that writes a partition file to w.
func NewWriter(w io.Writer) *Writer {
	sum := sha256.New()
	pw := &Writer{bw: bufio.NewWriterSize(io.MultiWriter(w, sum), 256<<10), sum: sum}
	pw.write([]byte(magic))
	return pw
}

func (w *Writer) write(b []byte) {
	if w.err != nil {
		return
	}
	n, err := w.bw.Write(b)
	w.bytes += int64(n)
	w.err = err
}

func (w *Writer) uvarint(v uint64) {
	w.write(w.scratch[:binary.PutUvarint(w.scratch[:], v)])
}

// Write appends r. It refuses an empty key (the end-of-records marker is a
// zero length) and a key not greater than the previous one.
func (w *Writer) Write(r Record) error {
	switch {
	case w.err != nil:
		return w.err
	case w.closed:
		return errors.New("bulk: write to a closed partition writer")
	case len(r.Key) == 0:
		return errors.New("bulk: empty record key")
	case len(r.Key) > MaxKeyBytes:
		return fmt.Errorf("bulk: record key of %d bytes exceeds %d", len(r.Key), MaxKeyBytes)
	case len(r.Doc) > MaxDocBytes:
		return fmt.Errorf("bulk: document of %d bytes exceeds %d", len(r.Doc), MaxDocBytes)
	case w.records > 0 && bytes.Compare(r.Key, w.last) <= 0:
		return fmt.Errorf("bulk: record key %x does not sort after the previous key %x", r.Key, w.last)
	}
	w.uvarint(uint64(len(r.Key)))
	w.write(r.Key)
	w.uvarint(uint64(len(r.Doc)))
	w.write(r.Doc)
	if w.records == 0 {
		w.first = bytes.Clone(r.Key)
	}
	w.last = append(w.last[:0], r.Key...)
	w.records++
	return w.err
}

// Close writes the trailer and flushes; it does not close the underlying
// writer.
func (w *Writer) Close() error {
	if w.closed {
		return w.err
	}
	w.closed = true
	w.uvarint(0)
	w.uvarint(uint64(w.records))
	if w.err == nil {
		w.err = w.bw.Flush()
	}
	return w.err
}

// File describes the closed file for the manifest.
func (w *Writer) File(partition int, path string) File {
	f := File{
		Partition: partition,
		Path:      path,
		Records:   w.records,
		Bytes:     w.bytes,
		SHA256:    hex.EncodeToString(w.sum.Sum(nil)),
	}
	if w.records > 0 {
		f.FirstKey = bytes.Clone(w.first)
		f.LastKey = bytes.Clone(w.last)
	}
	return f
}

// ErrCorrupt is wrapped by every CorruptError.
var ErrCorrupt = errors.New("corrupt partition file")

// CorruptError says where and how a partition file is wrong. Offset is the
// byte offset, from the file's start, of the item found wrong; Record is
// the 1-based ordinal of the record being read (the record count plus one
// when the trailer is wrong).
type CorruptError struct {
	Offset int64
	Record int64
	Reason string
}

func (e *CorruptError) Error() string {
	return fmt.Sprintf("%v at byte %d (record %d): %s", ErrCorrupt, e.Offset, e.Record, e.Reason)
}

// Unwrap makes errors.Is(err, ErrCorrupt) hold.
func (e *CorruptError) Unwrap() error { return ErrCorrupt }

// Position is a record boundary of a partition file: Offset is where the
// next record (or the end marker) starts, Records how many records precede
// it and LastKey the last of them. A loader persists it to resume.
type Position struct {
	Offset  int64  `json:"offset"`
	Records int64  `json:"records"`
	LastKey []byte `json:"lastKey,omitempty"`
}

// Reader iterates a partition file's records, checking the magic, the key
// order, the trailer's count and that nothing follows the trailer.
type Reader struct {
	br     *bufio.Reader
	pos    Position
	off    int64 // bytes consumed so far, from the file's start
	opened bool
	err    error
}

// NewReader returns a Reader over a whole partition file.
func NewReader(r io.Reader) *Reader {
	return &Reader{br: bufio.NewReaderSize(r, 256<<10)}
}

// NewReaderAt returns a Reader that resumes at pos, a Position a previous
// Reader of the same file reported; r must yield the file's bytes from
// pos.Offset on. A zero Position reads the whole file, magic included.
func NewReaderAt(r io.Reader, pos Position) (*Reader, error) {
	if pos.Offset == 0 && pos.Records == 0 && len(pos.LastKey) == 0 {
		return NewReader(r), nil
	}
	if pos.Offset < int64(len(magic)) || pos.Records < 0 || (pos.Records == 0) != (len(pos.LastKey) == 0) {
		return nil, fmt.Errorf("bulk: position %+v is not a record boundary", pos)
	}
	pos.LastKey = bytes.Clone(pos.LastKey)
	return &Reader{br: bufio.NewReaderSize(r, 256<<10), pos: pos, off: pos.Offset, opened: true}, nil
}

// Position is the record boundary after the last record Next returned.
func (r *Reader) Position() Position {
	p := r.pos
	p.LastKey = bytes.Clone(p.LastKey)
	return p
}

func (r *Reader) corrupt(at int64, format string, args ...any) error {
	return &CorruptError{Offset: at, Record: r.pos.Records + 1, Reason: fmt.Sprintf(format, args...)}
}

// uvarint reads one minimally encoded uvarint; what names it in errors.
func (r *Reader) uvarint(what string) (uint64, error) {
	start := r.off
	var v uint64
	for i := 0; ; i++ {
		c, err := r.br.ReadByte()
		if err == io.EOF {
			return 0, r.corrupt(start, "truncated: the file ends inside the %s", what)
		} else if err != nil {
			return 0, err
		}
		r.off++
		if i == binary.MaxVarintLen64-1 && c > 1 {
			return 0, r.corrupt(start, "%s overflows 64 bits", what)
		}
		v |= uint64(c&0x7f) << (7 * i)
		if c < 0x80 {
			if c == 0 && i > 0 {
				return 0, r.corrupt(start, "%s is not minimally encoded", what)
			}
			return v, nil
		}
	}
}

func (r *Reader) bytes(n uint64, what string) ([]byte, error) {
	b := make([]byte, n)
	got, err := io.ReadFull(r.br, b)
	r.off += int64(got)
	if err == io.EOF || err == io.ErrUnexpectedEOF {
		return nil, r.corrupt(r.off, "truncated: the file ends %d bytes into a %d-byte %s", got, n, what)
	}
	return b, err
}

// Next returns the next record, or io.EOF after the trailer has been read
// and checked. Any other error is final; a malformed file yields a
// *CorruptError.
func (r *Reader) Next() (Record, error) {
	if r.err != nil {
		return Record{}, r.err
	}
	rec, err := r.next()
	if err != nil {
		r.err = err
		return Record{}, err
	}
	return rec, nil
}

func (r *Reader) next() (Record, error) {
	if !r.opened {
		r.opened = true
		head := make([]byte, len(magic))
		n, err := io.ReadFull(r.br, head)
		r.off += int64(n)
		if err == io.EOF || err == io.ErrUnexpectedEOF {
			return Record{}, r.corrupt(0, "truncated: %d bytes, shorter than the magic %q", n, magic)
		} else if err != nil {
			return Record{}, err
		}
		if string(head) != magic {
			return Record{}, r.corrupt(0, "magic %q, want %q", head, magic)
		}
		r.pos.Offset = r.off
	}
	start := r.off
	klen, err := r.uvarint("key length")
	if err != nil {
		return Record{}, err
	}
	if klen == 0 {
		return Record{}, r.trailer()
	}
	if klen > MaxKeyBytes {
		return Record{}, r.corrupt(start, "key length %d exceeds %d", klen, MaxKeyBytes)
	}
	key, err := r.bytes(klen, "key")
	if err != nil {
		return Record{}, err
	}
	if r.pos.Records > 0 {
		switch c := bytes.Compare(key, r.pos.LastKey); {
		case c == 0:
			return Record{}, r.corrupt(start, "key %x repeats the previous record's key", key)
		case c < 0:
			return Record{}, r.corrupt(start, "key %x sorts before the previous key %x", key, r.pos.LastKey)
		}
	}
	dstart := r.off
	dlen, err := r.uvarint("document length")
	if err != nil {
		return Record{}, err
	}
	if dlen > MaxDocBytes {
		return Record{}, r.corrupt(dstart, "document length %d exceeds %d", dlen, MaxDocBytes)
	}
	doc, err := r.bytes(dlen, "document")
	if err != nil {
		return Record{}, err
	}
	r.pos = Position{Offset: r.off, Records: r.pos.Records + 1, LastKey: key}
	return Record{Key: key, Doc: doc}, nil
}

// trailer checks the record count after the end marker and that the file
// ends there.
func (r *Reader) trailer() error {
	at := r.off
	n, err := r.uvarint("trailer record count")
	if err != nil {
		return err
	}
	if n != uint64(r.pos.Records) {
		return r.corrupt(at, "trailer counts %d records, the file holds %d", n, r.pos.Records)
	}
	if _, err := r.br.ReadByte(); err == nil {
		return r.corrupt(r.off, "trailing garbage after the trailer")
	} else if err != io.EOF {
		return err
	}
	return io.EOF
}
