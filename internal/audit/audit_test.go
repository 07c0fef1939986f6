package audit

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/doppio-db/doppio/internal/auth"
)

func readEvents(t *testing.T, path string) []Event {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []Event
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var e Event
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			t.Fatalf("line %q: %v", sc.Text(), err)
		}
		out = append(out, e)
	}
	return out
}

func TestRecordsAreWholeJSONLinesInOrder(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sub", "audit.log")
	l, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.FixedZone("x", 3600))
	if err := l.Record(Event{Time: at, User: "alice", From: "10.0.0.1", Action: "login", Outcome: Success}); err != nil {
		t.Fatal(err)
	}
	if err := l.BulkLoad(auth.Caller{User: "bob"}, "10.0.0.2", "A", "", errors.New("disk full")); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for i := range 50 {
		wg.Go(func() { _ = l.Record(Event{User: fmt.Sprint(i), Action: "user.put", Outcome: Success}) })
	}
	wg.Wait()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if err := l.Record(Event{Action: "late"}); !errors.Is(err, os.ErrClosed) {
		t.Fatalf("record after close: %v", err)
	}
	evs := readEvents(t, path)
	if len(evs) != 52 {
		t.Fatalf("%d lines, want 52", len(evs))
	}
	want0 := Event{Time: at.UTC(), User: "alice", From: "10.0.0.1", Action: "login", Outcome: Success}
	if evs[0] != want0 {
		t.Fatalf("first line %+v, want %+v", evs[0], want0)
	}
	want1 := Event{Time: evs[1].Time, User: "bob", From: "10.0.0.2", Action: "bulk.load", Target: "A", Outcome: Failure, Detail: "disk full"}
	if evs[1] != want1 || evs[1].Time.IsZero() {
		t.Fatalf("second line %+v, want %+v", evs[1], want1)
	}
	if fi, _ := os.Stat(path); fi.Mode().Perm() != 0o600 {
		t.Fatalf("mode %v, want 0600", fi.Mode().Perm())
	}
}

func TestANilLogRecordsNothing(t *testing.T) {
	var l *Log
	if err := l.Record(Event{Action: "x"}); err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
}
