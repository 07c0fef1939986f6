package benchutil

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

// Settle waits until the machine's CPUs have been at least idle (a share,
// e.g. 0.85) for two consecutive one-second windows, or until limit has
// passed, and says how long it waited and how idle the last window was. A
// benchmark calls it before each measured run, so that no run starts while
// the store measured before it still flushes, checkpoints or compacts what
// its own run wrote.
func Settle(ctx context.Context, idle float64, limit time.Duration) (waited time.Duration, last float64, err error) {
	start := time.Now()
	quiet := 0
	prevIdle, prevTotal, err := cpuTimes()
	if err != nil {
		return 0, 0, err
	}
	for quiet < 2 && time.Since(start) < limit {
		select {
		case <-ctx.Done():
			return time.Since(start), last, ctx.Err()
		case <-time.After(time.Second):
		}
		i, t, err := cpuTimes()
		if err != nil {
			return time.Since(start), last, err
		}
		if t > prevTotal {
			last = float64(i-prevIdle) / float64(t-prevTotal)
		}
		prevIdle, prevTotal = i, t
		if last >= idle {
			quiet++
		} else {
			quiet = 0
		}
	}
	return time.Since(start), last, nil
}

// cpuTimes reads the idle (idle + iowait) and total jiffies of all CPUs
// from /proc/stat.
func cpuTimes() (idle, total uint64, err error) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, 0, err
	}
	line, _, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(line)
	if len(f) < 6 || f[0] != "cpu" {
		return 0, 0, fmt.Errorf("/proc/stat: unexpected first line %q", line)
	}
	for i, s := range f[1:] {
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			return 0, 0, fmt.Errorf("/proc/stat: %q: %w", s, err)
		}
		total += v
		if i == 3 || i == 4 { // idle, iowait
			idle += v
		}
	}
	return idle, total, nil
}

// Calm waits until the machine is at least 80% idle (see Settle), for at
// most limit, between a benchmark's measured phases; it reports a wait
// that took over a few seconds.
func Calm(ctx context.Context, limit time.Duration, logf func(string, ...any)) {
	if waited, idle, err := Settle(ctx, 0.8, limit); err == nil && waited > 5*time.Second {
		logf("settled for %v (%.0f%% idle)", waited.Round(time.Second), 100*idle)
	}
}
