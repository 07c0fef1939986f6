package partition

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/doppio-db/doppio/internal/keys"
	"github.com/doppio-db/doppio/internal/problem"
	"github.com/doppio-db/doppio/internal/schema"
	"github.com/doppio-db/doppio/internal/storage"
)

// A bulk load reaches a partition as chunks: each LoadChunk call is one
// write set, evaluated like a multi-document write (latches, pre-images,
// index maintenance), replicated and applied on every replica as one
// ingested sstable. The partition records, in its replicated metadata, how
// far each load has got (its LoadMark); a chunk names the mark it starts
// from and applies only if that is still the recorded one, checked at
// evaluation and again, deterministically, at apply, so two drivers
// racing through a leader change never apply a chunk twice.

// LoadMark is how far a partition has applied one load's file.
type LoadMark struct {
	Load    string // the load's ID
	Offset  uint64 // bytes of the partition file applied, from its start
	Records uint64 // records applied
	Done    bool   // the partition's file is wholly applied
}

func (m LoadMark) String() string {
	s := fmt.Sprintf("load %q at offset %d, %d records", m.Load, m.Offset, m.Records)
	if m.Done {
		s += ", done"
	}
	return s
}

// LoadDoc is one document of a chunk: Key is keys.EncodeTuple of its whole
// key, Avro its encoding at the chunk's schema version.
type LoadDoc struct{ Key, Avro []byte }

// LoadStep is what a chunk's write set carries of its load: the mark it
// applies from, and the mark it records.
type LoadStep struct{ From, To LoadMark }

// metaLoadPrefix is the partition metadata key prefix of the load marks.
const metaLoadPrefix = "load/"

func (p *LoadStep) appendTo(b []byte) []byte {
	b = appendBytes(b, []byte(p.From.Load))
	for _, m := range []LoadMark{p.From, p.To} {
		b = binary.AppendUvarint(b, m.Offset)
		b = binary.AppendUvarint(b, m.Records)
		b = append(b, boolByte(m.Done))
	}
	return b
}

func (d *decoder) loadStep() *LoadStep {
	load := string(d.bytes())
	s := &LoadStep{}
	for _, m := range []*LoadMark{&s.From, &s.To} {
		m.Load, m.Offset, m.Records = load, d.uvarint(), d.uvarint()
		switch d.byte() {
		case 0:
		case 1:
			m.Done = true
		default:
			d.fail()
		}
	}
	return s
}

func boolByte(v bool) byte {
	if v {
		return 1
	}
	return 0
}

func encodeLoadMark(m LoadMark) []byte {
	b := binary.AppendUvarint(nil, m.Offset)
	b = binary.AppendUvarint(b, m.Records)
	return append(b, boolByte(m.Done))
}

// ReadLoadMark returns the mark partition p of e records for load: the
// zero mark naming load when none is.
func ReadLoadMark(e *storage.Engine, p keys.Partition, load string) (LoadMark, error) {
	v, err := e.Get(p.Meta(metaLoadPrefix + load))
	if errors.Is(err, storage.ErrNotFound) {
		return LoadMark{Load: load}, nil
	}
	if err != nil {
		return LoadMark{}, err
	}
	d := decoder{b: v}
	m := LoadMark{Load: load, Offset: d.uvarint(), Records: d.uvarint(), Done: d.byte() == 1}
	if d.err != nil || len(d.b) != 0 {
		return LoadMark{}, fmt.Errorf("partition %x: corrupt mark of load %q", []byte(p), load)
	}
	return m, nil
}

// Refusal is the error a chunk gets when the partition's mark for its load
// is recorded not its From: another chunk got there first.
func (p *LoadStep) Refusal(recorded LoadMark) error {
	return problem.New(problem.Conflict, "the chunk applies from %s, but the partition has recorded %s", p.From, recorded)
}

