package builder

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/doppio-db/doppio/internal/bulk"
)

// Defaults of Config.
const (
	DefaultSpillBytes       = 256 << 20
	DefaultMaxDocumentBytes = 1 << 20
	DefaultProgressEvery    = time.Second
)

// Config says what to build and how.
type Config struct {
	Target *Target
	Inputs []Input
	// Out is the build directory; it must be absent or empty unless
	// Overwrite, which first removes what it holds.
	Out       string
	Overwrite bool
	// Workers parse, validate and merge in parallel; 0 means GOMAXPROCS.
	Workers int
	// SpillBytes bounds the records buffered in memory before sorted runs
	// are spilled to temporary files under Out; 0 means DefaultSpillBytes.
	SpillBytes int64
	// MaxDocumentBytes rejects documents whose encoding is larger, as the
	// server does; 0 means DefaultMaxDocumentBytes.
	MaxDocumentBytes int
	// Builder names the builder in the manifest.
	Builder string
	// Progress, if set, is called every ProgressEvery and once at the end.
	Progress      func(Progress)
	ProgressEvery time.Duration
}

// Progress is how far a build is.
type Progress struct {
	Phase      string // "reading", "merging", "done"
	BytesRead  int64
	BytesTotal int64
	Records    int64 // records read so far
	Rejected   int64 // records rejected so far (duplicates counted when merging)
	Partitions int   // partitions written so far
	Spills     int64 // sorted runs spilled to temporary files so far
}

// Build reads the inputs, validates, partitions and sorts their records
// and writes the build directory: one file per partition, the rejects
// file and, last, the manifest, which it returns. On error it removes
// what it wrote, so no directory is left looking complete.
func Build(ctx context.Context, cfg Config) (m *bulk.Manifest, err error) {
	if cfg.Workers <= 0 {
		cfg.Workers = runtime.GOMAXPROCS(0)
	}
	if cfg.SpillBytes <= 0 {
		cfg.SpillBytes = DefaultSpillBytes
	}
	if cfg.MaxDocumentBytes <= 0 {
		cfg.MaxDocumentBytes = DefaultMaxDocumentBytes
	}
	if cfg.ProgressEvery <= 0 {
		cfg.ProgressEvery = DefaultProgressEvery
	}
	if len(cfg.Inputs) == 0 {
		return nil, errors.New("no inputs")
	}
	b := &build{cfg: cfg, t: cfg.Target}
	for _, in := range cfg.Inputs {
		if in.Open != nil {
			continue // a stream's size is known once read
		}
		st, err := os.Stat(in.Path)
		if err != nil {
			return nil, err
		}
		if !st.Mode().IsRegular() {
			return nil, fmt.Errorf("%s is not a regular file", in.Path)
		}
		b.total += st.Size()
	}
	if err := prepareOut(cfg.Out, cfg.Overwrite); err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			b.removeOutputs()
		}
	}()
	if b.tmp, err = os.MkdirTemp(cfg.Out, ".spill-"); err != nil {
		return nil, err
	}
	defer os.RemoveAll(b.tmp)

	stop := b.reportEvery(cfg.Progress, cfg.ProgressEvery)
	defer stop()
	if err := b.read(ctx); err != nil {
		return nil, err
	}
	b.phase.Store("merging")
	if err := b.writePartitions(ctx); err != nil {
		return nil, err
	}
	if err := b.writeRejects(); err != nil {
		return nil, err
	}
	m = b.t.manifest()
	m.Files = b.files
	for _, f := range b.files {
		m.Records += f.Records
	}
	m.Rejected = b.rejected.Load()
	m.InputFingerprint = b.fingerprint()
	m.Builder = cfg.Builder
	if err := bulk.WriteManifest(cfg.Out, m); err != nil {
		return nil, err
	}
	b.phase.Store("done")
	return m, nil
}

// build is one Build's state.
type build struct {
	cfg   Config
	t     *Target
	tmp   string
	total int64

	phase      atomic.Value // string
	bytesRead  atomic.Int64
	records    atomic.Int64
	rejected   atomic.Int64
	partitions atomic.Int64
	spills     atomic.Int64

	workers []*runs // one per worker: a bucket per partition, then rejects
	dups    *runs   // duplicate-key rejections found while merging
	dupsMu  sync.Mutex
	sums    [][]byte // each input's SHA-256
	sizes   []int64
	files   []bulk.File
	written []string // output files created, removed on failure
	wmu     sync.Mutex
}

func (b *build) rejectsBucket() int { return b.t.Partitions }

