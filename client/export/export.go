package export

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/doppio-db/doppio/client"
	"github.com/doppio-db/doppio/client/changes"
	"github.com/doppio-db/doppio/internal/changes/checkpoint"
	"github.com/doppio-db/doppio/internal/scn"
)

// Options configure an export.
type Options struct {
	// Server is the base URL of a node (or router); HTTP sends the
	// requests (authentication and TLS configured there; default
	// http.DefaultClient).
	Server string
	HTTP   *http.Client
	DB     string
	// Tables to export (default: every table of DB).
	Tables []string
	// Dir is the export's directory: absent or empty.
	Dir    string
	Format Format
	// Since, when set, makes a change export from this checkpoint (the
	// Checkpoint of an earlier export's manifest).
	Since string
	// Throttle bounds the bytes per second read from the cluster, over
	// all partitions (0: unbounded).
	Throttle int64
	// Parallel is how many partitions are read at a time (default 2).
	Parallel int
	// Progress, when set, is called as the export advances (at most every
	// ProgressEvery, and once per finished partition), from several
	// goroutines one at a time.
	Progress      func(Progress)
	ProgressEvery time.Duration
}

// Progress is how far an export is.
type Progress struct {
	Partitions, PartitionsDone int
	Rows, Bytes                int64
}

// InputError is an export refused before anything was read or written:
// a database, table, checkpoint or directory that cannot be exported.
type InputError struct{ Detail string }

func (e *InputError) Error() string { return e.Detail }

func inputErr(format string, a ...any) error { return &InputError{Detail: fmt.Sprintf(format, a...)} }

// Run exports o.DB to o.Dir and returns the manifest it wrote there.
// Files are complete once manifest.json exists: an interrupted export
// leaves none.
func Run(ctx context.Context, o Options) (Manifest, error) {
	if o.Parallel < 1 {
		o.Parallel = 2
	}
	if o.HTTP == nil {
		o.HTTP = http.DefaultClient
	}
	if o.ProgressEvery <= 0 {
		o.ProgressEvery = 200 * time.Millisecond
	}
	created, err := checkDir(o.Dir)
	if err != nil {
		return Manifest{}, err
	}
	c := client.New(o.Server, client.WithHTTPClient(o.HTTP))
	x, err := plan(ctx, c, o)
	if err != nil {
		return Manifest{}, err
	}
	m, err := x.run(ctx)
	if err != nil {
		// Leave the directory as it was: absent or empty.
		for _, t := range x.tables {
			os.RemoveAll(filepath.Join(o.Dir, t.Name))
		}
		if created {
			os.RemoveAll(o.Dir)
		}
	}
	return m, err
}

