package main

import (
	"context"
	"fmt"
	"strconv"

	"github.com/doppio-db/doppio/bench/internal/mailboxdata"
)

// System is one store under test. Every method is safe for concurrent use
// once Open has returned; every write is durable when it returns.
type System interface {
	// Name is the system's label in tables and plots.
	Name() string
	// Load writes the initial messages of one mailbox (ids 1..len(msgs)).
	Load(ctx context.Context, mailbox string, msgs []mailboxdata.Message) error
	// Ready is called once after every mailbox is loaded, before requests.
	Ready(ctx context.Context) error
	// Insert writes one new message.
	Insert(ctx context.Context, mailbox string, id int64, m mailboxdata.Message) error
	// Inbox answers the paper's query: the mailbox's messages with isInbox
	// true, newest (createdOn) first, at most limit, as (id, document).
	Inbox(ctx context.Context, mailbox string, limit int) ([]Hit, error)
	// Search answers body:word, newest first, at most limit.
	Search(ctx context.Context, mailbox, word string, limit int) ([]Hit, error)
	// DiskBytes is the size of the system's files.
	DiskBytes() int64
	// Close stops the system and removes nothing.
	Close() error
}

// Hit is one message of a query answer: its id and its JSON document.
type Hit struct {
	ID  int64
	Doc []byte
}

func ids(hs []Hit) []int64 {
	out := make([]int64, len(hs))
	for i, h := range hs {
		out[i] = h.ID
	}
	return out
}

func parseID(s string) (int64, error) {
	id, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("message id %q: %w", s, err)
	}
	return id, nil
}
