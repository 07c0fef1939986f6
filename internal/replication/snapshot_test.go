package replication

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/doppio-db/doppio/internal/keys"
	"github.com/doppio-db/doppio/internal/partition"
)

// snapshotHooks let a test fail or stop snapshot handling at chosen
// points, on the node it names.
type snapshotHooks struct {
	// frame sees every snapshot frame a node receives before it is
	// handled; an error fails the stream there.
	frame func(node uint64, kind byte) error
	// ingest runs on a node's loop right before ("before") and right after
	// ("after") a snapshot's ingestion.
	ingest func(node uint64, stage string)
}

// newSmallSnapshotCluster is newCluster with snapshots of a few kilobytes
// spanning several tables and frames, handled under the hooks the test
// stores in hooks (none while it holds nil).
func newSmallSnapshotCluster(t *testing.T, hooks *atomic.Pointer[snapshotHooks], ids ...uint64) *cluster {
	return newConfiguredCluster(t, func(cfg *Config) {
		node := cfg.NodeID
		cfg.Knobs = &TestingKnobs{
			SnapshotTableBytes: 8 << 10,
			SnapshotChunk:      1 << 10,
			OnSnapshotFrame: func(kind byte) error {
				if h := hooks.Load(); h != nil && h.frame != nil {
					return h.frame(node, kind)
				}
				return nil
			},
			OnSnapshotIngest: func(stage string) {
				if h := hooks.Load(); h != nil && h.ingest != nil {
					h.ingest(node, stage)
				}
			},
		}
	}, ids...)
}

// bigWriteSet is write set i with a value of about 1 KiB.
func bigWriteSet(i int) *partition.WriteSet {
	ws := writeSet(i)
	ws.Writes[0].After = fmt.Appendf(nil, "value %d %0900d", i, i)
	return ws
}

func deleteSet(i int) *partition.WriteSet {
	return &partition.WriteSet{Mtime: time.Now().UnixMilli(), Writes: []partition.Write{{
		Table: "t", Key: docKey(i), Op: partition.OpDelete, BeforeVersion: 1, Before: []byte("x"),
	}}}
}

func (c *cluster) mustReplicate(ctx context.Context, id uint64, p keys.Partition, ws *partition.WriteSet) partition.SCN {
	c.t.Helper()
	g := c.host(id).Member(p)
	if err := g.Lead(ctx); err != nil {
		c.t.Fatal(err)
	}
	scn, err := g.Replicate(ctx, ws)
	if err != nil {
		c.t.Fatal(err)
	}
	return scn
}

// lagBehindTruncatedLogs stops node lagging, writes n documents of ~1 KiB
// and deletes the first ten (which lagging holds) at the leader, and
// truncates every running replica's log, so lagging can only catch up from
// a snapshot. It returns the leader and the last SCN.
func (c *cluster) lagBehindTruncatedLogs(ctx context.Context, p keys.Partition, lagging uint64, n int) (uint64, partition.SCN) {
	c.t.Helper()
	lead := c.leader(p, 5*time.Second)
	for i := range 10 {
		c.mustReplicate(ctx, lead, p, bigWriteSet(i))
	}
	c.waitApplied(p, 10, 5*time.Second, 1, 2, 3)
	c.stop(lagging)
	lead = c.leader(p, 5*time.Second)
	var scn partition.SCN
	for i := 10; i < 10+n; i++ {
		scn = c.mustReplicate(ctx, lead, p, bigWriteSet(i))
	}
	for i := range 10 {
		scn = c.mustReplicate(ctx, lead, p, deleteSet(i))
	}
	for _, id := range c.ids() {
		if err := c.host(id).Member(p).CompactLog(0); err != nil {
			c.t.Fatal(err)
		}
	}
	return lead, scn
}

