package auth

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/doppio-db/doppio/internal/certs"
	"github.com/doppio-db/doppio/internal/problem"
)

// RootUser is the built-in user that always exists and holds root.
const RootUser = "root"

const (
	usersDir = "/auth/users/"
	keyPath  = "/auth/token-key"
	// maxAttempts bounds compare-and-swap retries of a user change; each
	// failure means another writer succeeded.
	maxAttempts = 32
	// DefaultResyncInterval is how often the whole user list is re-read
	// from etcd, the backstop of the watch.
	DefaultResyncInterval = 5 * time.Second
	// DefaultMaxStale is how long a node honours credentials without
	// having confirmed its copy of the users against etcd.
	DefaultMaxStale = 15 * time.Second
)

// record is a user as stored in etcd.
type record struct {
	// Hash is the password's argon2id PHC string; "" for a user without
	// a password (certificate only).
	Hash string `json:"hash,omitempty"`
	// Generation is drawn at random at creation and at every password
	// change; tokens and remembered Basic credentials are bound to it.
	Generation uint64    `json:"generation"`
	Grants     []Grant   `json:"grants,omitempty"`
	Created    time.Time `json:"created"`
}

// User is a user as the users API shows it.
type User struct {
	Name        string    `json:"name"`
	HasPassword bool      `json:"hasPassword"`
	Grants      []Grant   `json:"grants"`
	Created     time.Time `json:"created,omitzero"`
}

// StoreOptions tune a Store; zero values take the defaults.
type StoreOptions struct {
	// ResyncInterval: see DefaultResyncInterval.
	ResyncInterval time.Duration
	// MaxStale: see DefaultMaxStale.
	MaxStale time.Duration
	// Hash are the parameters new password hashes are made with
	// (default DefaultHashParams).
	Hash HashParams
	// NoWatch, a testing knob, leaves the cache to the periodic resync
	// alone.
	NoWatch bool
	Logger  *slog.Logger
}

// Store is the users and the token key, cached from etcd and kept current
// by a watch and a periodic resync (see the package doc). Safe for
// concurrent use.
type Store struct {
	cli    *clientv3.Client
	prefix string
	opts   StoreOptions
	log    *slog.Logger
	key    []byte // token signing key

	mu    sync.RWMutex
	users map[string]record
	revs  map[string]int64 // user -> revision of the put or delete cached
	// confirmed is when the last full read that succeeded was sent: the
	// cache reflects every change committed before it.
	confirmed time.Time
	// hashes counts slow password hashes computed (made or verified).
	hashes atomic.Uint64
	// hashing bounds the hashes running at once.
	hashing chan struct{}

	cancel context.CancelFunc
	done   sync.WaitGroup
}