// prepareOut makes out an empty directory, refusing a non-empty one
// unless overwrite. The manifest goes first, so an interrupted overwrite
// leaves no directory looking complete.
func prepareOut(out string, overwrite bool) error {
	ents, err := os.ReadDir(out)
	if errors.Is(err, os.ErrNotExist) {
		return os.MkdirAll(out, 0o755)
	}
	if err != nil {
		return err
	}
	if len(ents) == 0 {
		return nil
	}
	if !overwrite {
		return fmt.Errorf("output directory %s is not empty: pass --overwrite to replace its contents", out)
	}
	if err := os.Remove(filepath.Join(out, bulk.ManifestName)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	for _, e := range ents {
		if err := os.RemoveAll(filepath.Join(out, e.Name())); err != nil {
			return err
		}
	}
	return nil
}

func (b *build) created(path string) {
	b.wmu.Lock()
	b.written = append(b.written, path)
	b.wmu.Unlock()
}

func (b *build) removeOutputs() {
	b.wmu.Lock()
	defer b.wmu.Unlock()
	for _, p := range b.written {
		os.Remove(p)
	}
}

func (b *build) progress() Progress {
	phase, _ := b.phase.Load().(string)
	if phase == "" {
		phase = "reading"
	}
	return Progress{Phase: phase, BytesRead: b.bytesRead.Load(), BytesTotal: b.total,
		Records: b.records.Load(), Rejected: b.rejected.Load(), Partitions: int(b.partitions.Load()), Spills: b.spills.Load()}
}

// reportEvery calls fn with the progress every interval until the
// returned stop, which reports once more.
func (b *build) reportEvery(fn func(Progress), every time.Duration) (stop func()) {
	if fn == nil {
		return func() {}
	}
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				fn(b.progress())
			}
		}
	}()
	return func() {
		close(done)
		wg.Wait()
		fn(b.progress())
	}
}

// read runs the input readers (up to Workers at a time) and the workers,
// leaving each worker's sorted runs in b.workers.
func (b *build) read(ctx context.Context) error {
	g, ctx := newGroup(ctx, 0)
	work := make(chan batch, 2*b.cfg.Workers)
	b.sums = make([][]byte, len(b.cfg.Inputs))
	b.sizes = make([]int64, len(b.cfg.Inputs))
	budget := max(b.cfg.SpillBytes/int64(b.cfg.Workers), 1)
	b.workers = make([]*runs, b.cfg.Workers)
	var workersWG sync.WaitGroup
	for w := range b.workers {
		r := newRuns(b.tmp, fmt.Sprintf("w%03d", w), b.t.Partitions+1, budget, &b.spills)
		b.workers[w] = r
		workersWG.Add(1)
		g.Go(func() error {
			defer workersWG.Done()
			for bt := range work {
				if ctx.Err() != nil {
					continue // drain: a reader or another worker failed
				}
				if err := b.process(bt, r); err != nil {
					return err
				}
			}
			r.sortMemory()
			return nil
		})
	}
	readers := make(chan int)
	var readersWG sync.WaitGroup
	for range min(b.cfg.Workers, len(b.cfg.Inputs)) {
		readersWG.Add(1)
		g.Go(func() error {
			defer readersWG.Done()
			for i := range readers {
				ir := &inputReader{idx: i, in: b.cfg.Inputs[i], keys: b.t.keyNames(), out: work, read: &b.bytesRead}
				if err := ir.run(ctx); err != nil {
					return err
				}
				b.sums[i], b.sizes[i] = ir.sum.Sum(nil), ir.size
			}
			return nil
		})
	}
	g.Go(func() error {
		defer func() {
			close(readers)
			readersWG.Wait()
			close(work)
		}()
		for i := range b.cfg.Inputs {
			select {
			case readers <- i:
			case <-ctx.Done():
				return nil
			}
		}
		return nil
	})
	return g.Wait()
}

