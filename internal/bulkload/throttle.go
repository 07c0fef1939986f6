package bulkload

import (
	"context"

	"golang.org/x/time/rate"
)

// limiter bounds bytes per second; a nil *limiter bounds nothing.
type limiter struct{ l *rate.Limiter }

// newLimiter returns a limiter of perSecond bytes (nil when perSecond is
// not positive) whose bursts hold at least one chunk.
func newLimiter(perSecond int64, chunk int) *limiter {
	if perSecond <= 0 {
		return nil
	}
	burst := int(min(perSecond, 1<<30))
	burst = max(burst/4, chunk)
	return &limiter{rate.NewLimiter(rate.Limit(perSecond), burst)}
}

// wait blocks until n bytes may pass.
func (l *limiter) wait(ctx context.Context, n int) error {
	if l == nil {
		return nil
	}
	for n > 0 {
		k := min(n, l.l.Burst())
		if err := l.l.WaitN(ctx, k); err != nil {
			return err
		}
		n -= k
	}
	return nil
}

// loadLimiter is the limiter of rec's own throttle on this node, shared
// by its drivers here.
func (m *Manager) loadLimiter(rec Record) *limiter {
	m.mu.Lock()
	defer m.mu.Unlock()
	l, ok := m.loads[rec.ID]
	if !ok {
		l = newLimiter(rec.Throttle, m.cfg.ChunkBytes)
		m.loads[rec.ID] = l
	}
	return l
}
