// Package backup is the stream a node sends one partition's backup in
// (GET /_cluster/backup/{db}/{p}): its frames, the PartitionInfo that
// opens it, and the writer and reader of both ends. The node writes it
// (internal/api); the backup driver (internal/backupdir) reads it and
// turns it into a backup directory. This package links neither side.
package backup

import (
	"bufio"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
)

// Frames of a partition's backup stream (GET /_cluster/backup/{db}/{p}):
// one 'i' (the PartitionInfo JSON), per table its bytes in 'c' frames
// then 'e', and 'z' once the stream is complete. A stream that ends
// without 'z' failed.
const (
	FrameInfo  byte = 'i'
	FrameChunk byte = 'c'
	FrameEnd   byte = 'e'
	FrameDone  byte = 'z'
)

// PartitionInfo is what one partition's backup holds.
type PartitionInfo struct {
	SCN string `json:"scn"`
	// Entry is a digest of the change-log entry at SCN: the next
	// incremental backup checks it is still the same timeline.
	Entry       string `json:"entry,omitempty"`
	Incremental bool   `json:"incremental"`
	Since       string `json:"since,omitempty"`
	FullReason  string `json:"fullReason,omitempty"`
}

// maxFrame bounds a frame a reader accepts.
const maxFrame = 64 << 20

// FrameWriter writes frames to w.
type FrameWriter struct {
	w   io.Writer
	buf []byte
}

// NewFrameWriter returns a FrameWriter on w.
func NewFrameWriter(w io.Writer) *FrameWriter { return &FrameWriter{w: w} }

// Frame writes one frame.
func (f *FrameWriter) Frame(kind byte, payload []byte) error {
	f.buf = binary.AppendUvarint(append(f.buf[:0], kind), uint64(len(payload)))
	if _, err := f.w.Write(f.buf); err != nil {
		return err
	}
	_, err := f.w.Write(payload)
	return err
}

// Info writes the 'i' frame.
func (f *FrameWriter) Info(info PartitionInfo) error {
	b, err := json.Marshal(info)
	if err != nil {
		return err
	}
	return f.Frame(FrameInfo, b)
}

// TableWriter returns an objstorage.Writable-shaped sink for one table:
// its bytes go out as 'c' frames of about 1 MiB, and 'e' on Finish.
func (f *FrameWriter) TableWriter() *TableWriter { return &TableWriter{f: f} }

// TableWriter streams one sstable as frames (an objstorage.Writable).
type TableWriter struct {
	f   *FrameWriter
	buf []byte
}

const chunkBytes = 1 << 20

// Write implements objstorage.Writable.
func (t *TableWriter) Write(p []byte) error {
	t.buf = append(t.buf, p...)
	if len(t.buf) >= chunkBytes {
		return t.flush()
	}
	return nil
}

func (t *TableWriter) flush() error {
	if len(t.buf) == 0 {
		return nil
	}
	err := t.f.Frame(FrameChunk, t.buf)
	t.buf = t.buf[:0]
	return err
}

// Finish implements objstorage.Writable.
func (t *TableWriter) Finish() error {
	if err := t.flush(); err != nil {
		return err
	}
	return t.f.Frame(FrameEnd, nil)
}

// Abort implements objstorage.Writable.
func (t *TableWriter) Abort() {}

// FrameReader reads frames.
type FrameReader struct{ r *bufio.Reader }

// NewFrameReader returns a FrameReader on r.
func NewFrameReader(r io.Reader) *FrameReader { return &FrameReader{r: bufio.NewReader(r)} }

// ErrTruncated is a stream that ended before its 'z' frame.
var ErrTruncated = errors.New("backup stream ended before it was complete")

// Next returns the next frame; payload is valid until the next call.
func (f *FrameReader) Next(buf []byte) (kind byte, payload []byte, err error) {
	kind, err = f.r.ReadByte()
	if err != nil {
		if errors.Is(err, io.EOF) {
			err = ErrTruncated
		}
		return 0, nil, err
	}
	n, err := binary.ReadUvarint(f.r)
	if err != nil || n > maxFrame {
		return 0, nil, fmt.Errorf("%w: bad frame length", ErrTruncated)
	}
	if uint64(cap(buf)) < n {
		buf = make([]byte, n)
	}
	buf = buf[:n]
	if _, err := io.ReadFull(f.r, buf); err != nil {
		return 0, nil, ErrTruncated
	}
	return kind, buf, nil
}
