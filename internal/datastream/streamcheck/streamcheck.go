// Package streamcheck judges what a Kafka consumer of a datastream
// receives against the transactions a test committed: it drops
// redeliveries the way the datastream tells consumers to (by SCN), and
// checks that every transaction arrived exactly once after that, in SCN
// order per document group, with its boundaries. Tests only.
package streamcheck

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/doppio-db/doppio/internal/datastream"
	"github.com/doppio-db/doppio/internal/keys"
	"github.com/doppio-db/doppio/internal/partition"
)

// Txn is a committed transaction as its writer knows it.
type Txn struct {
	Group string
	SCN   partition.SCN
	Ops   []Op
}

// Op is one write of a transaction, on document (Group, ID) of Table.
type Op struct {
	Table  string
	ID     int64
	Delete bool
}

// Event is one consumed record, as the checks need it.
type Event struct {
	Topic     string
	KPart     int32 // Kafka partition
	Group     string
	Partition int // Doppio partition
	SCN       partition.SCN
	Index     int
	End       bool
	Table     string
	Op        string
	Version   string
	Value     []byte
}

func header(r *kgo.Record, k string) (string, bool) {
	for _, h := range r.Headers {
		if h.Key == k {
			return string(h.Value), true
		}
	}
	return "", false
}

// FromRecord reads a record's doppio-* headers.
func FromRecord(r *kgo.Record) (Event, error) {
	at := fmt.Sprintf("record at %s/%d@%d", r.Topic, r.Partition, r.Offset)
	scnText, _ := header(r, datastream.HeaderSCN)
	scn, err := partition.ParseSCN(scnText)
	if err != nil {
		return Event{}, fmt.Errorf("%s: bad %s header %q", at, datastream.HeaderSCN, scnText)
	}
	ps, _ := header(r, datastream.HeaderPartition)
	p, err := strconv.Atoi(ps)
	if err != nil {
		return Event{}, fmt.Errorf("%s: bad %s header %q", at, datastream.HeaderPartition, ps)
	}
	is, _ := header(r, datastream.HeaderTxnIndex)
	idx, err := strconv.Atoi(is)
	if err != nil {
		return Event{}, fmt.Errorf("%s: bad %s header %q", at, datastream.HeaderTxnIndex, is)
	}
	_, end := header(r, datastream.HeaderTxnEnd)
	table, _ := header(r, datastream.HeaderTable)
	op, _ := header(r, datastream.HeaderOp)
	version, _ := header(r, datastream.HeaderSchemaVersion)
	return Event{Topic: r.Topic, KPart: r.Partition, Group: string(r.Key), Partition: p, SCN: scn, Index: idx, End: end,
		Table: table, Op: op, Version: version, Value: r.Value}, nil
}

// Consumer reads topics from their start into memory until the test ends.
type Consumer struct {
	t      testing.TB
	mu     sync.Mutex
	events []Event
	err    error
	cancel context.CancelFunc
	done   chan struct{}
}

