package partition

import (
	"context"
	"sync"
)

// latches serialise requests of one document group: a request holds its
// group's latch from evaluation until its write set is applied, so the next
// evaluation in the group reads the previous write. Groups are independent.
type latches struct {
	mu     sync.Mutex
	groups map[string]*latch
}

type latch struct {
	sem  chan struct{}
	refs int
}

// acquire waits for the latch of group, or for ctx to end.
func (l *latches) acquire(ctx context.Context, group string) (release func(), err error) {
	l.mu.Lock()
	if l.groups == nil {
		l.groups = make(map[string]*latch)
	}
	e := l.groups[group]
	if e == nil {
		e = &latch{sem: make(chan struct{}, 1)}
		l.groups[group] = e
	}
	e.refs++
	l.mu.Unlock()

	select {
	case e.sem <- struct{}{}:
		return func() { <-e.sem; l.unref(group, e) }, nil
	case <-ctx.Done():
		l.unref(group, e)
		return nil, ctx.Err()
	}
}

func (l *latches) unref(group string, e *latch) {
	l.mu.Lock()
	e.refs--
	if e.refs == 0 {
		delete(l.groups, group)
	}
	l.mu.Unlock()
}

// wait returns once no request holds the latch of group that had it when
// wait was called (or ctx ends). Readers use it so they never observe a write
// that is applied but not yet durable.
func (l *latches) wait(ctx context.Context, group string) error {
	l.mu.Lock()
	e := l.groups[group]
	if e == nil {
		l.mu.Unlock()
		return nil
	}
	e.refs++
	l.mu.Unlock()
	defer l.unref(group, e)
	select {
	case e.sem <- struct{}{}:
		<-e.sem
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