func (x *exporter) run(ctx context.Context) (Manifest, error) {
	o := x.o
	for _, t := range x.tables {
		if err := os.MkdirAll(filepath.Join(o.Dir, t.Name), 0o755); err != nil {
			return Manifest{}, inputErr("cannot create the export directory: %v", err)
		}
	}
	x.m.Started = time.Now().UTC()
	parts := make([]ManifestPartition, x.db.Partitions)
	positions := make([]checkpoint.Position, x.db.Partitions)
	errs := make([]error, x.db.Partitions)
	sem := make(chan struct{}, o.Parallel)
	var wg sync.WaitGroup
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	for p := range x.db.Partitions {
		wg.Add(1)
		go func() {
			defer wg.Done()
			select {
			case sem <- struct{}{}:
			case <-ctx.Done():
				errs[p] = ctx.Err()
				return
			}
			defer func() { <-sem }()
			parts[p], positions[p], errs[p] = x.partition(ctx, p)
			if errs[p] != nil {
				cancel()
				return
			}
			x.done.Add(1)
			x.report(true)
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		for _, e := range errs {
			if e != nil && !errors.Is(e, context.Canceled) {
				return Manifest{}, e
			}
		}
		return Manifest{}, err
	}
	cp := checkpoint.Checkpoint{DB: x.db.Name, Positions: positions}
	x.m.Checkpoint = cp.String()
	x.m.Partitions = parts
	for _, p := range parts {
		x.m.Rows += p.Rows
	}
	x.m.Finished = time.Now().UTC()
	b, err := json.MarshalIndent(x.m, "", "  ")
	if err != nil {
		return Manifest{}, err
	}
	tmp := filepath.Join(o.Dir, ".manifest.json.tmp")
	if err := os.WriteFile(tmp, append(b, '\n'), 0o644); err != nil {
		return Manifest{}, err
	}
	return x.m, os.Rename(tmp, filepath.Join(o.Dir, "manifest.json"))
}

// checkDir refuses a directory that exists and is not empty, or is not a
// directory, or cannot be created; it reports whether the export will
// create it.
func checkDir(dir string) (bool, error) {
	if dir == "" {
		return false, inputErr("no export directory given")
	}
	st, err := os.Stat(dir)
	switch {
	case errors.Is(err, os.ErrNotExist) || errors.Is(err, syscall.ENOTDIR):
		// Created once the export is planned: probe the nearest existing
		// ancestor now, so a refused export leaves nothing behind.
		parent := filepath.Dir(filepath.Clean(dir))
		for {
			st, err := os.Stat(parent)
			if err == nil && st.IsDir() {
				break
			}
			if err == nil || !errors.Is(err, os.ErrNotExist) || parent == filepath.Dir(parent) {
				return false, inputErr("cannot create the export directory %s: %s is not a directory", dir, parent)
			}
			parent = filepath.Dir(parent)
		}
		return true, probe(parent, dir)
	case err != nil:
		return false, inputErr("cannot use the export directory: %v", err)
	case !st.IsDir():
		return false, inputErr("the export directory %s is not a directory", dir)
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		return false, inputErr("cannot read the export directory: %v", err)
	}
	if len(ents) > 0 {
		return false, inputErr("the export directory %s is not empty (it holds %s); export into a new or empty directory", dir, ents[0].Name())
	}
	return false, probe(dir, dir)
}

// probe checks that a file can be created in dir (for the export
// directory want).
func probe(dir, want string) error {
	f, err := os.CreateTemp(dir, ".doppio-export-probe")
	if err != nil {
		return inputErr("cannot write the export directory %s: %v", want, errors.Unwrap(err))
	}
	f.Close()
	return os.Remove(f.Name())
}

// exporter is one planned export.
type exporter struct {
	o      Options
	c      *client.Client
	db     client.Database
	tables []Table
	byName map[string]Table
	since  *checkpoint.Checkpoint
	heads  []scn.SCN // Changes: each partition's leader SCN at the start
	m      Manifest
	limit  *limiter

	rows, bytes atomic.Int64
	done        atomic.Int64
	reportMu    sync.Mutex
	lastReport  time.Time
}

// plan checks the database, tables and checkpoint and reads what the
// export needs before it writes anything.
func plan(ctx context.Context, c *client.Client, o Options) (*exporter, error) {
	x := &exporter{o: o, c: c, byName: map[string]Table{}, limit: newLimiter(o.Throttle)}
	db, err := c.GetDatabase(ctx, o.DB)
	if client.IsNotFound(err) {
		return nil, inputErr("database %q does not exist", o.DB)
	}
	if err != nil {
		return nil, err
	}
	x.db = db
	names := o.Tables
	if len(names) == 0 {
		for _, t := range db.Tables {
			names = append(names, t.Name)
		}
	}
	slices.Sort(names)
	names = slices.Compact(names)
	for _, n := range names {
		if n == "" {
			return nil, inputErr("a table name in the list is empty")
		}
		t, err := c.GetTable(ctx, o.DB, n)
		if client.IsNotFound(err) {
			return nil, inputErr("table %q does not exist in database %q", n, o.DB)
		}
		if err != nil {
			return nil, err
		}
		et := Table{Name: t.Name, Version: t.Version, Key: t.Key, Schema: t.Schema}
		x.tables = append(x.tables, et)
		x.byName[t.Name] = et
		mt := ManifestTable{Name: t.Name, SchemaVersion: t.Version}
		for _, k := range t.Key {
			mt.Key = append(mt.Key, KeyField{Name: k.Name, Type: k.Type})
		}
		x.m.Tables = append(x.m.Tables, mt)
	}
	if len(x.tables) == 0 {
		return nil, inputErr("database %q has no table to export", o.DB)
	}
	x.m.Format, x.m.Database, x.m.Kind, x.m.FileFormat = ManifestFormat, db.Name, Snapshot, o.Format.Name()
	if o.Since == "" {
		return x, nil
	}
	cp, err := checkpoint.Parse(o.Since)
	if err != nil {
		return nil, inputErr("--since is not an export checkpoint (pass the \"checkpoint\" of an earlier export's manifest.json unchanged)")
	}
	if cp.DB != db.Name {
		return nil, inputErr("the checkpoint is of database %q, not %q", cp.DB, db.Name)
	}
	for p := range db.Partitions {
		if _, ok := cp.Get(p); !ok {
			return nil, inputErr("the checkpoint has no position in partition %d (database %s has %d partitions)", p, db.Name, db.Partitions)
		}
	}
	x.since, x.m.Kind, x.m.Since = &cp, Changes, o.Since
	info, err := c.Cluster(ctx)
	if err != nil {
		return nil, err
	}
	x.heads = make([]scn.SCN, db.Partitions)
	known := make([]bool, db.Partitions)
	for _, pi := range info.Partitions {
		if pi.Database != db.Name || pi.Partition < 0 || pi.Partition >= db.Partitions || pi.SCN == "" {
			continue
		}
		s, err := parseSCN(pi.SCN)
		if err != nil {
			return nil, fmt.Errorf("the cluster reports partition %d at SCN %q: %w", pi.Partition, pi.SCN, err)
		}
		x.heads[pi.Partition], known[pi.Partition] = s, true
	}
	if i := slices.Index(known, false); i >= 0 {
		return nil, fmt.Errorf("partition %s/%d has no leader reporting its SCN; try again", db.Name, i)
	}
	return x, nil
}

func parseSCN(s string) (scn.SCN, error) {
	g, q, ok := strings.Cut(s, ":")
	gen, err1 := strconv.ParseUint(g, 10, 64)
	seq, err2 := strconv.ParseUint(q, 10, 64)
	if !ok || err1 != nil || err2 != nil {
		return scn.SCN{}, fmt.Errorf("SCN %q is not generation:sequence", s)
	}
	return scn.SCN{Generation: gen, Sequence: seq}, nil
}

func (x *exporter) report(force bool) {
	if x.o.Progress == nil {
		return
	}
	x.reportMu.Lock()
	defer x.reportMu.Unlock()
	if !force && time.Since(x.lastReport) < x.o.ProgressEvery {
		return
	}
	x.lastReport = time.Now()
	x.o.Progress(Progress{Partitions: x.db.Partitions, PartitionsDone: int(x.done.Load()), Rows: x.rows.Load(), Bytes: x.bytes.Load()})
}

// partFiles are the files of one partition, opened as rows come and
// closed together.
type partFiles struct {
	x     *exporter
	p     int
	files map[string]*file
}

type file struct {
	f    *os.File
	bw   *bufio.Writer
	sum  hashCounter
	fw   FileWriter
	rel  string
	rows int64
}

type hashCounter struct {
	h interface {
		io.Writer
		Sum([]byte) []byte
	}
	n int64
}

func (h *hashCounter) Write(b []byte) (int, error) {
	h.n += int64(len(b))
	return h.h.Write(b)
}

// open creates every selected table's file of the partition, so an
// export lists each (table, partition), empty ones included.
func (pf *partFiles) open() error {
	pf.files = map[string]*file{}
	for _, t := range pf.x.tables {
		rel := fmt.Sprintf("%s/p-%05d.%s", t.Name, pf.p, pf.x.o.Format.Name())
		f, err := os.Create(filepath.Join(pf.x.o.Dir, filepath.FromSlash(rel)))
		if err != nil {
			return err
		}
		fl := &file{f: f, rel: rel, sum: hashCounter{h: sha256.New()}}
		fl.bw = bufio.NewWriterSize(io.MultiWriter(f, &fl.sum), 256<<10)
		if fl.fw, err = pf.x.o.Format.NewFile(fl.bw, t, pf.x.m.Kind); err != nil {
			f.Close()
			return fmt.Errorf("table %s: %w", t.Name, err)
		}
		pf.files[t.Name] = fl
	}
	return nil
}

func (pf *partFiles) write(table string, r Row) error {
	fl, ok := pf.files[table]
	if !ok {
		return fmt.Errorf("partition %d sent a row of table %q, which is not exported", pf.p, table)
	}
	fl.rows++
	if err := fl.fw.Write(r); err != nil {
		return fmt.Errorf("%s: %w", fl.rel, err)
	}
	return nil
}

// close finishes every file and describes them; abort removes them.
func (pf *partFiles) close(mp *ManifestPartition) error {
	for _, t := range pf.x.tables {
		fl := pf.files[t.Name]
		err := fl.fw.Close()
		if err == nil {
			err = fl.bw.Flush()
		}
		if err == nil {
			err = fl.f.Sync()
		}
		if cerr := fl.f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return fmt.Errorf("%s: %w", fl.rel, err)
		}
		mp.Files = append(mp.Files, ManifestFile{Table: t.Name, Path: fl.rel, Rows: fl.rows, Bytes: fl.sum.n, SHA256: hex.EncodeToString(fl.sum.h.Sum(nil))})
		mp.Rows += fl.rows
	}
	return nil
}

