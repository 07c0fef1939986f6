package partition

import (
	"context"
	"maps"
	"slices"
	"sync"
)

// latches serialise the requests of a document group that conflict: a
// request holds its latches from evaluation until its write set is applied,
// so the next evaluation that reads what it wrote sees the write.
//
// A request made of single-document operations (put, patch, delete) holds
// its group's latch shared and the latch of each document it touches
// exclusively: writes of different documents of one group (new messages of
// one mailbox) are evaluated and replicated together, and writes of one
// document in turn. A request that reads across the group (an
// auto-increment insert, a collection delete, a backfill chunk) holds the
// group's latch exclusively, so it waits for every write of the group in
// flight and holds back the next ones; it is preferred over new shared
// holders, so it is not starved. Groups are independent.
type latches struct {
	mu     sync.Mutex
	groups map[string]*latch
	docs   map[string]*latch
}

// latch is a shared/exclusive lock whose waiters can give up with their
// context. Fields are guarded by latches.mu.
type latch struct {
	shared    int  // holders in shared mode
	exclusive bool // held exclusively
	waitingX  int  // requests waiting to hold it exclusively
	refs      int  // holders and waiters: the entry is dropped at 0
	// changed is closed (and replaced) whenever the latch is released or
	// an exclusive waiter gives up.
	changed chan struct{}
}

func (e *latch) wake() {
	close(e.changed)
	e.changed = make(chan struct{})
}

// lock takes the latch under key in m, waiting for ctx at most; l.mu is
// held on entry and on return.
func (l *latches) lock(ctx context.Context, m map[string]*latch, key string, exclusive bool) (*latch, error) {
	e := m[key]
	if e == nil {
		e = &latch{changed: make(chan struct{})}
		m[key] = e
	}
	e.refs++
	if exclusive {
		e.waitingX++
	}
	for {
		if exclusive && !e.exclusive && e.shared == 0 {
			e.waitingX--
			e.exclusive = true
			return e, nil
		}
		if !exclusive && !e.exclusive && e.waitingX == 0 {
			e.shared++
			return e, nil
		}
		ch := e.changed
		l.mu.Unlock()
		select {
		case <-ch:
			l.mu.Lock()
		case <-ctx.Done():
			l.mu.Lock()
			if exclusive {
				e.waitingX--
				e.wake() // shared waiters may go now
			}
			l.unref(m, key, e)
			return nil, ctx.Err()
		}
	}
}

// unlock releases a latch taken by lock; l.mu is held.
func (l *latches) unlock(m map[string]*latch, key string, e *latch, exclusive bool) {
	if exclusive {
		e.exclusive = false
	} else {
		e.shared--
	}
	e.wake()
	l.unref(m, key, e)
}

func (l *latches) unref(m map[string]*latch, key string, e *latch) {
	if e.refs--; e.refs == 0 {
		delete(m, key)
	}
}

func (l *latches) init() {
	if l.groups == nil {
		l.groups = make(map[string]*latch)
		l.docs = make(map[string]*latch)
	}
}

// acquire takes the latch of group exclusively, or fails when ctx ends.
func (l *latches) acquire(ctx context.Context, group string) (release func(), err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.init()
	e, err := l.lock(ctx, l.groups, group, true)
	if err != nil {
		return nil, err
	}
	return func() {
		l.mu.Lock()
		l.unlock(l.groups, group, e, true)
		l.mu.Unlock()
	}, nil
}

// acquireDocs takes the latch of group shared and those of docs (storage
// keys of documents of the group) exclusively, in key order so that two
// requests never wait for each other; or fails when ctx ends.
func (l *latches) acquireDocs(ctx context.Context, group string, docs []string) (release func(), err error) {
	docs = slices.Compact(slices.Sorted(slices.Values(docs)))
	l.mu.Lock()
	defer l.mu.Unlock()
	l.init()
	g, err := l.lock(ctx, l.groups, group, false)
	if err != nil {
		return nil, err
	}
	held := make([]*latch, 0, len(docs))
	unlock := func() {
		for i, e := range held {
			l.unlock(l.docs, docs[i], e, true)
		}
		l.unlock(l.groups, group, g, false)
	}
	for _, d := range docs {
		e, err := l.lock(ctx, l.docs, d, true)
		if err != nil {
			unlock()
			return nil, err
		}
		held = append(held, e)
	}
	return func() {
		l.mu.Lock()
		unlock()
		l.mu.Unlock()
	}, nil
}

// acquireGroups takes, for every group of docs (document storage keys by
// group), the group's latch shared and its documents' exclusively: groups
// in key order, each group's documents in key order. Every caller that
// holds latches of several groups takes them in this one order, and the
// others hold one group's, so no two requests wait for each other.
func (l *latches) acquireGroups(ctx context.Context, docs map[string][]string) (release func(), err error) {
	var releases []func()
	releaseAll := func() {
		for _, r := range slices.Backward(releases) {
			r()
		}
	}
	for _, g := range slices.Sorted(maps.Keys(docs)) {
		r, err := l.acquireDocs(ctx, g, docs[g])
		if err != nil {
			releaseAll()
			return nil, err
		}
		releases = append(releases, r)
	}
	return releaseAll, nil
}

// wait returns once no request holds the latch of group that had it when
// wait was called (or ctx ends). Readers use it so they never observe a write
// that is applied but not yet durable.
func (l *latches) wait(ctx context.Context, group string) error {
	l.mu.Lock()
	if l.groups[group] == nil {
		l.mu.Unlock()
		return nil
	}
	l.mu.Unlock()
	release, err := l.acquire(ctx, group)
	if err != nil {
		return err
	}
	release()
	return nil
}