// OpenStore reads the users and the token key under prefix (creating the
// key on the cluster's first start) and keeps the cache current until
// Close.
func OpenStore(ctx context.Context, cli *clientv3.Client, prefix string, o StoreOptions) (*Store, error) {
	if o.ResyncInterval <= 0 {
		o.ResyncInterval = DefaultResyncInterval
	}
	if o.MaxStale <= 0 {
		o.MaxStale = DefaultMaxStale
	}
	if o.Hash == (HashParams{}) {
		o.Hash = DefaultHashParams
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	s := &Store{
		cli: cli, prefix: strings.TrimSuffix(prefix, "/"), opts: o, log: o.Logger.With("component", "auth"),
		users: map[string]record{}, revs: map[string]int64{},
		hashing: make(chan struct{}, max(1, runtimeProcs())),
	}
	var err error
	if s.key, err = s.tokenKey(ctx); err != nil {
		return nil, fmt.Errorf("auth: token key: %w", err)
	}
	rev, err := s.load(ctx)
	if err != nil {
		return nil, fmt.Errorf("auth: load users: %w", err)
	}
	wctx, cancel := context.WithCancel(context.Background())
	s.cancel = cancel
	s.done.Add(1)
	go s.resyncLoop(wctx)
	if !o.NoWatch {
		s.done.Add(1)
		go s.watch(wctx, rev)
	}
	return s, nil
}

// Close stops the watch and the resync.
func (s *Store) Close() {
	s.cancel()
	s.done.Wait()
}

// tokenKey reads the token signing key, writing a random one if the
// cluster has none yet; every node that starts at once reads the one
// that was written first.
func (s *Store) tokenKey(ctx context.Context) ([]byte, error) {
	k := make([]byte, keyBytes)
	if _, err := rand.Read(k); err != nil {
		return nil, err
	}
	path := s.prefix + keyPath
	resp, err := s.cli.Txn(ctx).
		If(clientv3.Compare(clientv3.CreateRevision(path), "=", 0)).
		Then(clientv3.OpPut(path, string(k))).
		Else(clientv3.OpGet(path)).Commit()
	if err != nil {
		return nil, err
	}
	if resp.Succeeded {
		return k, nil
	}
	kvs := resp.Responses[0].GetResponseRange().Kvs
	if len(kvs) != 1 || len(kvs[0].Value) != keyBytes {
		return nil, errors.New("stored token key is not 32 bytes")
	}
	return kvs[0].Value, nil
}

func (s *Store) userKey(name string) string { return s.prefix + usersDir + name }

// load re-reads every user at one revision and returns it.
func (s *Store) load(ctx context.Context) (int64, error) {
	sent := time.Now()
	resp, err := s.cli.Get(ctx, s.prefix+usersDir, clientv3.WithPrefix())
	if err != nil {
		return 0, err
	}
	rev := resp.Header.Revision
	seen := map[string]bool{}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, kv := range resp.Kvs {
		name := strings.TrimPrefix(string(kv.Key), s.prefix+usersDir)
		seen[name] = true
		s.applyLocked(name, kv.Value, kv.ModRevision, false)
	}
	for name := range s.revs {
		if !seen[name] {
			s.applyLocked(name, nil, rev, true)
		}
	}
	s.confirmed = sent
	return rev, nil
}

// applyLocked caches name's value (or deletion) as of rev unless the
// cache already holds that revision or a later one.
func (s *Store) applyLocked(name string, val []byte, rev int64, deleted bool) {
	if r, ok := s.revs[name]; ok && r >= rev {
		return
	}
	s.revs[name] = rev
	if !deleted {
		var rec record
		if err := json.Unmarshal(val, &rec); err == nil {
			s.users[name] = rec
			return
		}
		s.log.Warn("ignoring unusable user entry", "user", name)
	}
	delete(s.users, name)
}

func (s *Store) resyncLoop(ctx context.Context) {
	defer s.done.Done()
	t := time.NewTicker(s.opts.ResyncInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		rctx, cancel := context.WithTimeout(ctx, s.opts.ResyncInterval)
		if _, err := s.load(rctx); err != nil && ctx.Err() == nil {
			s.log.Warn("users resync failed", "err", err)
		}
		cancel()
	}
}

// watch applies changes as etcd delivers them, from revision rev on.
func (s *Store) watch(ctx context.Context, rev int64) {
	defer s.done.Done()
	for ctx.Err() == nil {
		wctx, cancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
		for resp := range s.cli.Watch(wctx, s.prefix+usersDir, clientv3.WithPrefix(), clientv3.WithRev(rev+1)) {
			if resp.CompactRevision != 0 {
				if r, err := s.load(ctx); err == nil {
					rev = r
				}
				break
			}
			if resp.Err() != nil {
				break
			}
			s.mu.Lock()
			for _, ev := range resp.Events {
				name := strings.TrimPrefix(string(ev.Kv.Key), s.prefix+usersDir)
				s.applyLocked(name, ev.Kv.Value, ev.Kv.ModRevision, ev.Type == mvccpb.DELETE)
				rev = max(rev, ev.Kv.ModRevision)
			}
			s.mu.Unlock()
		}
		cancel()
		select {
		case <-ctx.Done():
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// fresh reports a 503 when the cache has not been confirmed against etcd
// for longer than MaxStale: revocations may have been missed.
func (s *Store) fresh() error {
	s.mu.RLock()
	age := time.Since(s.confirmed)
	s.mu.RUnlock()
	if age > s.opts.MaxStale {
		e := problem.New(problem.Unavailable, "this node's copy of the users is %s old (etcd unreachable); credentials cannot be checked", age.Round(time.Second))
		e.RetryAfter = 1
		return e
	}
	return nil
}

// lookup returns name's cached record; root always has one.
func (s *Store) lookup(name string) (record, bool) {
	s.mu.RLock()
	rec, ok := s.users[name]
	s.mu.RUnlock()
	if name == RootUser {
		rec.Grants = withRoot(rec.Grants)
		return rec, true
	}
	return rec, ok
}

func withRoot(gs []Grant) []Grant {
	if slices.Contains(gs, Grant{Role: RoleRoot}) {
		return gs
	}
	return append([]Grant{{Role: RoleRoot}}, gs...)
}

// Grants returns the grants user holds now, and whether the user exists.
func (s *Store) Grants(user string) ([]Grant, bool) {
	rec, ok := s.lookup(user)
	return rec.Grants, ok
}

// Get returns the named user.
func (s *Store) Get(name string) (User, error) {
	rec, ok := s.lookup(name)
	if !ok {
		return User{}, problem.New(problem.NotFound, "no user %q", name)
	}
	return userOf(name, rec), nil
}

func userOf(name string, rec record) User {
	gs := rec.Grants
	if gs == nil {
		gs = []Grant{}
	}
	return User{Name: name, HasPassword: rec.Hash != "", Grants: gs, Created: rec.Created}
}

// List returns every user, root included, by name.
func (s *Store) List() []User {
	s.mu.RLock()
	names := make([]string, 0, len(s.users)+1)
	for n := range s.users {
		names = append(names, n)
	}
	s.mu.RUnlock()
	if !slices.Contains(names, RootUser) {
		names = append(names, RootUser)
	}
	sort.Strings(names)
	out := make([]User, 0, len(names))
	for _, n := range names {
		if rec, ok := s.lookup(n); ok {
			out = append(out, userOf(n, rec))
		}
	}
	return out
}

// ValidName reports why name cannot be a user's name, as a 400 problem.
func ValidName(name string) error {
	if err := certs.ValidUser(name); err != nil {
		return problem.Field(problem.Malformed, "name", "%s", strings.TrimPrefix(err.Error(), "certs: "))
	}
	return nil
}

// Put creates the user name if absent and, when password is non-nil,
// sets its password (which refuses every token and remembered credential
// of the old one). It reports whether the user was created.
func (s *Store) Put(ctx context.Context, name string, password *string) (created bool, err error) {
	if err := ValidName(name); err != nil {
		return false, err
	}
	var hash string
	if password != nil {
		if err := validPassword(*password); err != nil {
			return false, problem.Field(problem.Invalid, "password", "%s", err)
		}
		if hash, err = s.hash(ctx, *password); err != nil {
			return false, err
		}
	}
	err = s.update(ctx, name, func(rec *record, exists bool) error {
		created = !exists
		if !exists {
			rec.Created = time.Now().UTC().Truncate(time.Second)
			rec.Generation = randomGeneration()
			if name == RootUser {
				rec.Grants = []Grant{{Role: RoleRoot}}
			}
		}
		if password != nil {
			rec.Hash, rec.Generation = hash, randomGeneration()
		}
		return nil
	})
	return created, err
}

// Delete removes the user name; root cannot be deleted.
func (s *Store) Delete(ctx context.Context, name string) error {
	if name == RootUser {
		return problem.New(problem.Conflict, "the built-in user root cannot be deleted")
	}
	return s.change(ctx, name, func(_ *record, exists bool) (bool, error) {
		if !exists {
			return false, problem.New(problem.NotFound, "no user %q", name)
		}
		return true, nil
	})
}

// AddGrant grants g to name; it reports whether the user lacked it.
func (s *Store) AddGrant(ctx context.Context, name string, g Grant) (added bool, err error) {
	if err := g.Validate(); err != nil {
		return false, problem.Field(problem.Invalid, "role", "%s", err)
	}
	err = s.update(ctx, name, func(rec *record, exists bool) error {
		if !exists && name != RootUser {
			return problem.New(problem.NotFound, "no user %q", name)
		}
		if name == RootUser {
			rec.Grants = withRoot(rec.Grants)
		}
		added = !slices.Contains(rec.Grants, g)
		if added {
			rec.Grants = append(rec.Grants, g)
		}
		return nil
	})
	return added, err
}

// RemoveGrant revokes g from name; root cannot lose root.
func (s *Store) RemoveGrant(ctx context.Context, name string, g Grant) error {
	if err := g.Validate(); err != nil {
		return problem.Field(problem.Invalid, "role", "%s", err)
	}
	if name == RootUser && g.Role == RoleRoot {
		return problem.New(problem.Conflict, "the built-in user root cannot lose the root role")
	}
	return s.update(ctx, name, func(rec *record, exists bool) error {
		if !exists && name != RootUser {
			return problem.New(problem.NotFound, "no user %q", name)
		}
		i := slices.Index(rec.Grants, g)
		if i < 0 {
			return problem.New(problem.NotFound, "user %q does not hold %s", name, g)
		}
		rec.Grants = slices.Delete(rec.Grants, i, i+1)
		return nil
	})
}

// update applies edit to name's stored record (a zero one when absent).
func (s *Store) update(ctx context.Context, name string, edit func(rec *record, exists bool) error) error {
	return s.change(ctx, name, func(rec *record, exists bool) (bool, error) { return false, edit(rec, exists) })
}

// change applies edit to name's stored record (a zero one when absent),
// or deletes the record when edit says so, with a compare-and-swap
// retried on contention; edit's error aborts.
func (s *Store) change(ctx context.Context, name string, edit func(rec *record, exists bool) (remove bool, err error)) error {
	key := s.userKey(name)
	for range maxAttempts {
		cur, rev, err := s.read(ctx, name)
		if err != nil {
			return err
		}
		var rec record
		if cur != nil {
			rec = *cur
			rec.Grants = slices.Clone(rec.Grants)
		}
		remove, err := edit(&rec, cur != nil)
		if err != nil {
			return err
		}
		val, err := json.Marshal(rec)
		if err != nil {
			return err
		}
		op := clientv3.OpPut(key, string(val))
		if remove {
			op = clientv3.OpDelete(key)
		}
		resp, err := s.cli.Txn(ctx).If(clientv3.Compare(clientv3.ModRevision(key), "=", rev)).Then(op).Commit()
		if err != nil {
			return storeError(ctx, err)
		}
		if resp.Succeeded {
			s.mu.Lock()
			s.applyLocked(name, val, resp.Header.Revision, remove)
			s.mu.Unlock()
			return nil
		}
	}
	return busy()
}

// read returns name's stored record (nil when absent) and its ModRevision
// (0 when absent), read from etcd, not the cache.
func (s *Store) read(ctx context.Context, name string) (*record, int64, error) {
	resp, err := s.cli.Get(ctx, s.userKey(name))
	if err != nil {
		return nil, 0, storeError(ctx, err)
	}
	if len(resp.Kvs) == 0 {
		return nil, 0, nil
	}
	var rec record
	if err := json.Unmarshal(resp.Kvs[0].Value, &rec); err != nil {
		return nil, 0, fmt.Errorf("auth: stored user %q: %w", name, err)
	}
	return &rec, resp.Kvs[0].ModRevision, nil
}

// hash makes pw's stored hash, waiting for a hashing slot.
func (s *Store) hash(ctx context.Context, pw string) (string, error) {
	if err := s.acquire(ctx); err != nil {
		return "", err
	}
	defer s.release()
	return hashPassword(pw, s.opts.Hash)
}

// verify checks pw against a stored hash, waiting for a hashing slot.
func (s *Store) verify(ctx context.Context, stored, pw string) (bool, error) {
	if err := s.acquire(ctx); err != nil {
		return false, err
	}
	defer s.release()
	return verifyPassword(stored, pw)
}

func (s *Store) acquire(ctx context.Context) error {
	select {
	case s.hashing <- struct{}{}:
		s.hashes.Add(1)
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (s *Store) release() { <-s.hashing }

// Hashes returns how many slow password hashes this store has computed.
func (s *Store) Hashes() uint64 { return s.hashes.Load() }

func randomGeneration() uint64 {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return binary.BigEndian.Uint64(b[:])
}

// storeError is the caller's own context error, or Unavailable: etcd is
// down or has no leader, and retrying later can succeed.
func storeError(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	e := problem.New(problem.Unavailable, "users unavailable: %v", err)
	e.RetryAfter = 1
	return e
}

func busy() error {
	e := problem.New(problem.Unavailable, "users busy: too many concurrent changes, retry")
	e.RetryAfter = 1
	return e
}

func runtimeProcs() int { return runtime.GOMAXPROCS(0) }
