package notify

import (
	"sync"
	"testing"
)

func pending(ch <-chan struct{}) int {
	n := 0
	for {
		select {
		case <-ch:
			n++
		default:
			return n
		}
	}
}

// TestNotifyWakesEverySubscriberOnce: each subscriber gets one value per
// Notify it has drained, and many Notifys before a read coalesce into one.
func TestNotifyWakesEverySubscriberOnce(t *testing.T) {
	var n Notifier
	a, cancelA := n.Subscribe()
	defer cancelA()
	b, cancelB := n.Subscribe()
	defer cancelB()
	if got := pending(a); got != 0 {
		t.Fatalf("before any Notify: %d pending", got)
	}
	n.Notify()
	if got := pending(a); got != 1 {
		t.Fatalf("a after one Notify: %d pending, want 1", got)
	}
	for range 5 {
		n.Notify()
	}
	if got := pending(a); got != 1 {
		t.Fatalf("a after five Notifys: %d pending, want 1 (coalesced)", got)
	}
	if got := pending(b); got != 1 {
		t.Fatalf("b, never drained, after six Notifys: %d pending, want 1", got)
	}
}

// TestCancelStopsDeliveryAndIsIdempotent: after cancel the channel gets
// nothing more; cancelling twice is harmless and leaves the other
// subscribers alone.
func TestCancelStopsDeliveryAndIsIdempotent(t *testing.T) {
	var n Notifier
	a, cancelA := n.Subscribe()
	b, cancelB := n.Subscribe()
	defer cancelB()
	cancelA()
	cancelA()
	n.Notify()
	if got := pending(a); got != 0 {
		t.Fatalf("cancelled subscriber: %d pending, want 0", got)
	}
	if got := pending(b); got != 1 {
		t.Fatalf("other subscriber: %d pending, want 1", got)
	}
	if len(n.subs) != 1 {
		t.Fatalf("%d subscriptions held, want 1", len(n.subs))
	}
}

// TestNotifyNeverBlocks: Notify returns although no subscriber reads, and
// runs concurrently with Subscribe and cancel.
func TestNotifyNeverBlocks(t *testing.T) {
	var n Notifier
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 100 {
				_, cancel := n.Subscribe()
				n.Notify()
				cancel()
			}
		}()
	}
	wg.Wait()
	if len(n.subs) != 0 {
		t.Fatalf("%d subscriptions left after every cancel", len(n.subs))
	}
}
