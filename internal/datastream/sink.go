package datastream

import (
	"context"
	"time"

	"github.com/doppio-db/doppio/internal/changes"
	"github.com/doppio-db/doppio/internal/partition"
	"github.com/doppio-db/doppio/internal/schema"
)

// sink is where a datastream's tasks deliver: Kafka or the cache tier's
// Redis. One serves every task of a stream on a node.
type sink interface {
	// deliver hands one batch of a task's events over and returns once
	// the sink acknowledged them all; only then does the checkpoint move.
	deliver(ctx context.Context, task TaskID, evs []changes.Event, tables func(string) (*schema.Table, error)) error
	close()
}

// progressSink is a sink told when a task has delivered everything its
// replica had applied at a time the replica was fresh, so that it can
// publish how far it has come even while nothing changes (the cache
// tier's watermark). l is the task's replica.
type progressSink interface {
	caughtUp(ctx context.Context, task TaskID, freshAt time.Time, l changes.Log) error
}

// sharedSink is a sink with the tasks that use it.
type sharedSink struct {
	def  Definition
	sink sink
	refs int
}

func (m *Manager) newSink(def Definition) (sink, error) {
	if def.Sink.Type == SinkRedis {
		return newRedisSink(m, def)
	}
	return newKafkaSink(def, "doppio-"+m.node+"-"+def.Name)
}

// Freshness is what a Replicas may also tell: a time at which its
// replica of a partition had applied everything committed before it
// (replication.Member.FreshAt). The Redis sink's watermark moves only
// when the node's Replicas tell it.
type Freshness interface {
	FreshAt(db string, p int) (time.Time, bool)
}

// fresh is a replica's freshness sampled before a read: at at, it had
// applied everything committed, and it has applied up to applied since.
type fresh struct {
	at      time.Time
	applied partition.SCN
	ok      bool
}

// freshness samples the task's replica: FreshAt first, then what it has
// applied, so that delivering up to applied covers every commit before
// at.
func (t *task) freshness(l changes.Log) fresh {
	f, ok := t.m.replicas.(Freshness)
	if !ok {
		return fresh{}
	}
	at, ok := f.FreshAt(t.id.DB, t.id.Partition)
	if !ok || at.IsZero() {
		return fresh{}
	}
	return fresh{at: at, applied: l.Applied(), ok: true}
}

// caughtUp tells a progress sink that the task has delivered up to pos,
// if that covers what the replica had applied when fresh was sampled.
func (t *task) caughtUp(s sink, l changes.Log, pos partition.SCN, f fresh) {
	ps, ok := s.(progressSink)
	if !ok || !f.ok || pos.Less(f.applied) {
		return
	}
	if err := ps.caughtUp(t.ctx, t.id, f.at, l); err != nil && t.ctx.Err() == nil {
		t.m.log.Debug("datastream sink progress", "datastream", t.id.Stream, "partition", t.id.Partition, "err", err)
	}
}
