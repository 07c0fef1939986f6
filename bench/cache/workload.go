package main

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"time"
)

// profile is a member profile: a few short fields, a long summary and
// lists, as the seed's profiles are.
type profile struct {
	Name      string     `json:"name"`
	Headline  string     `json:"headline"`
	Summary   string     `json:"summary"`
	Skills    []string   `json:"skills"`
	Positions []position `json:"positions"`
	Rev       int64      `json:"rev"`
}

type position struct {
	Title   string `json:"title"`
	Company string `json:"company"`
	Years   int    `json:"years"`
}

// profileSchema is the table's Avro schema of a profile.
const profileSchema = `{"type":"record","name":"Profile","fields":[
 {"name":"name","type":"string"},{"name":"headline","type":"string"},{"name":"summary","type":"string"},
 {"name":"skills","type":{"type":"array","items":"string"}},
 {"name":"positions","type":{"type":"array","items":{"type":"record","name":"Position","fields":[
  {"name":"title","type":"string"},{"name":"company","type":"string"},{"name":"years","type":"int"}]}}},
 {"name":"rev","type":"long"}]}`

var words = strings.Fields(`data engineer staff senior principal distributed systems storage replication
consensus latency throughput cache index query planner schema stream change capture member profile
search feed ranking infrastructure reliability operations kubernetes java go rust python sql kafka`)

// memberKey is the key of profile i.
func memberKey(i int) string { return fmt.Sprintf("m%07d", i) }

// profileSize is profile i's JSON size, uniform in [min, max] and the same
// in every configuration.
func profileSize(i, minBytes, maxBytes int) int {
	r := rand.New(rand.NewPCG(uint64(i), 0xca5e))
	return minBytes + r.IntN(maxBytes-minBytes+1)
}

// makeProfile builds revision rev of profile i at about size bytes of
// JSON.
func makeProfile(i int, rev int64, size int) profile {
	r := rand.New(rand.NewPCG(uint64(i), uint64(rev)))
	word := func() string { return words[r.IntN(len(words))] }
	p := profile{Name: fmt.Sprintf("Member %d", i), Headline: word() + " " + word() + " at " + word(), Rev: rev}
	for range 3 + r.IntN(8) {
		p.Skills = append(p.Skills, word())
	}
	for range 1 + r.IntN(4) {
		p.Positions = append(p.Positions, position{Title: word() + " " + word(), Company: word() + " inc", Years: 1 + r.IntN(9)})
	}
	// The rest of the size is the summary.
	base, _ := json.Marshal(p)
	var b strings.Builder
	for b.Len() < size-len(base) {
		b.WriteString(word())
		b.WriteByte(' ')
	}
	p.Summary = b.String()
	return p
}

// store is one configuration's system under the workload.
type store interface {
	// Read reads profile key and says which tier answered ("local",
	// "redis", "miss", "bypass"; "nodes" without a tier).
	Read(ctx context.Context, key string) (source string, err error)
	// Update replaces profile key.
	Update(ctx context.Context, key string, p profile) error
}

// phase is what one stretch of load did.
type phase struct {
	Reads, Updates int
	Failed         int
	// Dropped counts operations not started on time: every worker was
	// busy (the system fell behind the offered rate).
	Dropped  int
	Sources  map[string]int
	ReadLat  []time.Duration // from each read's scheduled start
	FirstErr string
}

func (p *phase) hit(tier string) float64 {
	if p.Reads == 0 {
		return 0
	}
	return float64(p.Sources[tier]) / float64(p.Reads)
}

// quantile of sorted latencies.
func quantile(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	return sorted[min(len(sorted)-1, int(q*float64(len(sorted))))]
}

// workers bounds the operations in flight; beyond it a scheduled
// operation is dropped and counted.
const workers = 64

// drive offers cfg.Rate operations per second to s for d, open loop: each
// operation has its scheduled start, and a read's latency counts from it,
// so a system that falls behind is charged for the wait.
func drive(ctx context.Context, cfg config, s store, d time.Duration, seed uint64, revs *revisions) *phase {
	ph := &phase{Sources: map[string]int{}}
	var mu sync.Mutex
	type job struct {
		at     time.Time
		key    int
		update bool
	}
	jobs := make(chan job, workers)
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range jobs {
				key := memberKey(j.key)
				var src string
				var err error
				if j.update {
					err = s.Update(ctx, key, makeProfile(j.key, revs.next(j.key), profileSize(j.key, cfg.MinBytes, cfg.MaxBytes)))
				} else {
					src, err = s.Read(ctx, key)
				}
				took := time.Since(j.at)
				mu.Lock()
				switch {
				case err != nil:
					ph.Failed++
					if ph.FirstErr == "" {
						ph.FirstErr = err.Error()
					}
				case j.update:
					ph.Updates++
				default:
					ph.Reads++
					ph.Sources[src]++
					ph.ReadLat = append(ph.ReadLat, took)
				}
				mu.Unlock()
			}
		}()
	}
	rng := rand.New(rand.NewPCG(seed, seed+1))
	zipf := rand.NewZipf(rng, cfg.Zipf, 1, uint64(cfg.Docs-1))
	interval := time.Duration(float64(time.Second) / cfg.Rate)
	start := time.Now()
	for n := 0; ; n++ {
		at := start.Add(time.Duration(n) * interval)
		if at.Sub(start) >= d || ctx.Err() != nil {
			break
		}
		if wait := time.Until(at); wait > 0 {
			time.Sleep(wait)
		}
		j := job{at: at, key: int(zipf.Uint64()), update: rng.Float64() < cfg.Updates}
		select {
		case jobs <- j:
		default:
			mu.Lock()
			ph.Dropped++
			mu.Unlock()
		}
	}
	close(jobs)
	wg.Wait()
	sortDurations(ph.ReadLat)
	return ph
}

// revisions numbers each profile's updates, so every update writes new
// content.
type revisions struct {
	mu  sync.Mutex
	rev map[int]int64
}

func (r *revisions) next(i int) int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.rev == nil {
		r.rev = map[int]int64{}
	}
	r.rev[i]++
	return r.rev[i]
}

// load writes every profile (revision 0) with put, from a few workers,
// reporting progress every tenth.
func load(ctx context.Context, cfg config, put func(ctx context.Context, key string, p profile) error) error {
	idx := make(chan int)
	errs := make(chan error, 1)
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range idx {
				if err := put(ctx, memberKey(i), makeProfile(i, 0, profileSize(i, cfg.MinBytes, cfg.MaxBytes))); err != nil {
					select {
					case errs <- fmt.Errorf("load %s: %w", memberKey(i), err):
					default:
					}
				}
			}
		}()
	}
	var err error
feed:
	for i := range cfg.Docs {
		if i > 0 && i%(max(cfg.Docs/10, 1)) == 0 {
			cfg.Progress("  loaded %d of %d profiles", i, cfg.Docs)
		}
		select {
		case idx <- i:
		case err = <-errs:
			break feed
		case <-ctx.Done():
			err = ctx.Err()
			break feed
		}
	}
	close(idx)
	wg.Wait()
	if err == nil {
		select {
		case err = <-errs:
		default:
		}
	}
	return err
}