// LoadMark returns the mark recorded for load as applied on this replica.
func (r *Replica) LoadMark(load string) (LoadMark, error) {
	if load == "" {
		return LoadMark{}, problem.New(problem.Malformed, "no load ID")
	}
	return ReadLoadMark(r.engine, r.prefix, load)
}

// A replace load stages its chunks in a table of their own, StagingTable
// (documents and index entries, invisible to reads and to the change
// stream), and ends with a swap: one write set that deletes the table's
// documents and index entries and renames the staged ones into it, so a
// reader of the partition sees the old contents or the new, never a mix.

// stagingMark separates a staged replace's table name from its load: its
// '@' keeps the staging out of the change stream, as a derived table's
// versions are (schema.IsVersionTable).
const stagingMark = "@load-"

// StagingTable is the stored table a replace load of table stages its
// documents in until the swap.
func StagingTable(table, load string) string {
	return table + stagingMark + load[:min(len(load), 16)]
}

// ReplaceChunk is LoadChunk for a replace load: docs go to the staging
// table (StagingTable) rather than table; the chunk whose to mark is done
// carries no documents and is the swap, which replaces table's documents
// and index entries in the partition with the staged ones at one SCN,
// recorded in the change log as one OpReplace write. The swap takes the
// partition's epoch exclusively, as Drop does: a write to table evaluated
// before it is applied before it, and is replaced; one evaluated after it
// applies on the loaded documents.
func (r *Replica) ReplaceChunk(ctx context.Context, table string, version uint32, from, to LoadMark, docs []LoadDoc) (SCN, error) {
	if to.Done {
		if len(docs) != 0 || to.Records != from.Records {
			return SCN{}, problem.New(problem.Malformed, "a replace's swap carries no documents (from %s to %s, %d documents)", from, to, len(docs))
		}
		return r.swap(ctx, table, from, to)
	}
	return r.loadChunk(ctx, table, version, from, to, docs, true)
}

// LoadChunk applies docs to table as one write set at one SCN, if and only
// if the partition's recorded mark for from.Load equals from (the zero
// mark with only Load set when none is recorded); then the recorded mark
// becomes to. Otherwise it changes nothing and returns a *problem.Error of
// kind Conflict naming the recorded mark. Leader only (the usual
// not-leader error otherwise).
//
// A loaded document replaces the one with its key (insert or update), is
// stored at schema version version, and is indexed as a put would be. The
// write is background work, charged to no one's quota. Two documents with
// one key in a chunk: the later wins.
func (r *Replica) LoadChunk(ctx context.Context, table string, version uint32, from, to LoadMark, docs []LoadDoc) (SCN, error) {
	return r.loadChunk(ctx, table, version, from, to, docs, false)
}

// checkMarks refuses a chunk's marks that do not name one load or do not
// move forward from a mark that is not done.
func checkMarks(from, to LoadMark) error {
	if from.Load == "" || to.Load != from.Load {
		return problem.New(problem.Malformed, "a chunk's marks must name one load, got %q and %q", from.Load, to.Load)
	}
	if from.Done {
		return problem.New(problem.Malformed, "no chunk follows a done mark (%s)", from)
	}
	if to.Offset < from.Offset || to.Records < from.Records {
		return problem.New(problem.Malformed, "a chunk moves forward, not from %s to %s", from, to)
	}
	return nil
}

// startChunk checks what every chunk needs before it is evaluated: marks
// that fit, this replica leading, no restore under way, and the
// partition's mark at from.
func (r *Replica) startChunk(ctx context.Context, from, to LoadMark) (*LoadStep, error) {
	if err := checkMarks(from, to); err != nil {
		return nil, err
	}
	if err := r.repl.Lead(ctx); err != nil {
		return nil, err
	}
	if err := r.refuseWhileRestoring(); err != nil {
		return nil, err
	}
	step := &LoadStep{From: from, To: to}
	if recorded, err := r.LoadMark(from.Load); err != nil {
		return nil, err
	} else if recorded != from {
		return nil, step.Refusal(recorded)
	}
	return step, nil
}

