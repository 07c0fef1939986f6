package changes

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/doppio-db/doppio/client"
	"github.com/doppio-db/doppio/internal/backoff"
)

// Txn is one committed transaction of one partition, as the stream's
// filters left it; or, with Snapshot, a chunk of a partition's bootstrap
// snapshot (the partition's last chunk ends with an event marked TxnEnd).
type Txn struct {
	Partition int
	SCN       string
	Events    []Event
	Snapshot  bool
}

// Consumer subscribes to a database's change stream and hands whole
// transactions to Handle; see the package documentation.
type Consumer struct {
	// Client reaches the first server, with the transport, TLS and
	// credentials every stream uses (New sets it).
	Client *client.Client
	// Servers are more base URLs of Doppio nodes (any node serves any
	// partition), reached with Client's settings; a failing server is
	// left for the next.
	Servers []string
	DB      string
	// Tables and Partitions filter the stream (default: all).
	Tables     []string
	Partitions []int
	// Store keeps progress (default: a MemoryStore).
	Store CheckpointStore
	// Bootstrap starts partitions without a stored checkpoint with a
	// snapshot of their documents; otherwise they start at the newest
	// commit.
	Bootstrap bool
	// AutoBootstrap answers a checkpoint that fell out of the retained log
	// (410) with a bootstrap of the stream's partitions; otherwise Run
	// returns an error for which IsBootstrapRequired holds.
	AutoBootstrap bool
	// SaveInterval is how often progress is saved (default 1 s); it is
	// also saved when the consumer stops or hands partitions over.
	SaveInterval time.Duration
	// SnapshotChunk bounds the events of one snapshot Txn (default 1000).
	SnapshotChunk int
	// Handle applies one transaction. Calls are sequential. An error is
	// retried with backoff until Handle succeeds or the consumer stops.
	Handle func(ctx context.Context, t Txn) error
	// Logf, if set, receives reconnections and rebalances.
	Logf func(format string, args ...any)

	// EtcdEndpoints and Group make this instance one of a consumer group
	// that splits the partitions (see the package documentation). The
	// endpoints are etcd client URLs ("http://host:2379" or "host:2379"),
	// spoken to through etcd's JSON gateway.
	EtcdEndpoints []string
	Group         string
	// EtcdHTTPClient sends the group's etcd requests (default
	// http.DefaultClient); it must not time out the group's watch.
	EtcdHTTPClient *http.Client
	// Instance names this instance in the group (default: a random id).
	Instance string
	// GroupPrefix is the etcd prefix of groups (default
	// "/doppio-consumers").
	GroupPrefix string
	// LeaseTTL is the group lease, in seconds (default 5): how long a dead
	// instance's partitions wait before moving.
	LeaseTTL int

	handleMu sync.Mutex
	owned    []int // partitions being consumed now (for tests and logs)
	ownedMu  sync.Mutex
}

// New returns a consumer of db's changes through c that hands each
// transaction to handle; set its other fields before Run.
func New(c *client.Client, db string, handle func(ctx context.Context, t Txn) error) *Consumer {
	return &Consumer{Client: c, DB: db, Handle: handle}
}

// servers are the clients the consumer streams from, in turn. Each gives
// up at once: the consumer's own loop is the retry, moving to the next.
func (c *Consumer) servers() []*client.Client {
	out := []*client.Client{c.Client.At(c.Client.BaseURL(), client.WithRetry(0))}
	for _, s := range c.Servers {
		out = append(out, c.Client.At(s, client.WithRetry(0)))
	}
	return out
}

// Owned returns the partitions this instance consumes now.
func (c *Consumer) Owned() []int {
	c.ownedMu.Lock()
	defer c.ownedMu.Unlock()
	return slices.Clone(c.owned)
}

func (c *Consumer) setOwned(ps []int) {
	c.ownedMu.Lock()
	c.owned = slices.Clone(ps)
	c.ownedMu.Unlock()
}

func (c *Consumer) logf(format string, args ...any) {
	if c.Logf != nil {
		c.Logf(format, args...)
	}
}

