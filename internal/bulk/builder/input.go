package builder

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/csv"
	"errors"
	"fmt"
	"hash"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"

	"github.com/hamba/avro/v2"
	"github.com/hamba/avro/v2/ocf"
	"github.com/parquet-go/parquet-go"
)

// Format is an input file's format.
type Format string

// The input formats.
const (
	JSONLines Format = "jsonl"
	CSV       Format = "csv"
	Avro      Format = "avro"
	Parquet   Format = "parquet"
)

// FormatOf is the format named by override ("" for none) or else by
// path's extension.
func FormatOf(path, override string) (Format, error) {
	if override != "" {
		switch f := Format(strings.ToLower(override)); f {
		case JSONLines, CSV, Avro, Parquet:
			return f, nil
		case "ndjson":
			return JSONLines, nil
		}
		return "", fmt.Errorf("unknown input format %q: want jsonl, csv, avro or parquet", override)
	}
	switch strings.ToLower(filepath.Ext(path)) {
	case ".jsonl", ".ndjson":
		return JSONLines, nil
	case ".csv":
		return CSV, nil
	case ".avro":
		return Avro, nil
	case ".parquet":
		return Parquet, nil
	}
	return "", fmt.Errorf("%s: cannot tell the format from the extension (.jsonl, .ndjson, .csv, .avro, .parquet): pass --format", path)
}

// Input is one input file, or, with Open set, a stream of its bytes:
// Path then only names it (in rejects, errors and the input
// fingerprint), and Open is called once. A stream is read in one pass,
// so it cannot be Parquet.
type Input struct {
	Path   string
	Format Format
	Open   func() (io.ReadCloser, error)
}

// open returns the input's bytes and, for a file, its size (-1 for a
// stream, counted as it is read).
func (in Input) open() (io.ReadCloser, int64, error) {
	if in.Open != nil {
		if in.Format == Parquet {
			return nil, 0, fmt.Errorf("%s: Parquet is read by offset, not as a stream", in.Path)
		}
		rc, err := in.Open()
		return rc, -1, err
	}
	f, err := os.Open(in.Path)
	if err != nil {
		return nil, 0, err
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, 0, err
	}
	return f, st.Size(), nil
}

// item is one raw record of an input, parsed by a worker.
type item struct {
	ord    uint64
	line   []byte         // JSON Lines
	cells  []string       // CSV
	values map[string]any // Avro, Parquet, as decoded
}

// batch is consecutive items of one input, the unit handed to workers.
type batch struct {
	input  int
	header []string     // CSV
	schema avro.Schema  // Avro: the file's record schema
	pq     parquet.Node // Parquet: the file's schema
	items  []item
}

const (
	batchItems = 1024
	batchBytes = 1 << 20
)

// inputReader reads one input into batches and hashes its bytes for the
// input fingerprint.
type inputReader struct {
	idx   int
	in    Input
	keys  []string // the table's key part names, which a CSV header must hold
	out   chan<- batch
	read  *atomic.Int64 // bytes read, for progress
	sum   hash.Hash
	size  int64
	cur   batch
	bytes int
}

// countingReader counts the bytes it passes for progress.
type countingReader struct {
	r io.Reader
	n *atomic.Int64
}

func (c countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n.Add(int64(n))
	return n, err
}

func (ir *inputReader) emit(ctx context.Context, it item, size int) error {
	ir.cur.items = append(ir.cur.items, it)
	ir.bytes += size
	if len(ir.cur.items) >= batchItems || ir.bytes >= batchBytes {
		return ir.flush(ctx)
	}
	return nil
}

func (ir *inputReader) flush(ctx context.Context) error {
	if len(ir.cur.items) == 0 {
		return nil
	}
	select {
	case ir.out <- ir.cur:
	case <-ctx.Done():
		return context.Cause(ctx)
	}
	ir.cur = batch{input: ir.idx, header: ir.cur.header, schema: ir.cur.schema, pq: ir.cur.pq}
	ir.bytes = 0
	return nil
}