func (r *Replica) loadChunk(ctx context.Context, table string, version uint32, from, to LoadMark, docs []LoadDoc, staged bool) (SCN, error) {
	step, err := r.startChunk(ctx, from, to)
	if err != nil {
		return SCN{}, err
	}
	r.idx.epoch.RLock()
	defer r.idx.epoch.RUnlock()
	t := r.idx.tables[table]
	if t == nil {
		return SCN{}, problem.New(problem.NotFound, "table %s is not known to partition %d of %s", table, r.ID, r.DB)
	}
	if version == 0 || int(version) > t.Latest() {
		return SCN{}, problem.Field(problem.Conflict, "version", "table %s has schema versions 1 to %d, not %d", table, t.Latest(), version)
	}
	if staged {
		t = t.StoredAs(StagingTable(table, from.Load))
		table = t.Def.Name
	}
	groups, err := r.loadGroups(t, docs)
	if err != nil {
		return SCN{}, err
	}
	latched := make(map[string][]string, len(groups))
	for _, g := range groups {
		for _, d := range g.docs {
			latched[string(g.key)] = append(latched[string(g.key)], string(r.prefix.Document(table, d.Key)))
		}
	}
	release, err := r.latch.acquireGroups(ctx, latched)
	if err != nil {
		return SCN{}, problem.New(problem.Unavailable, "timed out waiting for document groups: %v", err)
	}
	held := true
	defer func() {
		if held {
			release()
		}
	}()
	ws := &WriteSet{Mtime: time.Now().UnixMilli(), Load: step, Ingest: true}
	var pendingPuts []map[string]int
	for _, g := range groups {
		ev := evaluation{r: r, now: ws.Mtime, docs: make(map[string]*pending, len(g.docs)), group: g.key}
		for _, d := range g.docs {
			if err := ev.upsert(t, version, d); err != nil {
				return SCN{}, err
			}
		}
		part, err := ev.writeSet()
		if err != nil {
			return SCN{}, err
		}
		ws.Writes = append(ws.Writes, part.Writes...)
		ws.Index.Puts = append(ws.Index.Puts, part.Index.Puts...)
		ws.Index.Deletes = append(ws.Index.Deletes, part.Index.Deletes...)
		pendingPuts = append(pendingPuts, ev.pendingPuts)
	}
	scn, later, err := r.replicate(ctx, ws, "chunk", release)
	if err != nil {
		held = !later
		return SCN{}, err
	}
	if !staged {
		// A staging table is no partition's table: its pending text
		// entries are folded once renamed, by the next writes' folds.
		for i, g := range groups {
			r.notePending(table, g.key, pendingPuts[i][table])
		}
	}
	return scn, nil
}

// swap is a replace load's last step in the partition: the staged
// documents become table's, at one SCN.
func (r *Replica) swap(ctx context.Context, table string, from, to LoadMark) (SCN, error) {
	step, err := r.startChunk(ctx, from, to)
	if err != nil {
		return SCN{}, err
	}
	r.idx.epoch.Lock()
	defer r.idx.epoch.Unlock()
	if r.idx.tables[table] == nil {
		return SCN{}, problem.New(problem.NotFound, "table %s is not known to partition %d of %s", table, r.ID, r.DB)
	}
	ws := &WriteSet{Mtime: time.Now().UnixMilli(), Load: step, Ingest: true, Writes: []Write{{Table: table, Op: OpReplace}}}
	for _, start := range [][]byte{r.prefix.Table(table), r.prefix.IndexTable(table)} {
		ws.Index.Ranges = append(ws.Index.Ranges, KeyRange{Start: start, End: keys.PrefixEnd(start)})
	}
	scn, _, err := r.replicate(ctx, ws, "swap", func() {})
	return scn, err
}