func (pf *partFiles) abort() {
	for _, fl := range pf.files {
		fl.f.Close()
		os.Remove(fl.f.Name())
	}
}

// partition exports partition p and returns its manifest entry and where
// the next change export of it starts.
func (x *exporter) partition(ctx context.Context, p int) (ManifestPartition, checkpoint.Position, error) {
	mp := ManifestPartition{Partition: p}
	pf := &partFiles{x: x, p: p}
	if err := pf.open(); err != nil {
		pf.abort()
		return mp, checkpoint.Position{}, err
	}
	var pos checkpoint.Position
	var err error
	if x.since == nil {
		pos, mp.Source, err = x.snapshot(ctx, p, pf)
	} else {
		from, _ := x.since.Get(p)
		mp.SinceSCN = from.SCN.String()
		pos, mp.Source, err = x.changes(ctx, from, x.heads[p], pf)
	}
	if err == nil {
		err = pf.close(&mp)
	}
	if err != nil {
		pf.abort()
		return mp, pos, fmt.Errorf("partition %d: %w", p, err)
	}
	mp.SCN = pos.SCN.String()
	return mp, pos, nil
}

func (x *exporter) tableNames() []string {
	names := make([]string, len(x.tables))
	for i, t := range x.tables {
		names[i] = t.Name
	}
	return names
}

