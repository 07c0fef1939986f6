package builder

import (
	"bufio"
	"bytes"
	"cmp"
	"container/heap"
	"encoding/binary"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sync/atomic"
)

// entry is one item being sorted: a record (key, encoded document) or a
// rejection (key = input and ordinal, val = reason), with the input and
// ordinal it came from so equal keys order, and are reported, the same
// way whatever the worker count.
type entry struct {
	key, val []byte
	input    uint32
	ord      uint64
}

// entryOverhead approximates an entry's memory beyond its bytes.
const entryOverhead = 64

func (e *entry) size() int64 { return int64(len(e.key)+len(e.val)) + entryOverhead }

func compareEntries(a, b entry) int {
	if c := bytes.Compare(a.key, b.key); c != 0 {
		return c
	}
	if c := cmp.Compare(a.input, b.input); c != 0 {
		return c
	}
	return cmp.Compare(a.ord, b.ord)
}

// runs is one worker's external sorter over a fixed set of buckets (a
// bucket per partition plus one for rejections): entries are buffered
// in memory until budget bytes, then each bucket is sorted and written
// as a run into one spill file.
type runs struct {
	dir     string
	prefix  string
	budget  int64
	mem     int64
	buckets [][]entry
	spills  []spill
	spilled *atomic.Int64 // counts spills across a build, for progress
}

// spill is one spill file and where each bucket's run lies in it.
type spill struct {
	path     string
	sections [][2]int64
}

func newRuns(dir, prefix string, buckets int, budget int64, spilled *atomic.Int64) *runs {
	return &runs{dir: dir, prefix: prefix, budget: budget, buckets: make([][]entry, buckets), spilled: spilled}
}

func (r *runs) add(b int, e entry) error {
	r.buckets[b] = append(r.buckets[b], e)
	r.mem += e.size()
	if r.mem > r.budget {
		return r.spill()
	}
	return nil
}

// sortMemory sorts what is still buffered, which becomes each bucket's
// in-memory run.
func (r *runs) sortMemory() {
	for _, b := range r.buckets {
		slices.SortFunc(b, compareEntries)
	}
}

