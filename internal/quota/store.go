package quota

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// Layout in etcd under the prefix:
//
//	{prefix}/quotas/databases/{db}   JSON Quota
//	{prefix}/quotas/users/{name}     JSON Quota
var dirs = [2]string{Database: "/quotas/databases/", User: "/quotas/users/"}

// StoreConfig configures a Store.
type StoreConfig struct {
	Client *clientv3.Client
	// Prefix is the cluster's etcd prefix (the catalog's).
	Prefix string
	// Limiter receives every quota the store sees, its own writes at once
	// and other nodes' through the watch.
	Limiter *Limiter
	Logger  *slog.Logger
}

// Store keeps the quotas in etcd and the Limiter in line with them.
type Store struct {
	cli     *clientv3.Client
	prefix  string
	limiter *Limiter
	log     *slog.Logger

	mu   sync.Mutex
	revs map[string]int64 // key -> revision the limiter reflects

	cancel context.CancelFunc
	done   chan struct{}
}

// Open loads the quotas into cfg.Limiter and watches them until Close.
func Open(ctx context.Context, cfg StoreConfig) (*Store, error) {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	s := &Store{cli: cfg.Client, prefix: strings.TrimSuffix(cfg.Prefix, "/"), limiter: cfg.Limiter,
		log: cfg.Logger.With("component", "quota"), revs: map[string]int64{}}
	rev, err := s.load(ctx)
	if err != nil {
		return nil, fmt.Errorf("quotas: load: %w", err)
	}
	wctx, cancel := context.WithCancel(context.Background())
	s.cancel, s.done = cancel, make(chan struct{})
	go s.watch(wctx, rev)
	return s, nil
}

// Close stops the watch.
func (s *Store) Close() {
	s.cancel()
	<-s.done
}

// Limiter is the limiter the store feeds.
func (s *Store) Limiter() *Limiter { return s.limiter }

func (s *Store) key(sc Scope, name string) string { return s.prefix + dirs[sc] + name }

// Get returns the quota of name in scope as stored (a linearizable read).
func (s *Store) Get(ctx context.Context, sc Scope, name string) (Quota, bool, error) {
	resp, err := s.cli.Get(ctx, s.key(sc, name))
	if err != nil {
		return Quota{}, false, err
	}
	if len(resp.Kvs) == 0 {
		return Quota{}, false, nil
	}
	var q Quota
	err = json.Unmarshal(resp.Kvs[0].Value, &q)
	return q, true, err
}

// Put stores q as the quota of name in scope and applies it here at once;
// created reports that there was none.
func (s *Store) Put(ctx context.Context, sc Scope, name string, q Quota) (created bool, err error) {
	if strings.Contains(name, "/") || name == "" {
		return false, fmt.Errorf("quotas: bad name %q", name)
	}
	b, err := json.Marshal(q)
	if err != nil {
		return false, err
	}
	resp, err := s.cli.Put(ctx, s.key(sc, name), string(b), clientv3.WithPrevKV())
	if err != nil {
		return false, err
	}
	s.apply(sc, name, q, resp.Header.Revision)
	return resp.PrevKv == nil, nil
}

// Delete removes the quota of name in scope; existed reports whether there
// was one.
func (s *Store) Delete(ctx context.Context, sc Scope, name string) (existed bool, err error) {
	resp, err := s.cli.Delete(ctx, s.key(sc, name))
	if err != nil {
		return false, err
	}
	s.apply(sc, name, Quota{}, resp.Header.Revision)
	return resp.Deleted > 0, nil
}

// List returns every stored quota, by scope then name.
func (s *Store) List(ctx context.Context) ([2]map[string]Quota, error) {
	resp, err := s.cli.Get(ctx, s.prefix+"/quotas/", clientv3.WithPrefix())
	if err != nil {
		return [2]map[string]Quota{}, err
	}
	out, _ := s.parse(resp.Kvs)
	return out, nil
}

// parse reads stored quotas; unusable entries are logged and left out.
func (s *Store) parse(kvs []*mvccpb.KeyValue) ([2]map[string]Quota, map[string]int64) {
	out := [2]map[string]Quota{{}, {}}
	revs := map[string]int64{}
	for _, kv := range kvs {
		sc, name, ok := s.parseKey(string(kv.Key))
		if !ok {
			continue
		}
		var q Quota
		if err := json.Unmarshal(kv.Value, &q); err != nil {
			s.log.Warn("ignoring unusable quota", "key", string(kv.Key), "err", err)
			continue
		}
		out[sc][name] = q
		revs[string(kv.Key)] = kv.ModRevision
	}
	return out, revs
}

func (s *Store) parseKey(key string) (Scope, string, bool) {
	for sc, dir := range dirs {
		if name, ok := strings.CutPrefix(key, s.prefix+dir); ok && name != "" && !strings.Contains(name, "/") {
			return Scope(sc), name, true
		}
	}
	return 0, "", false
}

// apply gives the limiter the quota written at rev, unless it already
// reflects a later write of the key.
func (s *Store) apply(sc Scope, name string, q Quota, rev int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	key := s.key(sc, name)
	if s.revs[key] > rev {
		return
	}
	s.revs[key] = rev
	s.limiter.Set(sc, name, q)
}

// load replaces the limiter's quotas with those stored, returning the
// revision read.
func (s *Store) load(ctx context.Context) (int64, error) {
	resp, err := s.cli.Get(ctx, s.prefix+"/quotas/", clientv3.WithPrefix())
	if err != nil {
		return 0, err
	}
	qs, revs := s.parse(resp.Kvs)
	s.mu.Lock()
	defer s.mu.Unlock()
	for sc := range qs {
		for name := range qs[sc] {
			if s.revs[s.key(Scope(sc), name)] > revs[s.key(Scope(sc), name)] {
				qs[sc][name] = s.limiter.Quota(Scope(sc), name) // a later write of ours
			}
		}
		s.limiter.Replace(Scope(sc), qs[sc])
	}
	for k, r := range revs {
		s.revs[k] = max(s.revs[k], r)
	}
	return resp.Header.Revision, nil
}

// watch applies every change after rev until ctx ends; after an error it
// loads everything again and resumes.
func (s *Store) watch(ctx context.Context, rev int64) {
	defer close(s.done)
	for {
		err := s.watchFrom(ctx, rev+1)
		if ctx.Err() != nil {
			return
		}
		s.log.Warn("quota watch interrupted; reloading", "err", err)
		select {
		case <-ctx.Done():
			return
		case <-time.After(500 * time.Millisecond):
		}
		if r, err := s.load(ctx); err == nil {
			rev = r
		}
	}
}

func (s *Store) watchFrom(ctx context.Context, from int64) error {
	wctx, cancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
	defer cancel()
	for resp := range s.cli.Watch(wctx, s.prefix+"/quotas/", clientv3.WithPrefix(), clientv3.WithRev(from)) {
		if err := resp.Err(); err != nil {
			return err
		}
		for _, ev := range resp.Events {
			sc, name, ok := s.parseKey(string(ev.Kv.Key))
			if !ok {
				continue
			}
			var q Quota
			if ev.Type == mvccpb.PUT {
				if err := json.Unmarshal(ev.Kv.Value, &q); err != nil {
					s.log.Warn("ignoring unusable quota", "key", string(ev.Kv.Key), "err", err)
					continue
				}
			}
			s.apply(sc, name, q, ev.Kv.ModRevision)
		}
	}
	return errors.New("watch channel closed")
}
