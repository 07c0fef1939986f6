// Package notify tells subscribers that something changed, coalescing
// the notifications a slow subscriber has not yet received into one.
//
// A subscriber is woken, then re-reads the state it watches: a
// notification carries no data, so missing an intermediate one loses
// nothing.
package notify

import "sync"

// Notifier delivers coalesced change notifications to its subscribers.
// The zero value is ready to use; a Notifier is safe for concurrent use.
type Notifier struct {
	mu   sync.Mutex
	subs map[int]chan struct{}
	next int
}

// Subscribe returns a channel that receives a value after every Notify
// (buffered by one: notifications pending on it coalesce) and a cancel
// function that stops delivery. cancel may be called any number of
// times; it does not close the channel.
func (n *Notifier) Subscribe() (<-chan struct{}, func()) {
	ch := make(chan struct{}, 1)
	n.mu.Lock()
	if n.subs == nil {
		n.subs = map[int]chan struct{}{}
	}
	id := n.next
	n.next++
	n.subs[id] = ch
	n.mu.Unlock()
	return ch, func() {
		n.mu.Lock()
		delete(n.subs, id)
		n.mu.Unlock()
	}
}

// Notify wakes every subscriber. It never blocks: a subscriber with a
// notification still pending keeps that one.
func (n *Notifier) Notify() {
	n.mu.Lock()
	defer n.mu.Unlock()
	for _, ch := range n.subs {
		select {
		case ch <- struct{}{}:
		default: // a notification is already pending
		}
	}
}