// TestFarBehindFollowerCatchesUpFromSSTSnapshot: a follower that was down
// while the others wrote, deleted and truncated their logs gets the
// partition as a stream of sstables, ingests them, and holds exactly the
// leader's data (the documents deleted meanwhile are gone) while its other
// partition is untouched; then it keeps replicating from the log.
func TestFarBehindFollowerCatchesUpFromSSTSnapshot(t *testing.T) {
	var (
		tables, chunks atomic.Int64
		hooks          atomic.Pointer[snapshotHooks]
	)
	hooks.Store(&snapshotHooks{frame: func(node uint64, kind byte) error {
		if node == 3 {
			switch kind {
			case snapEnd:
				tables.Add(1)
			case snapChunk:
				chunks.Add(1)
			}
		}
		return nil
	}})
	c := newSmallSnapshotCluster(t, &hooks, 1, 2, 3)
	p, other := testPartition(0), testPartition(1)
	c.startRaftGroup(p, []uint64{1, 2, 3})
	c.startRaftGroup(other, []uint64{1, 2, 3})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	olead := c.leader(other, 5*time.Second)
	for i := range 20 {
		c.mustReplicate(ctx, olead, other, bigWriteSet(i))
	}
	c.waitApplied(other, 20, 5*time.Second, 1, 2, 3)
	otherBefore := c.state(3, other)

	_, scn := c.lagBehindTruncatedLogs(ctx, p, 3, 60)
	c.start(3)
	c.startRaftGroup(p, []uint64{1, 2, 3}, 3)
	c.startRaftGroup(other, []uint64{1, 2, 3}, 3)
	c.waitApplied(p, scn.Sequence, 10*time.Second, 1, 2, 3)
	state := c.sameState(p, 1, 2, 3)
	for i := range 70 {
		if hasDoc(state, p, i) != (i >= 10) {
			t.Fatalf("document %d present=%v after the snapshot", i, hasDoc(state, p, i))
		}
	}
	if tables.Load() < 3 || chunks.Load() < tables.Load() {
		t.Fatalf("the snapshot came as %d tables in %d chunks; want several of each", tables.Load(), chunks.Load())
	}
	t.Logf("snapshot of %d documents: %d sstables in %d chunks", len(state), tables.Load(), chunks.Load())
	otherAfter := c.state(3, other)
	if len(otherAfter) != len(otherBefore) {
		t.Fatalf("the other partition went from %d to %d keys", len(otherBefore), len(otherAfter))
	}
	for k, v := range otherBefore {
		if otherAfter[k] != v {
			t.Fatalf("the other partition changed at %x", k)
		}
	}
	st, _ := c.host(3).Member(p).Status()
	if st.FirstIndex <= 2 {
		t.Fatalf("lagging replica's log starts at %d; it should start after the snapshot", st.FirstIndex)
	}
	scn = c.mustReplicate(ctx, c.leader(p, 5*time.Second), p, bigWriteSet(1000))
	c.waitApplied(p, scn.Sequence, 5*time.Second, 1, 2, 3)
	c.sameState(p, 1, 2, 3)
	if left, _ := filepath.Glob(filepath.Join(c.host(3).staging, "*")); len(left) != 0 {
		t.Fatalf("staged snapshot files left behind: %v", left)
	}
}

