// Package cachefill fills a per-user cache entry once across concurrent
// processes: the test helpers that fetch a toolchain or packages from a
// registry on first use (kafkatest's Kafka jars, sparktest's virtualenv)
// share its lock-and-recheck.
package cachefill

import (
	"fmt"
	"os"
	"path/filepath"
	"syscall"
)

// Fill makes sure the entry that done reports on is present: when done
// is false it takes the exclusive file lock lockPath (creating its
// directory), checks done again (another process may have filled the
// entry while this one waited) and only then calls fill. fill must leave
// done false unless it succeeded.
func Fill(lockPath string, done func() bool, fill func() error) error {
	if done() {
		return nil
	}
	if err := os.MkdirAll(filepath.Dir(lockPath), 0o755); err != nil {
		return err
	}
	lock, err := os.OpenFile(lockPath, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return err
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		return fmt.Errorf("locking %s: %w", lockPath, err)
	}
	defer syscall.Flock(int(lock.Fd()), syscall.LOCK_UN)
	if done() {
		return nil
	}
	return fill()
}
