package storage

import (
	"strings"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// writeBufferBytes is how much of a table or blob file is gathered in
// memory before one write(2) hands it to the kernel.
const writeBufferBytes = 256 << 10

// coalescingFS is the file system Pebble writes through: sstables and blob
// files it creates are written to the kernel in runs of writeBufferBytes.
// Pebble buffers them in 4 KiB (a bufio.Writer of the default size), one
// write(2) per 4 KiB, and each call has a fixed cost that larger writes
// share (figures: docs/benchmarks/micro.md, BenchmarkFlush).
// Every other file (the WAL, the manifest, options, markers) is written
// through unchanged: their writes must reach the kernel when made.
type coalescingFS struct{ vfs.FS }

func (fs coalescingFS) Create(name string, category vfs.DiskWriteCategory) (vfs.File, error) {
	f, err := fs.FS.Create(name, category)
	if err != nil || !(strings.HasSuffix(name, ".sst") || strings.HasSuffix(name, ".blob")) {
		return f, err
	}
	return &coalescingFile{File: f}, nil
}

// coalescingFile holds written bytes until writeBufferBytes are gathered.
// Anything that looks at the file as the kernel sees it (a sync of any
// kind, a read, Stat, a positioned write, Close) first writes out what it
// holds, so the file behaves as if every Write had gone straight through,
// but for when the kernel learns of the bytes.
type coalescingFile struct {
	vfs.File
	buf []byte
}

func (f *coalescingFile) Write(p []byte) (int, error) {
	if len(f.buf) == 0 && len(p) >= writeBufferBytes {
		return f.File.Write(p)
	}
	if f.buf == nil {
		f.buf = make([]byte, 0, writeBufferBytes)
	}
	n := 0
	for len(p) > 0 {
		c := copy(f.buf[len(f.buf):cap(f.buf)], p)
		f.buf = f.buf[:len(f.buf)+c]
		p = p[c:]
		n += c
		if len(f.buf) == cap(f.buf) {
			if err := f.flush(); err != nil {
				return 0, err
			}
		}
	}
	return n, nil
}

// flush writes out the held bytes. After a failed write nothing more is
// held: Pebble abandons a table whose write failed.
func (f *coalescingFile) flush() error {
	if len(f.buf) == 0 {
		return nil
	}
	_, err := f.File.Write(f.buf)
	f.buf = f.buf[:0]
	return err
}

func (f *coalescingFile) WriteAt(p []byte, off int64) (int, error) {
	if err := f.flush(); err != nil {
		return 0, err
	}
	return f.File.WriteAt(p, off)
}

func (f *coalescingFile) Read(p []byte) (int, error) {
	if err := f.flush(); err != nil {
		return 0, err
	}
	return f.File.Read(p)
}

func (f *coalescingFile) ReadAt(p []byte, off int64) (int, error) {
	if err := f.flush(); err != nil {
		return 0, err
	}
	return f.File.ReadAt(p, off)
}

func (f *coalescingFile) Stat() (vfs.FileInfo, error) {
	if err := f.flush(); err != nil {
		return nil, err
	}
	return f.File.Stat()
}

func (f *coalescingFile) Sync() error {
	if err := f.flush(); err != nil {
		return err
	}
	return f.File.Sync()
}

func (f *coalescingFile) SyncData() error {
	if err := f.flush(); err != nil {
		return err
	}
	return f.File.SyncData()
}

func (f *coalescingFile) SyncTo(length int64) (bool, error) {
	if err := f.flush(); err != nil {
		return false, err
	}
	return f.File.SyncTo(length)
}

func (f *coalescingFile) Close() error {
	err := f.flush()
	f.buf = nil
	if cerr := f.File.Close(); err == nil {
		err = cerr
	}
	return err
}