// TestSnapshotInterruptedAnywhereLeavesOldOrNewStateWhole interrupts the
// installation of a snapshot at a lagging follower three ways: the stream
// breaks midway (the sender dies), the node crashes right before the
// ingestion, and right after it (before the Ready that carried it is
// done). Each time the node holds either its old state, unchanged, or the
// snapshot's whole with a Raft state that agrees with it (it restarts and
// catches up), never a mix; staged files do not survive a restart.
func TestSnapshotInterruptedAnywhereLeavesOldOrNewStateWhole(t *testing.T) {
	for _, where := range []string{"stream", "before", "after"} {
		t.Run(where, func(t *testing.T) {
			var current atomic.Pointer[snapshotHooks]
			c := newSmallSnapshotCluster(t, &current, 1, 2, 3)
			p := testPartition(0)
			c.startRaftGroup(p, []uint64{1, 2, 3})
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			_, scn := c.lagBehindTruncatedLogs(ctx, p, 3, 40)

			// What node 3 holds before: its old state, read from its store.
			c.start(3)
			old := c.state(3, p)

			var once sync.Once
			crashed := make(chan struct{})
			hooks := &snapshotHooks{}
			switch where {
			case "stream":
				// Every attempt breaks after a few frames until the test says.
				var frames atomic.Int64
				hooks.frame = func(node uint64, kind byte) error {
					if node == 3 && kind == snapChunk && frames.Add(1)%5 == 0 {
						once.Do(func() { close(crashed) })
						return errors.New("injected: stream broken")
					}
					return nil
				}
			default:
				hooks.ingest = func(node uint64, stage string) {
					if node == 3 && stage == where {
						once.Do(func() { close(crashed) })
						runtime.Goexit() // the node's loop stops here: nothing more is written
					}
				}
			}
			current.Store(hooks)
			c.startRaftGroup(p, []uint64{1, 2, 3}, 3)
			select {
			case <-crashed:
			case <-time.After(20 * time.Second):
				t.Fatal("the snapshot never reached the injected failure")
			}
			time.Sleep(50 * time.Millisecond) // let the failed attempt settle
			now := c.state(3, p)
			switch where {
			case "stream", "before":
				// Entries its log can still take (a leader's append queued
				// for it while it was down) it may apply: whole ones only.
				if err := oldStateAdvancedByLog(old, now, p, c.host(3).Member(p).Applied().Sequence); err != nil {
					t.Fatalf("after an interrupted snapshot (%s) node 3 holds %d keys, had %d: %v", where, len(now), len(old), err)
				}
			case "after":
				want := c.state(1, p)
				if !sameKeys(now, want) {
					t.Fatalf("right after the ingestion node 3 holds %d keys, the leader %d: the snapshot must be in whole", len(now), len(want))
				}
				// The Raft state on disk agrees with the data.
				st, err := loadStorage(c.engine(3), p)
				if err != nil {
					t.Fatal(err)
				}
				if st.applied.SCN != scn || st.hard.GetCommit() < st.applied.Index || st.trunc.Index != st.applied.Index || st.last != st.applied.Index {
					t.Fatalf("raft state after the ingestion: applied %+v (want SCN %v), commit %d, truncated %+v, last %d", st.applied, scn, st.hard.GetCommit(), st.trunc, st.last)
				}
			}
			// Crash and restart: whatever was staged is gone, and the node
			// catches up (asking for the snapshot again if it needs it).
			current.Store(nil)
			c.stop(3)
			c.start(3)
			if left, _ := filepath.Glob(filepath.Join(c.host(3).staging, "*")); len(left) != 0 {
				t.Fatalf("staged files survived the restart: %v", left)
			}
			c.startRaftGroup(p, []uint64{1, 2, 3}, 3)
			c.waitApplied(p, scn.Sequence, 10*time.Second, 1, 2, 3)
			c.sameState(p, 1, 2, 3)
			if _, err := os.Stat(c.host(3).staging); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// oldStateAdvancedByLog checks that now is old (the state at sequence 10 of
// lagBehindTruncatedLogs) after applying whole write sets 11..applied from
// the log: old's keys keep their values (but the applied SCN), and the only
// new keys are each such write set's document and change-log entry. A
// snapshot ingested in part would bring documents past applied, or miss the
// documents it deletes.
func oldStateAdvancedByLog(old, now map[string]string, p keys.Partition, applied uint64) error {
	if applied < 10 || applied > 50 {
		return fmt.Errorf("applied sequence %d: not reachable from the old state by the log's writes", applied)
	}
	meta := string(p.MetaPrefix())
	for k, v := range old {
		if nv, ok := now[k]; !ok || (nv != v && !strings.HasPrefix(k, meta)) {
			return fmt.Errorf("key %x changed", k)
		}
	}
	docs := map[string]bool{}
	for i := 10; i < int(applied); i++ {
		docs[string(p.Document("t", docKey(i)))] = true
	}
	logs := 0
	for k := range now {
		switch _, had := old[k]; {
		case had:
		case docs[k]:
			delete(docs, k)
		case strings.HasPrefix(k, string(p.LogPrefix())):
			logs++
		default:
			return fmt.Errorf("key %x is not of a write set up to sequence %d", k, applied)
		}
	}
	if len(docs) != 0 || logs != int(applied)-10 {
		return fmt.Errorf("%d documents and %d change-log entries missing for sequence %d", len(docs), int(applied)-10-logs, applied)
	}
	return nil
}

func sameKeys(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if bv, ok := b[k]; !ok || bv != v {
			return false
		}
	}
	return true
}
