package lazyctx

import (
	"context"
	"errors"
	"testing"
	"time"
)

func TestLazyStartsNoTimerUntilWaitedOn(t *testing.T) {
	d := &lazy{Context: context.Background(), deadline: time.Now().Add(time.Hour)}
	if err := d.Err(); err != nil {
		t.Fatalf("Err before the deadline = %v, want nil", err)
	}
	if dl, ok := d.Deadline(); !ok || !dl.Equal(d.deadline) {
		t.Fatalf("Deadline = %v, %v", dl, ok)
	}
	if d.timed != nil {
		t.Fatal("Err and Deadline started a timer")
	}
	d.cancel()
	if err := d.Err(); !errors.Is(err, context.Canceled) {
		t.Fatalf("Err after cancel = %v, want Canceled", err)
	}
	select {
	case <-d.Done():
	default:
		t.Fatal("Done asked for after cancel is not closed")
	}
}

func TestLazyExpires(t *testing.T) {
	d := &lazy{Context: context.Background(), deadline: time.Now().Add(20 * time.Millisecond)}
	defer d.cancel()
	select {
	case <-d.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("Done not closed at the deadline")
	}
	if err := d.Err(); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Err = %v, want DeadlineExceeded", err)
	}

	past := &lazy{Context: context.Background(), deadline: time.Now().Add(-time.Millisecond)}
	if err := past.Err(); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Err past the deadline without a timer = %v, want DeadlineExceeded", err)
	}
}

func TestLazyFollowsItsParent(t *testing.T) {
	parent, cancelParent := context.WithCancel(context.WithValue(context.Background(), ctxKey{}, "v"))
	d := &lazy{Context: parent, deadline: time.Now().Add(time.Hour)}
	defer d.cancel()
	if d.Value(ctxKey{}) != "v" {
		t.Fatal("values of the parent are not seen")
	}
	cancelParent()
	if err := d.Err(); !errors.Is(err, context.Canceled) {
		t.Fatalf("Err after the parent's cancel = %v, want Canceled", err)
	}
	select {
	case <-d.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("Done not closed when the parent is canceled")
	}
	// A child context (as net/http and gRPC make) is canceled with it.
	child, stop := context.WithCancel(&lazy{Context: context.Background(), deadline: time.Now().Add(time.Hour)})
	defer stop()
	if _, ok := child.Deadline(); !ok {
		t.Fatal("a child does not inherit the deadline")
	}
}

type ctxKey struct{}