// snapshot writes partition p's documents as of one SCN: the bootstrap of
// a change stream, up to its first checkpoint.
func (x *exporter) snapshot(ctx context.Context, p int, pf *partFiles) (checkpoint.Position, string, error) {
	s, err := changes.Open(ctx, x.c, x.db.Name, changes.Options{Tables: x.tableNames(), Partitions: []int{p}, Bootstrap: true})
	if err != nil {
		return checkpoint.Position{}, "", err
	}
	defer s.Close()
	source := sourceOf(s.Sources(), p)
	for {
		l, err := s.Next()
		if err != nil {
			return checkpoint.Position{}, source, fmt.Errorf("the snapshot stream ended early: %w", err)
		}
		if err := x.limit.wait(ctx, len(l.Raw)+1); err != nil {
			return checkpoint.Position{}, source, err
		}
		x.bytes.Add(int64(len(l.Raw) + 1))
		if l.Checkpoint != "" {
			pos, err := positionOf(l.Checkpoint, p)
			return pos, source, err
		}
		if l.Event == nil {
			continue
		}
		if err := x.emit(pf, l.Raw); err != nil {
			return checkpoint.Position{}, source, err
		}
	}
}

// changes writes partition's changes after from up to and including the
// transaction at head.
func (x *exporter) changes(ctx context.Context, from checkpoint.Position, head scn.SCN, pf *partFiles) (checkpoint.Position, string, error) {
	pos := from
	if reached(pos, head) {
		return pos, "", nil
	}
	cp := checkpoint.Checkpoint{DB: x.db.Name, Positions: []checkpoint.Position{from}}
	s, err := changes.Open(ctx, x.c, x.db.Name, changes.Options{Tables: x.tableNames(), Partitions: []int{from.Partition}, From: cp.String()})
	if err != nil {
		var ce *client.Error
		if errors.As(err, &ce) && ce.Status == http.StatusGone {
			return pos, "", inputErr("partition %d's change log cannot continue from the checkpoint: %s (export a snapshot again)", from.Partition, ce.Detail)
		}
		return pos, "", err
	}
	defer s.Close()
	source := sourceOf(s.Sources(), from.Partition)
	for {
		l, err := s.Next()
		if err != nil {
			return pos, source, fmt.Errorf("the change stream ended early: %w", err)
		}
		if l.Event != nil {
			at, err := parseSCN(l.Event.SCN)
			if err != nil {
				return pos, source, err
			}
			if at.Sequence > head.Sequence {
				return pos, source, nil // after the export's point: the next one's
			}
			if err := x.limit.wait(ctx, len(l.Raw)+1); err != nil {
				return pos, source, err
			}
			x.bytes.Add(int64(len(l.Raw) + 1))
			if err := x.emit(pf, l.Raw); err != nil {
				return pos, source, err
			}
		}
		if l.Checkpoint != "" {
			if pos, err = positionOf(l.Checkpoint, from.Partition); err != nil {
				return pos, source, err
			}
			if reached(pos, head) {
				return pos, source, nil
			}
		}
	}
}