// DiscardStaging deletes what a replace load of table that ended without
// its swap staged in the partition (StagingTable), and resets the load's
// mark to the start, so a later run of the load stages afresh. Like a
// chunk, it applies only if the partition's mark is still from, checked
// at evaluation and again at apply: a run of the load that moved the mark
// meanwhile keeps its staging and this is refused with a Conflict. A
// mark at the start or done has nothing staged (Malformed). Leader only.
func (r *Replica) DiscardStaging(ctx context.Context, table string, from LoadMark) (SCN, error) {
	if from.Offset == 0 {
		return SCN{}, problem.New(problem.Malformed, "nothing is staged at %s", from)
	}
	// The reset mark is not "forward", so startChunk's checks are made
	// against a to that is: from itself.
	step, err := r.startChunk(ctx, from, from)
	if err != nil {
		return SCN{}, err
	}
	step.To = LoadMark{Load: from.Load}
	ws := &WriteSet{Mtime: time.Now().UnixMilli(), Load: step, Index: r.tableRanges(StagingTable(table, from.Load))}
	scn, _, err := r.replicate(ctx, ws, "discard", func() {})
	return scn, err
}

// replaced returns the table ws's swap replaces, if ws is one.
func (ws *WriteSet) replaced() (string, bool) {
	if ws.Load == nil || !ws.Load.To.Done || len(ws.Writes) != 1 || ws.Writes[0].Op != OpReplace {
		return "", false
	}
	return ws.Writes[0].Table, true
}

// applyReplace applies a swap at scn: Apply's deletions of the table's
// documents and index entries, then the staged ones renamed into it and
// the staging deleted, in one batch made durable with extra. It reads
// the staging from e, which every chunk before the swap has been
// ingested into on every replica alike, so the batch is the same bytes
// everywhere.
func applyReplace(e *storage.Engine, p keys.Partition, ws *WriteSet, encoded []byte, scn SCN, table string, extra []IndexEntry) error {
	b := e.NewBatch()
	Apply(b, p, ws, encoded, scn)
	staging := StagingTable(table, ws.Load.To.Load)
	for _, sp := range [][2][]byte{{p.Table(staging), p.Table(table)}, {p.IndexTable(staging), p.IndexTable(table)}} {
		from, into := sp[0], sp[1]
		it, err := e.NewIter(from, keys.PrefixEnd(from))
		if err != nil {
			b.Close()
			return err
		}
		for ok := it.First(); ok; ok = it.Next() {
			k := append(slices.Clip(into), it.Key()[len(from):]...)
			b.Set(k, slices.Clone(it.Value()))
		}
		err = errors.Join(it.Error(), it.Close())
		if err != nil {
			b.Close()
			return err
		}
		b.DeleteRange(from, keys.PrefixEnd(from))
	}
	auto := p.AutoIncrement(staging, nil)
	b.DeleteRange(auto, keys.PrefixEnd(auto))
	for _, x := range extra {
		b.Set(x.Key, x.Value)
	}
	return e.Commit(b)
}

// loadGroup is the documents of a chunk in one document group.
type loadGroup struct {
	key  []byte // encoded partition key
	docs []LoadDoc
}

// loadGroups checks every document's key and Avro against t and sorts
// them into their document groups, in key order.
func (r *Replica) loadGroups(t *schema.Table, docs []LoadDoc) ([]loadGroup, error) {
	byGroup := map[string]*loadGroup{}
	for i, d := range docs {
		tuple, err := keys.DecodeTuple(d.Key)
		if err == nil && len(tuple) != t.Arity() {
			err = fmt.Errorf("table %s has %d key parts, the key has %d", t.Def.Name, t.Arity(), len(tuple))
		}
		for j := 0; err == nil && j < len(tuple); j++ {
			if _, isString := tuple[j].(string); isString != (t.Def.Key[j].Type == schema.KeyString) {
				err = fmt.Errorf("key part %q has the wrong type", t.Def.Key[j].Name)
			}
		}
		if err != nil {
			return nil, problem.New(problem.Malformed, "document %d of the chunk: %v", i, err)
		}
		if len(d.Avro) > r.limits.MaxDocumentBytes {
			return nil, problem.New(problem.TooLarge, "document %d of the chunk (%s) has %d bytes, more than the limit of %d", i, tuple, len(d.Avro), r.limits.MaxDocumentBytes)
		}
		g, err := keys.EncodeTuple(tuple[:1])
		if err != nil {
			return nil, problem.New(problem.Malformed, "document %d of the chunk: %v", i, err)
		}
		lg := byGroup[string(g)]
		if lg == nil {
			lg = &loadGroup{key: g}
			byGroup[string(g)] = lg
		}
		lg.docs = append(lg.docs, d)
	}
	out := make([]loadGroup, 0, len(byGroup))
	for _, g := range byGroup {
		out = append(out, *g)
	}
	slices.SortFunc(out, func(a, b loadGroup) int { return bytes.Compare(a.key, b.key) })
	return out, nil
}

