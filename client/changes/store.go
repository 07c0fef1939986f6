package changes

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"sync"

	"github.com/doppio-db/doppio/client/changes/internal/etcdhttp"
	"github.com/doppio-db/doppio/internal/changes/checkpoint"
)

// CheckpointStore keeps a consumer's progress: one checkpoint per
// partition (a checkpoint of that partition alone).
type CheckpointStore interface {
	// Load returns the stored checkpoints of the partitions, by partition
	// (absent: none stored).
	Load(ctx context.Context, db string, partitions []int) (map[int]string, error)
	// Save stores the checkpoints, by partition.
	Save(ctx context.Context, db string, cps map[int]string) error
}

// MemoryStore is a CheckpointStore in memory: progress survives
// reconnections and restarts of a Consumer, not of the process.
type MemoryStore struct {
	mu  sync.Mutex
	cps map[string]map[int]string
}

// Load implements CheckpointStore.
func (m *MemoryStore) Load(_ context.Context, db string, partitions []int) (map[int]string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := map[int]string{}
	for _, p := range partitions {
		if cp, ok := m.cps[db][p]; ok {
			out[p] = cp
		}
	}
	return out, nil
}

// Save implements CheckpointStore.
func (m *MemoryStore) Save(_ context.Context, db string, cps map[int]string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.cps == nil {
		m.cps = map[string]map[int]string{}
	}
	if m.cps[db] == nil {
		m.cps[db] = map[int]string{}
	}
	for p, cp := range cps {
		m.cps[db][p] = cp
	}
	return nil
}

// EtcdStore keeps checkpoints in etcd under Prefix (one key per database
// and partition: Prefix/db/partition). It speaks to etcd's JSON gateway
// over HTTP, so the client links no gRPC.
type EtcdStore struct {
	// Endpoints are etcd client URLs ("http://host:2379" or "host:2379").
	Endpoints []string
	// HTTPClient sends the requests (default http.DefaultClient).
	HTTPClient *http.Client
	Prefix     string // e.g. "/myapp/consumers/indexer/checkpoints"
	// guard, when set, makes every Save conditional: it is applied only
	// while guard holds (the Consumer of a group sets it to "this
	// instance still owns the partitions").
	guard func(partitions []int) []etcdhttp.Compare
}

func (s *EtcdStore) etcd() *etcdhttp.Client {
	return &etcdhttp.Client{Endpoints: s.Endpoints, HTTP: s.HTTPClient}
}

func (s *EtcdStore) key(db string, p int) string { return fmt.Sprintf("%s/%s/%d", s.Prefix, db, p) }

// Load implements CheckpointStore.
func (s *EtcdStore) Load(ctx context.Context, db string, partitions []int) (map[int]string, error) {
	out := map[int]string{}
	etcd := s.etcd()
	for _, p := range partitions {
		kv, err := etcd.Get(ctx, s.key(db, p))
		if err != nil {
			return nil, err
		}
		if kv != nil {
			out[p] = kv.Value
		}
	}
	return out, nil
}

// ErrNotOwner is returned by a guarded Save after the instance lost a
// partition it saves.
var ErrNotOwner = errors.New("changes: partition no longer owned by this consumer")

// Save implements CheckpointStore, atomically for all partitions.
func (s *EtcdStore) Save(ctx context.Context, db string, cps map[int]string) error {
	var ops []etcdhttp.Op
	var ps []int
	for p, cp := range cps {
		ops = append(ops, etcdhttp.PutOp(s.key(db, p), cp, 0))
		ps = append(ps, p)
	}
	if len(ops) == 0 {
		return nil
	}
	slices.Sort(ps)
	var cmps []etcdhttp.Compare
	if s.guard != nil {
		cmps = s.guard(ps)
	}
	resp, err := s.etcd().Txn(ctx, cmps, ops, nil)
	if err != nil {
		return err
	}
	if !resp.Succeeded {
		return ErrNotOwner
	}
	return nil
}

// splitCheckpoint returns the checkpoint of partition p alone.
func splitCheckpoint(cp string, p int) (string, bool) {
	c, err := checkpoint.Parse(cp)
	if err != nil {
		return "", false
	}
	pos, ok := c.Get(p)
	if !ok {
		return "", false
	}
	one := checkpoint.Checkpoint{DB: c.DB, Positions: []checkpoint.Position{pos}}
	return one.String(), true
}

// mergeCheckpoints combines single-partition checkpoints into one.
func mergeCheckpoints(db string, cps map[int]string) (string, error) {
	out := checkpoint.Checkpoint{DB: db}
	for p, cp := range cps {
		c, err := checkpoint.Parse(cp)
		if err != nil {
			return "", fmt.Errorf("stored checkpoint of partition %d: %w", p, err)
		}
		pos, ok := c.Get(p)
		if !ok || c.DB != db {
			return "", fmt.Errorf("stored checkpoint of partition %d is not of %s/%d", p, db, p)
		}
		out.Set(pos)
	}
	return out.String(), nil
}
