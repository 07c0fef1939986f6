package cachefill

import (
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestFillFillsOnceAmongConcurrentCallers: callers racing for an absent
// entry fill it once; the others find it filled after the lock.
func TestFillFillsOnceAmongConcurrentCallers(t *testing.T) {
	dir := t.TempDir()
	entry := filepath.Join(dir, "entry")
	done := func() bool { _, err := os.Stat(entry); return err == nil }
	var fills atomic.Int32
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			err := Fill(filepath.Join(dir, "sub", "lock"), done, func() error {
				fills.Add(1)
				time.Sleep(20 * time.Millisecond) // a slow fetch: the others wait on the lock
				return os.WriteFile(entry, nil, 0o644)
			})
			if err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if n := fills.Load(); n != 1 {
		t.Fatalf("filled %d times, want once", n)
	}
}