// upsert is a put of a loaded document, kept at the chunk's version: it
// reads the document's current state for its pre-image and indexes the
// new one as a put would.
func (ev *evaluation) upsert(t *schema.Table, version uint32, d LoadDoc) error {
	doc, err := t.Decode(d.Avro, int(version), t.Latest())
	if err != nil {
		tuple, _ := keys.DecodeTuple(d.Key)
		return problem.New(problem.Invalid, "document %s of %s is not Avro of schema version %d: %v", tuple, t.Def.Name, version, err)
	}
	p, err := ev.load(t.Def.Name, d.Key)
	if err != nil {
		return err
	}
	p.cur = &Record{Version: version, Mtime: ev.now, Avro: d.Avro}
	p.schema, p.doc = t, doc
	return nil
}

// applies reports whether a chunk applies on a partition that records
// recorded for its load.
func (p *LoadStep) applies(recorded LoadMark) bool { return recorded == p.From }

// Applies reports whether ws applies on partition p of e at apply time:
// any write set but a chunk whose From is no longer the recorded mark.
// marks holds the marks recorded by chunks applied since e was last
// written (a replicator applying several entries before committing
// them); Applies records there ws's To when it applies, and the mark
// that refused it when it does not.
func Applies(e *storage.Engine, p keys.Partition, ws *WriteSet, marks map[string]LoadMark) (bool, error) {
	if ws.Load == nil {
		return true, nil
	}
	recorded, ok := marks[ws.Load.From.Load]
	if !ok {
		var err error
		if recorded, err = ReadLoadMark(e, p, ws.Load.From.Load); err != nil {
			return false, err
		}
	}
	if !ws.Load.applies(recorded) {
		marks[ws.Load.From.Load] = recorded
		return false, nil
	}
	marks[ws.Load.From.Load] = ws.Load.To
	return true, nil
}

// ApplyIngest applies ws at scn as Apply would, as sstables ingested into
// e (storage.Engine.IngestBatch): after a crash either all of it is in or
// none is. extra are the replicator's own points to hold with it (Raft's
// applied state), so that what is applied and where the replica resumes
// never disagree.
func ApplyIngest(e *storage.Engine, p keys.Partition, ws *WriteSet, encoded []byte, scn SCN, extra ...IndexEntry) error {
	if table, ok := ws.replaced(); ok {
		// Range deletions are not ingested: a swap is one batch.
		return applyReplace(e, p, ws, encoded, scn, table, extra)
	}
	b := e.NewBatch()
	Apply(b, p, ws, encoded, scn)
	for _, x := range extra {
		b.Set(x.Key, x.Value)
	}
	if !ws.Ingest {
		// A load's write set that asks for no ingestion (a discarded
		// staging: range deletions) is a batch.
		return e.Commit(b)
	}
	// One table per section of the partition (documents, index, log,
	// metadata, Raft): each spans only its section, so a table of new
	// documents can go below the tables it does not overlap.
	section := func(key []byte) int { return int(key[len(p)]) }
	return e.IngestBatch(context.Background(), b, "load-"+hex.EncodeToString(p), section)
}