// Consume starts a consumer of topics on the broker at addr.
func Consume(t testing.TB, addr string, topics ...string) *Consumer {
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ConsumeTopics(topics...),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.MetadataMinAge(100*time.Millisecond), kgo.MetadataMaxAge(time.Second),
		kgo.FetchMaxWait(200*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	c := &Consumer{t: t, cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(c.done)
		defer cl.Close()
		for ctx.Err() == nil {
			fs := cl.PollFetches(ctx)
			var got []Event
			var bad error
			fs.EachRecord(func(r *kgo.Record) {
				e, err := FromRecord(r)
				if err != nil && bad == nil {
					bad = err
				}
				got = append(got, e)
			})
			c.mu.Lock()
			c.events = append(c.events, got...)
			if c.err == nil {
				c.err = bad
			}
			c.mu.Unlock()
		}
	}()
	t.Cleanup(c.Stop)
	return c
}

// Stop ends the consumer.
func (c *Consumer) Stop() {
	c.cancel()
	<-c.done
}

// Events returns what was consumed so far, in consumption order (Kafka
// order per topic partition).
func (c *Consumer) Events() []Event {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err != nil {
		c.t.Fatal(c.err)
	}
	return slices.Clone(c.events)
}

// WaitFor polls cond over the events consumed until it holds or d passes.
func (c *Consumer) WaitFor(d time.Duration, what string, cond func([]Event) (bool, string)) []Event {
	c.t.Helper()
	deadline := time.Now().Add(d)
	for {
		evs := c.Events()
		ok, state := cond(evs)
		if ok {
			return evs
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("%s: not within %v: %s", what, d, state)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// Delivery is what a consumer that drops redeliveries by SCN sees: per
// document group, the distinct events in Kafka order.
type Delivery struct {
	Groups map[string][]Event
	Dups   int // redelivered records dropped
}

// Dedupe applies the consumer rule the datastream promises to make
// sufficient: per (Kafka topic partition, Doppio partition), a record
// whose (SCN sequence, index in its transaction) is not above the last
// one kept is a redelivery. It fails on a record that repeats nothing
// delivered before — one that overtook an earlier record.
func Dedupe(evs []Event) (Delivery, error) {
	type stream struct {
		topic string
		kpart int32
		part  int
	}
	type pos struct {
		seq uint64
		idx int
	}
	type id struct {
		part int
		pos
	}
	last := map[stream]pos{}
	seen := map[id]bool{}
	d := Delivery{Groups: map[string][]Event{}}
	for _, e := range evs {
		s := stream{e.Topic, e.KPart, e.Partition}
		p := pos{e.SCN.Sequence, e.Index}
		l, ok := last[s]
		if ok && (p.seq < l.seq || (p.seq == l.seq && p.idx <= l.idx)) {
			if !seen[id{e.Partition, p}] {
				return d, fmt.Errorf("record %s #%d of partition %d (group %s) arrived on %s/%d after %d #%d and was not delivered before: out of order",
					e.SCN, e.Index, e.Partition, e.Group, e.Topic, e.KPart, l.seq, l.idx)
			}
			d.Dups++
			continue
		}
		last[s] = p
		seen[id{e.Partition, p}] = true
		d.Groups[e.Group] = append(d.Groups[e.Group], e)
	}
	return d, nil
}

// want is an event a committed transaction must produce.
type want struct {
	scn   partition.SCN
	index int
	table string
	del   bool
	end   bool
}

// streamKey is what a consumer can order by: the document group, and with
// per-table topics the table too (a transaction's events then spread over
// topics, ordered within each).
func streamKey(group, table string, perTable bool) string {
	if perTable {
		return group + "|" + table
	}
	return group
}

// wanted is, per stream key, the events txns must produce in order.
func wanted(txns []Txn, perTable bool) map[string][]want {
	sorted := slices.Clone(txns)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].SCN.Sequence < sorted[j].SCN.Sequence })
	out := map[string][]want{}
	for _, tx := range sorted {
		for k, o := range tx.Ops {
			key := streamKey(tx.Group, o.Table, perTable)
			out[key] = append(out[key], want{scn: tx.SCN, index: k, table: o.Table, del: o.Delete, end: k == len(tx.Ops)-1})
		}
	}
	return out
}

// Check compares the deduplicated delivery with the committed
// transactions: every event exactly once, in SCN order per group (per
// group and table with per-table topics), at its index in its
// transaction, with its table, operation and boundary. With exact,
// nothing else may be delivered; otherwise events of other transactions
// (commits whose acknowledgement was lost) may be, in order.
func Check(d Delivery, txns []Txn, exact, perTable bool) error {
	ws := wanted(txns, perTable)
	acked := map[string]bool{}
	for _, tx := range txns {
		acked[tx.Group+"@"+tx.SCN.String()] = true
	}
	got := map[string][]Event{}
	for g, evs := range d.Groups {
		for _, e := range evs {
			if !exact && !acked[g+"@"+e.SCN.String()] {
				continue
			}
			key := streamKey(g, e.Table, perTable)
			got[key] = append(got[key], e)
		}
	}
	for key, w := range ws {
		g := got[key]
		for i, x := range w {
			if i >= len(g) {
				return fmt.Errorf("%s: transaction %s event %d (%s) never delivered (%d of %d events delivered)", key, x.scn, x.index, x.table, len(g), len(w))
			}
			e := g[i]
			if e.SCN != x.scn || e.Index != x.index || e.Table != x.table || (e.Op == "delete") != x.del || e.End != x.end {
				return fmt.Errorf("%s: delivered %s #%d %s %s end=%v where %s #%d %s delete=%v end=%v was due",
					key, e.SCN, e.Index, e.Table, e.Op, e.End, x.scn, x.index, x.table, x.del, x.end)
			}
		}
		if len(g) > len(w) {
			return fmt.Errorf("%s: %d events delivered beyond its %d (next: %s)", key, len(g)-len(w), len(w), g[len(w)].SCN)
		}
	}
	for key := range got {
		if _, ok := ws[key]; !ok {
			return fmt.Errorf("%s: delivered but never written", key)
		}
	}
	return nil
}

// Delivered reports whether the consumed events hold every transaction of
// txns (and nothing out of order), and what is wrong otherwise.
func Delivered(evs []Event, txns []Txn, perTable bool) (bool, string) {
	d, err := Dedupe(evs)
	if err != nil {
		return false, err.Error()
	}
	if err := Check(d, txns, false, perTable); err != nil {
		return false, fmt.Sprintf("%d records consumed, %d redelivered: %v", len(evs), d.Dups, err)
	}
	return true, ""
}

// Sequences returns, per Doppio partition, the SCN sequences delivered,
// ascending and distinct.
func Sequences(d Delivery) map[int][]uint64 {
	out := map[int][]uint64{}
	for _, evs := range d.Groups {
		for _, e := range evs {
			out[e.Partition] = append(out[e.Partition], e.SCN.Sequence)
		}
	}
	for p, s := range out {
		slices.Sort(s)
		out[p] = slices.Compact(s)
	}
	return out
}

// GroupsPer returns, for each of a database's partitions, perPartition
// document groups (single-part partition keys "g0", "g1", …) that hash to
// it, so a test can write to every partition on purpose.
func GroupsPer(partitions, perPartition int) [][]string {
	out := make([][]string, partitions)
	for i, left := 0, partitions*perPartition; left > 0; i++ {
		g := fmt.Sprint("g", i)
		enc, _ := keys.EncodeTuple(keys.Tuple{g})
		if p := keys.PartitionOf(enc, partitions); len(out[p]) < perPartition {
			out[p] = append(out[p], g)
			left--
		}
	}
	return out
}