// Run consumes until ctx ends (returning nil) or a failure it cannot
// recover from.
func (c *Consumer) Run(ctx context.Context) error {
	if c.Handle == nil || c.DB == "" || c.Client == nil {
		return errors.New("changes: Consumer needs Client, DB and Handle (see New)")
	}
	if c.Store == nil {
		c.Store = &MemoryStore{}
	}
	parts := c.Partitions
	if len(parts) == 0 {
		n, err := c.partitionCount(ctx)
		if err != nil {
			return err
		}
		for i := range n {
			parts = append(parts, i)
		}
	}
	var err error
	if len(c.EtcdEndpoints) > 0 && c.Group != "" {
		err = c.runGroup(ctx, parts)
	} else {
		c.setOwned(parts)
		err = c.consume(ctx, parts, c.Store)
	}
	if ctx.Err() != nil {
		return nil
	}
	return err
}

func (c *Consumer) partitionCount(ctx context.Context) (int, error) {
	var last error
	for _, s := range c.servers() {
		db, err := s.GetDatabase(ctx, c.DB)
		if err == nil {
			return db.Partitions, nil
		}
		last = err
		if client.IsNotFound(err) {
			break
		}
	}
	return 0, last
}

// progress is the consumer's position per partition.
type progress struct {
	mu    sync.Mutex
	cps   map[int]string // handled up to here
	dirty map[int]bool
}

func (pr *progress) set(p int, cp string) {
	pr.mu.Lock()
	if pr.cps[p] != cp {
		pr.cps[p] = cp
		pr.dirty[p] = true
	}
	pr.mu.Unlock()
}

func (pr *progress) take() map[int]string {
	pr.mu.Lock()
	defer pr.mu.Unlock()
	out := map[int]string{}
	for p := range pr.dirty {
		out[p] = pr.cps[p]
	}
	clear(pr.dirty)
	return out
}

func (pr *progress) known(parts []int) (with, without []int, from map[int]string) {
	pr.mu.Lock()
	defer pr.mu.Unlock()
	from = map[int]string{}
	for _, p := range parts {
		if cp, ok := pr.cps[p]; ok {
			with = append(with, p)
			from[p] = cp
		} else {
			without = append(without, p)
		}
	}
	return with, without, from
}

func (pr *progress) forget(parts []int) {
	pr.mu.Lock()
	for _, p := range parts {
		delete(pr.cps, p)
		delete(pr.dirty, p)
	}
	pr.mu.Unlock()
}

// consume streams parts until ctx ends or a fatal error, saving progress
// periodically and at the end.
func (c *Consumer) consume(ctx context.Context, parts []int, store CheckpointStore) error {
	if len(parts) == 0 {
		<-ctx.Done()
		return nil
	}
	stored, err := store.Load(ctx, c.DB, parts)
	if err != nil {
		return fmt.Errorf("changes: load checkpoints: %w", err)
	}
	pr := &progress{cps: stored, dirty: map[int]bool{}}
	save := func() error {
		if cps := pr.take(); len(cps) > 0 {
			sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
			defer cancel()
			return store.Save(sctx, c.DB, cps)
		}
		return nil
	}
	interval := c.SaveInterval
	if interval <= 0 {
		interval = time.Second
	}
	saveErr := make(chan error, 1)
	sctx, stopSaver := context.WithCancel(ctx)
	go func() {
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			select {
			case <-sctx.Done():
				return
			case <-t.C:
				if err := save(); err != nil {
					saveErr <- err
					return
				}
			}
		}
	}()
	err = c.streamLoop(ctx, parts, pr, saveErr)
	stopSaver()
	if serr := save(); serr != nil && err == nil && ctx.Err() == nil {
		err = serr
	}
	return err
}

var errRestart = errors.New("restart")