// reached reports whether every change up to head has been read at pos.
func reached(pos checkpoint.Position, head scn.SCN) bool {
	return pos.SCN.Sequence > head.Sequence || pos.SCN.Sequence == head.Sequence && pos.Part == 0
}

// emit decodes one event line (its key's numbers exactly) and writes its
// row.
func (x *exporter) emit(pf *partFiles, raw []byte) error {
	var ev struct {
		SCN   string            `json:"scn"`
		Table string            `json:"table"`
		Key   []json.RawMessage `json:"key"`
		Op    string            `json:"op"`
		After json.RawMessage   `json:"after"`
		TS    int64             `json:"ts"`
	}
	if err := json.Unmarshal(raw, &ev); err != nil {
		return fmt.Errorf("bad event %q: %w", raw, err)
	}
	t, ok := x.byName[ev.Table]
	if !ok {
		return fmt.Errorf("an event of table %q, which is not exported", ev.Table)
	}
	if ev.Op == "replace" {
		// The loaded documents are no events: no row says what they are.
		return fmt.Errorf("table %s was replaced by a bulk load at SCN %s: export a snapshot instead", t.Name, ev.SCN)
	}
	if len(ev.Key) != len(t.Key) {
		return fmt.Errorf("an event of table %s has %d key parts, the table %d", t.Name, len(ev.Key), len(t.Key))
	}
	r := Row{Op: ev.Op, SCN: ev.SCN, Mtime: ev.TS, Key: make([]any, len(ev.Key))}
	for i, k := range ev.Key {
		if t.Key[i].Type == "string" {
			var s string
			if err := json.Unmarshal(k, &s); err != nil {
				return fmt.Errorf("key part %s of %s is %s, not a string", t.Key[i].Name, t.Name, k)
			}
			r.Key[i] = s
			continue
		}
		n, err := strconv.ParseInt(string(k), 10, 64)
		if err != nil {
			return fmt.Errorf("key part %s of %s is %q, not a number", t.Key[i].Name, t.Name, k)
		}
		r.Key[i] = n
	}
	if !bytes.Equal(ev.After, []byte("null")) {
		r.Doc = ev.After
	}
	if err := pf.write(t.Name, r); err != nil {
		return err
	}
	x.rows.Add(1)
	x.report(false)
	return nil
}

func positionOf(cp string, p int) (checkpoint.Position, error) {
	c, err := checkpoint.Parse(cp)
	if err != nil {
		return checkpoint.Position{}, fmt.Errorf("the server sent a bad checkpoint: %w", err)
	}
	pos, ok := c.Get(p)
	if !ok {
		return pos, fmt.Errorf("the server's checkpoint has no position in partition %d", p)
	}
	return pos, nil
}

// sourceOf picks partition p's "node/role" out of a stream's sources.
func sourceOf(sources string, p int) string {
	prefix := strconv.Itoa(p) + "="
	for _, s := range strings.Split(sources, ",") {
		if v, ok := strings.CutPrefix(s, prefix); ok {
			return v
		}
	}
	return ""
}

// limiter spaces reads so that they average at most rate bytes a second.
type limiter struct {
	rate float64
	mu   sync.Mutex
	next time.Time
}

func newLimiter(rate int64) *limiter { return &limiter{rate: float64(rate)} }

func (l *limiter) wait(ctx context.Context, n int) error {
	if l.rate <= 0 {
		return nil
	}
	l.mu.Lock()
	now := time.Now()
	if l.next.Before(now) {
		l.next = now
	}
	at := l.next
	l.next = l.next.Add(time.Duration(float64(n) / l.rate * float64(time.Second)))
	l.mu.Unlock()
	if d := time.Until(at); d > 0 {
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-t.C:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}