// process validates a batch's records into r: each record is a sorted
// entry in its partition's bucket or a rejection in the rejects bucket.
func (b *build) process(bt batch, r *runs) error {
	in := b.cfg.Inputs[bt.input]
	for _, it := range bt.items {
		key, doc, err := b.decode(bt, it)
		var rec bulkRecord
		if err == nil {
			rec.Record, rec.partition, err = b.t.encode(key, doc, b.cfg.MaxDocumentBytes)
		}
		b.records.Add(1)
		var rj rejection
		switch {
		case err == nil:
			err = r.add(rec.partition, entry{key: rec.Key, val: rec.Doc, input: uint32(bt.input), ord: it.ord})
		case errors.As(err, &rj):
			b.rejected.Add(1)
			err = r.add(b.rejectsBucket(), rejectEntry(bt.input, it.ord, string(rj)))
		default:
			var se *json.SyntaxError
			if errors.As(err, &se) {
				return fmt.Errorf("%s:%d: malformed JSON at byte %d: %v", in.Path, it.ord, se.Offset, err)
			}
			return fmt.Errorf("%s: record %d: %w", in.Path, it.ord, err)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

type bulkRecord struct {
	bulk.Record
	partition int
}

func (b *build) decode(bt batch, it item) (key keysTuple, doc docMap, err error) {
	switch {
	case it.line != nil:
		return b.t.fromJSON(it.line)
	case it.cells != nil:
		return b.t.fromCells(bt.header, it.cells)
	case bt.pq != nil:
		m, err := parquetFields(bt.pq, b.t.fields, it.values)
		if err != nil {
			return nil, nil, err
		}
		return b.t.fromValues(m)
	}
	v, err := nativeValue(bt.schema, it.values)
	if err != nil {
		return nil, nil, err
	}
	return b.t.fromValues(v.(map[string]any))
}

// rejectEntry sorts rejections by input and ordinal.
func rejectEntry(input int, ord uint64, reason string) entry {
	k := binary.BigEndian.AppendUint32(nil, uint32(input))
	k = binary.BigEndian.AppendUint64(k, ord)
	return entry{key: k, val: []byte(reason), input: uint32(input), ord: ord}
}

// writePartitions merges each partition's runs into its file, Workers
// partitions at a time. A key held by several records is written by none:
// each copy becomes a "duplicate key" rejection.
func (b *build) writePartitions(ctx context.Context) error {
	b.files = make([]bulk.File, b.t.Partitions)
	b.dups = newRuns(b.tmp, "dups", b.t.Partitions+1, max(b.cfg.SpillBytes/int64(b.cfg.Workers), 1), &b.spills)
	g, ctx := newGroup(ctx, b.cfg.Workers)
	for p := range b.t.Partitions {
		g.Go(func() error {
			if err := ctx.Err(); err != nil {
				return err
			}
			return b.writePartition(p)
		})
	}
	if err := g.Wait(); err != nil {
		return err
	}
	b.dups.sortMemory()
	return nil
}

func (b *build) writePartition(p int) error {
	var srcs []source
	for _, r := range b.workers {
		srcs = append(srcs, r.sources(p)...)
	}
	name := bulk.FileName(p)
	path := filepath.Join(b.cfg.Out, name)
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	b.created(path)
	w := bulk.NewWriter(f)
	err = merge(srcs, b.tmp, fmt.Sprintf("p%05d", p), func(g []entry) error {
		if len(g) == 1 {
			return w.Write(bulk.Record{Key: g[0].key, Doc: g[0].val})
		}
		b.dupsMu.Lock()
		defer b.dupsMu.Unlock()
		for _, e := range g {
			b.rejected.Add(1)
			if err := b.dups.add(b.rejectsBucket(), rejectEntry(int(e.input), e.ord, "duplicate key")); err != nil {
				return err
			}
		}
		return nil
	})
	if err := finishFile(f, err, w.Close); err != nil {
		return fmt.Errorf("writing %s: %w", name, err)
	}
	b.files[p] = w.File(p, name)
	b.partitions.Add(1)
	return nil
}

// rejectLine is one line of the rejects file.
type rejectLine struct {
	Input  string `json:"input"`
	Record uint64 `json:"record"`
	Reason string `json:"reason"`
}

// writeRejects writes every rejection, ordered by input and ordinal.
func (b *build) writeRejects() error {
	var srcs []source
	for _, r := range append(b.workers, b.dups) {
		srcs = append(srcs, r.sources(b.rejectsBucket())...)
	}
	path := filepath.Join(b.cfg.Out, bulk.RejectsName)
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	b.created(path)
	bw := newLineWriter(f)
	err = merge(srcs, b.tmp, "rejects", func(g []entry) error {
		for _, e := range g {
			line, err := json.Marshal(rejectLine{Input: b.cfg.Inputs[e.input].Path, Record: e.ord, Reason: string(e.val)})
			if err != nil {
				return err
			}
			bw.line(line)
		}
		return bw.err
	})
	return finishFile(f, err, bw.flush)
}

// finishFile completes an output file written so far with err: flush,
// sync and close, keeping the first error.
func finishFile(f *os.File, err error, flush func() error) error {
	if err == nil {
		err = flush()
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// fingerprint is SHA-256 over each input's base name, size and content
// SHA-256, one line each, in the order given (docs/design/bulk.md).
func (b *build) fingerprint() string {
	h := sha256.New()
	for i, in := range b.cfg.Inputs {
		fmt.Fprintf(h, "%s\n%d\n%s\n", filepath.Base(in.Path), b.sizes[i], hex.EncodeToString(b.sums[i]))
	}
	return "sha256:" + hex.EncodeToString(h.Sum(nil))
}