// streamLoop keeps streams open over parts: partitions with a known
// position resume from it, the others start afresh (or with a snapshot);
// a failed stream is reopened on the next server.
func (c *Consumer) streamLoop(ctx context.Context, parts []int, pr *progress, saveErr <-chan error) error {
	servers := c.servers()
	server := 0
	bo := backoff.Backoff{First: 100 * time.Millisecond, Max: 5 * time.Second}
	for ctx.Err() == nil {
		with, without, from := pr.known(parts)
		sctx, cancel := context.WithCancel(ctx)
		errs := make(chan error, 2)
		n := 0
		if len(with) > 0 {
			cp, err := mergeCheckpoints(c.DB, from)
			if err != nil {
				cancel()
				return err
			}
			n++
			go func() { errs <- c.stream(sctx, servers[server%len(servers)], with, Options{From: cp}, pr) }()
		}
		if len(without) > 0 {
			n++
			go func() {
				errs <- c.stream(sctx, servers[server%len(servers)], without, Options{Bootstrap: c.Bootstrap}, pr)
			}()
		}
		var first error
		select {
		case first = <-errs:
		case first = <-saveErr:
		}
		cancel()
		for i := 1; i < n; i++ {
			if err := <-errs; first == errRestart {
				first = err
			}
		}
		if ctx.Err() != nil {
			return nil
		}
		switch {
		case errors.Is(first, ErrNotOwner):
			return first
		case IsBootstrapRequired(first):
			if !c.AutoBootstrap {
				return first
			}
			c.logf("changes: %v; bootstrapping partitions %v", first, with)
			pr.forget(with)
			c.Bootstrap = true
			continue
		case first == errRestart:
			bo.Reset()
			continue
		}
		var ce *client.Error
		if errors.As(first, &ce) && ce.Status >= 400 && ce.Status < 500 {
			return first // the request itself is wrong: retrying cannot help
		}
		c.logf("changes: stream from %s failed: %v; retrying", servers[server%len(servers)].BaseURL(), first)
		server++
		if bo.Wait(ctx) != nil {
			return nil
		}
	}
	return nil
}

// stream reads one stream and hands its transactions to Handle. It
// returns errRestart once a stream without positions has given them (so
// the loop reopens everything from positions), or the stream's error.
func (c *Consumer) stream(ctx context.Context, server *client.Client, parts []int, o Options, pr *progress) error {
	o.Tables, o.Partitions = c.Tables, parts
	s, err := Open(ctx, server, c.DB, o)
	if err != nil {
		return err
	}
	defer s.Close()
	go func() { <-ctx.Done(); s.Close() }()
	chunk := c.SnapshotChunk
	if chunk <= 0 {
		chunk = 1000
	}
	pending := map[int]*Txn{}
	for {
		l, err := s.Next()
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return err
		}
		if e := l.Event; e != nil {
			t := pending[e.Partition]
			if t == nil {
				t = &Txn{Partition: e.Partition, SCN: e.SCN, Snapshot: e.Snapshot}
				pending[e.Partition] = t
			}
			t.Events = append(t.Events, *e)
			if !e.TxnEnd && !(e.Snapshot && len(t.Events) >= chunk) {
				continue
			}
			delete(pending, e.Partition)
			if err := c.handle(ctx, *t); err != nil {
				return err
			}
			if e.Checkpoint != "" {
				if cp, ok := splitCheckpoint(e.Checkpoint, e.Partition); ok {
					pr.set(e.Partition, cp)
				}
			}
			continue
		}
		if l.Checkpoint == "" {
			continue
		}
		for _, p := range parts {
			if pending[p] != nil {
				continue // inside a transaction of p
			}
			if cp, ok := splitCheckpoint(l.Checkpoint, p); ok {
				pr.set(p, cp)
			}
		}
		if o.From == "" {
			// Every partition has a position now; reopen the streams as
			// one from positions.
			return errRestart
		}
	}
}

func (c *Consumer) handle(ctx context.Context, t Txn) error {
	c.handleMu.Lock()
	defer c.handleMu.Unlock()
	bo := backoff.Backoff{First: 50 * time.Millisecond, Max: 5 * time.Second}
	for {
		err := c.Handle(ctx, t)
		if err == nil {
			return nil
		}
		c.logf("changes: handling partition %d at %s failed: %v; retrying", t.Partition, t.SCN, err)
		if err := bo.Wait(ctx); err != nil {
			return err
		}
	}
}