// run reads the whole input; its errors name the file and the position.
func (ir *inputReader) run(ctx context.Context) error {
	rc, size, err := ir.in.open()
	if err != nil {
		return err
	}
	defer rc.Close()
	ir.sum = sha256.New()
	ir.cur = batch{input: ir.idx}
	ir.size = size // Parquet reads its footer by offset from the end
	var streamed atomic.Int64
	if ir.in.Format == Parquet {
		f := rc.(*os.File)
		// Parquet is read by offset: hash it in a pass of its own.
		if _, err := io.Copy(ir.sum, countingReader{f, ir.read}); err != nil {
			return err
		}
		err = ir.parquet(ctx, f)
	} else {
		r := io.TeeReader(countingReader{countingReader{rc, &streamed}, ir.read}, ir.sum)
		switch ir.in.Format {
		case JSONLines:
			err = ir.jsonLines(ctx, r)
		case CSV:
			err = ir.csv(ctx, r)
		case Avro:
			err = ir.avro(ctx, r)
		}
		if err == nil {
			// Hash whatever a decoder left unread.
			_, err = io.Copy(io.Discard, r)
		}
	}
	if err != nil {
		return err
	}
	if size < 0 {
		ir.size = streamed.Load()
	}
	return ir.flush(ctx)
}

func (ir *inputReader) jsonLines(ctx context.Context, r io.Reader) error {
	br := bufio.NewReaderSize(r, 1<<20)
	for line := uint64(1); ; line++ {
		b, err := br.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) {
			long := bytes.Clone(b)
			for errors.Is(err, bufio.ErrBufferFull) {
				b, err = br.ReadSlice('\n')
				long = append(long, b...)
			}
			b = long
		}
		if err != nil && err != io.EOF {
			return fmt.Errorf("%s:%d: %w", ir.in.Path, line, err)
		}
		if t := bytes.TrimSpace(b); len(t) > 0 {
			if e := ir.emit(ctx, item{ord: line, line: bytes.Clone(t)}, len(t)); e != nil {
				return e
			}
		}
		if err == io.EOF {
			return nil
		}
	}
}

func (ir *inputReader) csv(ctx context.Context, r io.Reader) error {
	cr := csv.NewReader(r)
	header, err := cr.Read()
	if err == io.EOF {
		return fmt.Errorf("%s: empty CSV file: a header line is required", ir.in.Path)
	}
	if err != nil {
		return fmt.Errorf("%s: header: %w", ir.in.Path, err)
	}
	if len(header) > 0 {
		header[0] = strings.TrimPrefix(header[0], "\ufeff")
	}
	seen := map[string]bool{}
	for _, h := range header {
		if seen[h] {
			return fmt.Errorf("%s: header: column %q appears twice", ir.in.Path, h)
		}
		seen[h] = true
	}
	for _, k := range ir.keys {
		if !seen[k] {
			return fmt.Errorf("%s: header lacks key part %q", ir.in.Path, k)
		}
	}
	ir.cur.header = header
	for ord := uint64(1); ; ord++ {
		rec, err := cr.Read()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return fmt.Errorf("%s: %w", ir.in.Path, err)
		}
		size := 0
		for _, c := range rec {
			size += len(c)
		}
		if err := ir.emit(ctx, item{ord: ord, cells: rec}, size); err != nil {
			return err
		}
	}
}

func (ir *inputReader) avro(ctx context.Context, r io.Reader) error {
	dec, err := ocf.NewDecoder(r)
	if err != nil {
		return fmt.Errorf("%s: not an Avro object container file: %w", ir.in.Path, err)
	}
	rs, ok := dec.Schema().(*avro.RecordSchema)
	if !ok {
		return fmt.Errorf("%s: the file's schema is %s, not a record", ir.in.Path, dec.Schema().Type())
	}
	ir.cur.schema = rs
	ord := uint64(0)
	for dec.HasNext() {
		ord++
		var m map[string]any
		if err := dec.Decode(&m); err != nil {
			return fmt.Errorf("%s: record %d: %w", ir.in.Path, ord, err)
		}
		if err := ir.emit(ctx, item{ord: ord, values: m}, 256); err != nil {
			return err
		}
	}
	if err := dec.Error(); err != nil {
		return fmt.Errorf("%s: after record %d: %w", ir.in.Path, ord, err)
	}
	return nil
}

func (ir *inputReader) parquet(ctx context.Context, f *os.File) error {
	pf, err := parquet.OpenFile(f, ir.size)
	if err != nil {
		return fmt.Errorf("%s: not a Parquet file: %w", ir.in.Path, err)
	}
	ir.cur.pq = pf.Schema()
	pr := parquet.NewReader(pf)
	defer pr.Close()
	for ord := uint64(1); ; ord++ {
		m := map[string]any{}
		if err := pr.Read(&m); err == io.EOF {
			return nil
		} else if err != nil {
			return fmt.Errorf("%s: row %d: %w", ir.in.Path, ord, err)
		}
		if err := ir.emit(ctx, item{ord: ord, values: m}, 256); err != nil {
			return err
		}
	}
}