func (r *runs) spill() error {
	r.sortMemory()
	path := filepath.Join(r.dir, fmt.Sprintf("%s-%06d.run", r.prefix, len(r.spills)))
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	w := &runWriter{bw: bufio.NewWriterSize(f, 1<<20)}
	sp := spill{path: path, sections: make([][2]int64, len(r.buckets))}
	for i, b := range r.buckets {
		start := w.n
		for _, e := range b {
			w.write(e)
		}
		sp.sections[i] = [2]int64{start, w.n}
		clear(b)
		r.buckets[i] = b[:0]
	}
	if err := w.flush(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	r.spills = append(r.spills, sp)
	r.spilled.Add(1)
	r.mem = 0
	return nil
}

// sources are bucket b's sorted runs: one per spill, then memory.
func (r *runs) sources(b int) []source {
	var out []source
	for _, sp := range r.spills {
		if s := sp.sections[b]; s[1] > s[0] {
			out = append(out, &fileSource{path: sp.path, off: s[0], n: s[1] - s[0]})
		}
	}
	if len(r.buckets[b]) > 0 {
		out = append(out, &memSource{entries: r.buckets[b]})
	}
	return out
}

// runWriter writes entries: uvarint lengths and bytes of key and val,
// then uvarint input and ordinal.
type runWriter struct {
	bw  *bufio.Writer
	n   int64
	err error
	buf []byte
}

func (w *runWriter) write(e entry) {
	b := w.buf[:0]
	b = binary.AppendUvarint(b, uint64(len(e.key)))
	b = append(b, e.key...)
	b = binary.AppendUvarint(b, uint64(len(e.val)))
	b = append(b, e.val...)
	b = binary.AppendUvarint(b, uint64(e.input))
	b = binary.AppendUvarint(b, e.ord)
	w.buf = b
	if w.err == nil {
		_, w.err = w.bw.Write(b)
	}
	w.n += int64(len(b))
}

func (w *runWriter) flush() error {
	if w.err != nil {
		return w.err
	}
	return w.bw.Flush()
}

// source yields a sorted run's entries; ok is false at its end.
type source interface {
	next() (e entry, ok bool, err error)
	close()
}

type memSource struct{ entries []entry }

func (s *memSource) next() (entry, bool, error) {
	if len(s.entries) == 0 {
		return entry{}, false, nil
	}
	e := s.entries[0]
	s.entries[0] = entry{}
	s.entries = s.entries[1:]
	return e, true, nil
}

func (s *memSource) close() { s.entries = nil }

// fileSource reads a run section of a spill file, opening it on first use
// so a merge holds only the files it is merging open.
type fileSource struct {
	path   string
	off, n int64
	f      *os.File
	br     *bufio.Reader
}

func (s *fileSource) next() (entry, bool, error) {
	if s.br == nil {
		f, err := os.Open(s.path)
		if err != nil {
			return entry{}, false, err
		}
		s.f = f
		s.br = bufio.NewReaderSize(io.NewSectionReader(f, s.off, s.n), 64<<10)
	}
	klen, err := binary.ReadUvarint(s.br)
	if err == io.EOF {
		return entry{}, false, nil
	}
	var e entry
	if err == nil {
		e.key = make([]byte, klen)
		_, err = io.ReadFull(s.br, e.key)
	}
	var vlen, in uint64
	if err == nil {
		vlen, err = binary.ReadUvarint(s.br)
	}
	if err == nil {
		e.val = make([]byte, vlen)
		_, err = io.ReadFull(s.br, e.val)
	}
	if err == nil {
		in, err = binary.ReadUvarint(s.br)
		e.input = uint32(in)
	}
	if err == nil {
		e.ord, err = binary.ReadUvarint(s.br)
	}
	if err != nil {
		return entry{}, false, fmt.Errorf("reading spill file %s: %w", s.path, err)
	}
	return e, true, nil
}

func (s *fileSource) close() {
	if s.f != nil {
		s.f.Close()
		s.f, s.br = nil, nil
	}
}

// maxFanIn bounds the runs merged at once, and so the files open and the
// read buffers held by one merge.
const maxFanIn = 64

// merge calls emit with each group of entries sharing a key, in key
// order, entries of a group in (input, ordinal) order. Beyond maxFanIn
// runs, it first merges runs into intermediate ones under tmp.
func merge(srcs []source, tmp, name string, emit func(group []entry) error) error {
	for pass := 0; len(srcs) > maxFanIn; pass++ {
		var next []source
		for i := 0; i < len(srcs); i += maxFanIn {
			path := filepath.Join(tmp, fmt.Sprintf("%s-merge%d-%d.run", name, pass, i/maxFanIn))
			n, err := mergeToFile(srcs[i:min(i+maxFanIn, len(srcs))], path)
			if err != nil {
				return err
			}
			next = append(next, &fileSource{path: path, n: n})
		}
		srcs = next
	}
	return mergeGroups(srcs, emit)
}

func mergeToFile(srcs []source, path string) (int64, error) {
	f, err := os.Create(path)
	if err != nil {
		return 0, err
	}
	w := &runWriter{bw: bufio.NewWriterSize(f, 1<<20)}
	err = mergeGroups(srcs, func(g []entry) error {
		for _, e := range g {
			w.write(e)
		}
		return w.err
	})
	if err == nil {
		err = w.flush()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return w.n, err
}

func mergeGroups(srcs []source, emit func(group []entry) error) error {
	h := &mergeHeap{}
	defer func() {
		for _, s := range srcs {
			s.close()
		}
	}()
	for _, s := range srcs {
		e, ok, err := s.next()
		if err != nil {
			return err
		}
		if ok {
			h.items = append(h.items, headItem{e, s})
		}
	}
	heap.Init(h)
	var group []entry
	for h.Len() > 0 {
		top := &h.items[0]
		e := top.e
		if len(group) > 0 && !bytes.Equal(group[0].key, e.key) {
			if err := emit(group); err != nil {
				return err
			}
			group = group[:0]
		}
		group = append(group, e)
		next, ok, err := top.src.next()
		if err != nil {
			return err
		}
		if ok {
			top.e = next
			heap.Fix(h, 0)
		} else {
			top.src.close()
			heap.Pop(h)
		}
	}
	if len(group) > 0 {
		return emit(group)
	}
	return nil
}

type headItem struct {
	e   entry
	src source
}

type mergeHeap struct{ items []headItem }

func (h *mergeHeap) Len() int           { return len(h.items) }
func (h *mergeHeap) Less(i, j int) bool { return compareEntries(h.items[i].e, h.items[j].e) < 0 }
func (h *mergeHeap) Swap(i, j int)      { h.items[i], h.items[j] = h.items[j], h.items[i] }
func (h *mergeHeap) Push(x any)         { h.items = append(h.items, x.(headItem)) }
func (h *mergeHeap) Pop() any {
	x := h.items[len(h.items)-1]
	h.items = h.items[:len(h.items)-1]
	return x
}
