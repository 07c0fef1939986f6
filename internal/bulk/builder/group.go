package builder

import (
	"context"
	"sync"
)

// group runs goroutines, keeps the first error and cancels its context
// on it; limit > 0 bounds how many run at once.
type group struct {
	cancel context.CancelCauseFunc
	wg     sync.WaitGroup
	sem    chan struct{}
	once   sync.Once
	err    error
}

func newGroup(ctx context.Context, limit int) (*group, context.Context) {
	ctx, cancel := context.WithCancelCause(ctx)
	g := &group{cancel: cancel}
	if limit > 0 {
		g.sem = make(chan struct{}, limit)
	}
	return g, ctx
}

func (g *group) Go(fn func() error) {
	if g.sem != nil {
		g.sem <- struct{}{}
	}
	g.wg.Add(1)
	go func() {
		defer g.wg.Done()
		if g.sem != nil {
			defer func() { <-g.sem }()
		}
		if err := fn(); err != nil {
			g.once.Do(func() {
				g.err = err
				g.cancel(err)
			})
		}
	}()
}

func (g *group) Wait() error {
	g.wg.Wait()
	g.cancel(nil)
	return g.err
}
