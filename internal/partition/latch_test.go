package partition

import (
	"context"
	"testing"
	"time"
)

// TestLatchesLetWritesOfDifferentDocumentsOfAGroupProceedTogether: single
// document writes of one group hold the group shared and their document
// exclusively; a request across the group waits for all of them and goes
// before the shared requests that came after it.
func TestLatchesLetWritesOfDifferentDocumentsOfAGroupProceedTogether(t *testing.T) {
	var l latches
	ctx := context.Background()
	short := func() (context.Context, context.CancelFunc) { return context.WithTimeout(ctx, 50*time.Millisecond) }

	relA, err := l.acquireDocs(ctx, "g", []string{"g/a"})
	if err != nil {
		t.Fatal(err)
	}
	relB, err := l.acquireDocs(ctx, "g", []string{"g/b", "g/b"})
	if err != nil {
		t.Fatalf("another document of the group: %v", err)
	}
	c, cancel := short()
	if _, err := l.acquireDocs(c, "g", []string{"g/c", "g/a"}); err == nil {
		t.Fatal("a request touching a held document did not wait")
	}
	cancel()
	c, cancel = short()
	if _, err := l.acquire(c, "g"); err == nil {
		t.Fatal("an exclusive request did not wait for the shared holders")
	}
	cancel()
	c, cancel = short()
	defer cancel()
	if rel, err := l.acquireDocs(c, "other", []string{"other/a"}); err != nil {
		t.Fatalf("another group: %v", err)
	} else {
		rel()
	}

	// An exclusive waiter holds back later shared requests.
	gotX := make(chan func())
	go func() {
		rel, err := l.acquire(ctx, "g")
		if err != nil {
			t.Error(err)
		}
		gotX <- rel
	}()
	time.Sleep(20 * time.Millisecond)
	c, cancel = short()
	if _, err := l.acquireDocs(c, "g", []string{"g/z"}); err == nil {
		t.Fatal("a shared request went ahead of a waiting exclusive one")
	}
	cancel()
	relA()
	select {
	case <-gotX:
		t.Fatal("the exclusive request got the latch while a document write still held it")
	case <-time.After(20 * time.Millisecond):
	}
	relB()
	relX := <-gotX
	c, cancel = short()
	if _, err := l.acquireDocs(c, "g", []string{"g/a"}); err == nil {
		t.Fatal("a shared request got the latch while it was held exclusively")
	}
	cancel()
	relX()
	rel, err := l.acquireDocs(ctx, "g", []string{"g/a"})
	if err != nil {
		t.Fatal(err)
	}
	rel()
	if len(l.groups) != 0 || len(l.docs) != 0 {
		t.Fatalf("latches left behind: %d groups, %d documents", len(l.groups), len(l.docs))
	}
}
