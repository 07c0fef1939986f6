package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/doppio-db/doppio/bench/internal/benchutil"
	"github.com/doppio-db/doppio/bench/internal/mailboxdata"
)

// Request kinds.
const (
	kindInbox  = iota // isInbox:true, newest first, limit 20
	kindSearch        // body:<word>, newest first, limit 20
	kindWrite         // insert one new message
	numKinds
)

const (
	sessionLength = 10
	pageSize      = 20
)

// setSpec is one data set: Mailboxes mailboxes of Messages messages each,
// and the number of sessions run per mix.
type setSpec struct {
	Name      string
	Mailboxes int
	Messages  int
	Sessions  int
}

// mixResult holds the latencies of one mix on one system.
type mixResult struct {
	WritePercent int
	Latencies    [numKinds][]time.Duration
	Errors       int
	FirstError   string
	Elapsed      time.Duration
	// LoadAvg is /proc/loadavg's 1-minute figure at the end of the mix:
	// other processes on the machine show up here.
	LoadAvg float64
}

// workload drives sessions against one system. nextID hands out message
// ids per mailbox; new messages' createdOn grows with the id, after every
// loaded message.
type workload struct {
	sys     System
	set     setSpec
	clients int
	seed    uint64
	nextID  []atomic.Int64
}

func newWorkload(sys System, set setSpec, clients int, seed uint64) *workload {
	w := &workload{sys: sys, set: set, clients: clients, seed: seed, nextID: make([]atomic.Int64, set.Mailboxes)}
	for i := range w.nextID {
		w.nextID[i].Store(int64(set.Messages))
	}
	return w
}

// newCreatedOn is the createdOn of written message id: later than every
// loaded message (at most 120 s apart) and than every smaller id.
func newCreatedOn(id int64) int64 { return mailboxdata.BaseTime + id*200000 }

// run runs sessions sessions with writePercent% writes over w.clients
// concurrent clients, each client's requests drawn from its own seeded
// generator, so every system sees the same request sequence per client.
// record=false runs them as warm-up.
func (w *workload) run(ctx context.Context, writePercent, sessions int, salt uint64) mixResult {
	res := mixResult{WritePercent: writePercent}
	var mu sync.Mutex
	var wg sync.WaitGroup
	start := time.Now()
	for c := range w.clients {
		n := sessions / w.clients
		if c < sessions%w.clients {
			n++
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(w.seed^salt, uint64(writePercent)<<32|uint64(c)))
			var lat [numKinds][]time.Duration
			var errs int
			var first string
			for range n {
				mb := r.IntN(w.set.Mailboxes)
				name := mailboxdata.MailboxName(w.set.Name, mb)
				reads := 0
				for range sessionLength {
					kind := kindWrite
					if r.IntN(100) >= writePercent {
						kind = kindInbox + reads%2
						reads++
					}
					var err error
					var t0 time.Time
					switch kind {
					case kindWrite:
						id := w.nextID[mb].Add(1)
						m := mailboxdata.New(r, name, id, newCreatedOn(id))
						t0 = time.Now()
						err = w.sys.Insert(ctx, name, id, m)
					case kindInbox:
						t0 = time.Now()
						_, err = w.sys.Inbox(ctx, name, pageSize)
					case kindSearch:
						word := mailboxdata.Vocabulary[r.IntN(len(mailboxdata.Vocabulary))]
						t0 = time.Now()
						_, err = w.sys.Search(ctx, name, word, pageSize)
					}
					d := time.Since(t0)
					if err != nil {
						errs++
						if first == "" {
							first = err.Error()
						}
						continue
					}
					lat[kind] = append(lat[kind], d)
				}
			}
			mu.Lock()
			defer mu.Unlock()
			for k := range lat {
				res.Latencies[k] = append(res.Latencies[k], lat[k]...)
			}
			res.Errors += errs
			if res.FirstError == "" {
				res.FirstError = first
			}
		}()
	}
	wg.Wait()
	res.Elapsed = time.Since(start)
	res.LoadAvg = benchutil.LoadAvg()
	return res
}

// stats are the mean and 99th percentile of a sample, in milliseconds.
type stats struct {
	N         int
	Mean, P99 float64
}

func summarize(ds ...[]time.Duration) stats {
	var all []time.Duration
	for _, d := range ds {
		all = append(all, d...)
	}
	if len(all) == 0 {
		return stats{}
	}
	slices.Sort(all)
	var sum time.Duration
	for _, d := range all {
		sum += d
	}
	// Nearest-rank p99.
	rank := (99*len(all) + 99) / 100
	return stats{
		N:    len(all),
		Mean: float64(sum) / float64(len(all)) / 1e6,
		P99:  float64(all[rank-1]) / 1e6,
	}
}

func (m mixResult) reads() stats  { return summarize(m.Latencies[kindInbox], m.Latencies[kindSearch]) }
func (m mixResult) writes() stats { return summarize(m.Latencies[kindWrite]) }
func (m mixResult) all() stats {
	return summarize(m.Latencies[kindInbox], m.Latencies[kindSearch], m.Latencies[kindWrite])
}

// verify checks a system's answers on the first few mailboxes against a
// brute-force evaluation of the loaded messages.
func verify(ctx context.Context, sys System, set setSpec, seed uint64) error {
	for i := range min(3, set.Mailboxes) {
		msgs := mailboxdata.Loaded(seed, set.Name, i, set.Messages)
		name := mailboxdata.MailboxName(set.Name, i)
		want := expected(msgs, func(m mailboxdata.Message) bool { return m.IsInbox })
		got, err := sys.Inbox(ctx, name, pageSize)
		if err != nil {
			return fmt.Errorf("verify %s inbox of %s: %w", sys.Name(), name, err)
		}
		if !slices.Equal(ids(got), want) {
			return fmt.Errorf("verify %s inbox of %s: got ids %v, want %v", sys.Name(), name, ids(got), want)
		}
		word := mailboxdata.Vocabulary[(i*37)%len(mailboxdata.Vocabulary)]
		want = expected(msgs, func(m mailboxdata.Message) bool { return slices.Contains(tokens(m.Body), word) })
		got, err = sys.Search(ctx, name, word, pageSize)
		if err != nil {
			return fmt.Errorf("verify %s body:%s in %s: %w", sys.Name(), word, name, err)
		}
		if !slices.Equal(ids(got), want) {
			return fmt.Errorf("verify %s body:%s in %s: got ids %v, want %v", sys.Name(), word, name, ids(got), want)
		}
		for _, h := range got {
			if len(h.Doc) < 100 {
				return fmt.Errorf("verify %s: message %d of %s came back without its document: %q", sys.Name(), h.ID, name, h.Doc)
			}
		}
	}
	return nil
}

// expected is the brute-force answer: ids of matching messages, newest
// first (createdOn grows with the id), at most pageSize.
func expected(msgs []mailboxdata.Message, match func(mailboxdata.Message) bool) []int64 {
	var out []int64
	for i := len(msgs) - 1; i >= 0 && len(out) < pageSize; i-- {
		if match(msgs[i]) {
			out = append(out, int64(i+1))
		}
	}
	return out
}

func tokens(s string) []string {
	var out []string
	start := -1
	for i, c := range s + " " {
		if c == ' ' {
			if start >= 0 {
				out = append(out, s[start:i])
			}
			start = -1
		} else if start < 0 {
			start = i
		}
	}
	return out
}
