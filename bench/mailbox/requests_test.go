package main

import (
	"context"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime/pprof"
	"runtime/trace"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/doppio-db/doppio/bench/internal/mailboxdata"
)

// The mailbox benchmark's three request types, one at a time, against Doppio,
// Bleve over HTTP and PostgreSQL (over TCP, and over its Unix socket)
// started in the same run (the peers the goal is measured against), on a
// small set A (64 mailboxes of 100 messages), 8 concurrent clients:
//
//	cd bench && go test -run '^$' -bench Requests -benchtime 2000x ./mailbox
//
// Reported per request: mean and p99 latency (ms), and the CPU time of this
// process (user+system, µs): all of Doppio's and Bleve's work, server and
// client, but only the client's for PostgreSQL, whose server processes' CPU
// time is server-cpu-µs/op; with allocations (Doppio and Bleve: server and
// client). -reqprofile DIR writes a CPU profile of each sub-benchmark's
// measured requests only (not the load) to DIR/<name>.cpu, and allocation
// profiles before and after them (<name>.allocs0, .allocs1: pprof -base)
// and an execution trace (<name>.trace).

var reqProfile = flag.String("reqprofile", "", "directory for CPU profiles of the measured requests of each BenchmarkRequests sub-benchmark")

const benchBoxes, benchClients = 64, 8

var (
	benchMu      sync.Mutex
	benchSystems = map[string]*benchSystem{}
	benchDirs    []string // the systems' data, removed when the tests end
)

// TestMain closes the systems the benchmarks opened and removes their
// data (some 450 MiB per run, which filled the disk when left behind).
func TestMain(m *testing.M) {
	code := m.Run()
	for _, s := range benchSystems {
		s.sys.Close()
	}
	for _, d := range benchDirs {
		os.RemoveAll(d)
	}
	os.Exit(code)
}

type benchSystem struct {
	sys    System
	nextID []atomic.Int64
}

// benchOpen starts (once per test binary) and loads the named system.
func benchOpen(b *testing.B, name string) *benchSystem {
	benchMu.Lock()
	defer benchMu.Unlock()
	if s := benchSystems[name]; s != nil {
		return s
	}
	dir, err := os.MkdirTemp("", "mailbox-bench-")
	if err != nil {
		b.Fatal(err)
	}
	benchDirs = append(benchDirs, dir)
	ctx := context.Background()
	cfg := config{Clients: benchClients, Seed: 1, Parts: 8, Progress: func(string, ...any) {}}
	sys, err := openSystem(ctx, cfg, name, dir)
	if err != nil {
		b.Skipf("%s: %v", name, err)
	}
	set := setSpec{Name: "A", Mailboxes: benchBoxes, Messages: 100}
	if err := load(ctx, sys, set, cfg); err != nil {
		b.Fatal(err)
	}
	if err := sys.Ready(ctx); err != nil {
		b.Fatal(err)
	}
	if err := verify(ctx, sys, set, cfg.Seed); err != nil {
		b.Fatal(err)
	}
	s := &benchSystem{sys: sys, nextID: make([]atomic.Int64, benchBoxes)}
	for i := range s.nextID {
		s.nextID[i].Store(100)
	}
	benchSystems[name] = s
	return s
}

func BenchmarkRequests(b *testing.B) {
	for _, name := range []string{"doppio", "bleve-http", "postgres", "postgres-unix"} {
		label := map[string]string{"doppio": "Doppio", "bleve-http": "BleveHTTP", "postgres": "PostgreSQL", "postgres-unix": "PostgreSQLUnix"}[name]
		b.Run(label+"/inbox", func(b *testing.B) {
			s := benchOpen(b, name)
			runRequests(b, func(ctx context.Context, r *rand.Rand) error {
				hits, err := s.sys.Inbox(ctx, mailboxdata.MailboxName("A", r.IntN(benchBoxes)), pageSize)
				if err == nil && len(hits) != pageSize {
					err = fmt.Errorf("inbox answered %d messages, want %d", len(hits), pageSize)
				}
				return err
			})
		})
		b.Run(label+"/search", func(b *testing.B) {
			s := benchOpen(b, name)
			runRequests(b, func(ctx context.Context, r *rand.Rand) error {
				_, err := s.sys.Search(ctx, mailboxdata.MailboxName("A", r.IntN(benchBoxes)), mailboxdata.Vocabulary[r.IntN(len(mailboxdata.Vocabulary))], pageSize)
				return err
			})
		})
		b.Run(label+"/insert", func(b *testing.B) {
			s := benchOpen(b, name)
			wal0 := walBytes(s.sys)
			defer func() {
				if wal0 >= 0 {
					b.ReportMetric((walBytes(s.sys)-wal0)/float64(b.N), "wal-B/op")
				}
			}()
			runRequests(b, func(ctx context.Context, r *rand.Rand) error {
				mb := r.IntN(benchBoxes)
				id := s.nextID[mb].Add(1)
				return s.sys.Insert(ctx, mailboxdata.MailboxName("A", mb), id, mailboxdata.New(r, mailboxdata.MailboxName("A", mb), id, newCreatedOn(id)))
			})
		})
		b.Run(label+"/insert-4boxes", func(b *testing.B) {
			// Set B's shape: 8 writers on 4 mailboxes.
			s := benchOpen(b, name)
			runRequests(b, func(ctx context.Context, r *rand.Rand) error {
				mb := r.IntN(4)
				id := s.nextID[mb].Add(1)
				return s.sys.Insert(ctx, mailboxdata.MailboxName("A", mb), id, mailboxdata.New(r, mailboxdata.MailboxName("A", mb), id, newCreatedOn(id)))
			})
		})
		b.Run(label+"/insert-folded", func(b *testing.B) {
			// Set B's inserts: 8 writers on 4 mailboxes that have grown
			// past a small one, so Doppio has folded their text into the
			// term lists and writes the final form (some 40 keys a body).
			s := benchOpen(b, name)
			first := benchBoxes - 4
			foldBoxes(b, s, first)
			runRequests(b, func(ctx context.Context, r *rand.Rand) error {
				mb := first + r.IntN(4)
				id := s.nextID[mb].Add(1)
				return s.sys.Insert(ctx, mailboxdata.MailboxName("A", mb), id, mailboxdata.New(r, mailboxdata.MailboxName("A", mb), id, newCreatedOn(id)))
			})
		})
	}
}

// foldBoxes grows the four mailboxes from first on past Doppio's fold
// threshold (once per system) and, for Doppio, waits until every one is
// folded.
func foldBoxes(b *testing.B, s *benchSystem, first int) {
	ctx := context.Background()
	r := rand.New(rand.NewPCG(7, 7))
	if s.nextID[first].Load() < 400 {
		for mb := first; mb < first+4; mb++ {
			for range 300 {
				id := s.nextID[mb].Add(1)
				if err := s.sys.Insert(ctx, mailboxdata.MailboxName("A", mb), id, mailboxdata.New(r, mailboxdata.MailboxName("A", mb), id, newCreatedOn(id))); err != nil {
					b.Fatal(err)
				}
			}
		}
	}
	d, ok := s.sys.(*doppioSystem)
	if !ok {
		return
	}
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(50 * time.Millisecond) {
		m, err := d.do(ctx, "GET", "/metrics", nil, 200)
		if err != nil {
			b.Fatal(err)
		}
		if folds := sumMetric(m, "doppio_index_folds_total"); folds >= 4 {
			return
		} else if time.Now().After(deadline) {
			b.Fatalf("%v fold write sets after a minute, want 4 mailboxes folded", folds)
		}
	}
}

// sumMetric adds up every series of a metric in a Prometheus text
// exposition.
func sumMetric(exposition []byte, name string) float64 {
	var sum float64
	for _, line := range strings.Split(string(exposition), "\n") {
		rest, ok := strings.CutPrefix(line, name+"{")
		if !ok {
			continue
		}
		if i := strings.LastIndexByte(rest, ' '); i >= 0 {
			v, _ := strconv.ParseFloat(rest[i+1:], 64)
			sum += v
		}
	}
	return sum
}

// runRequests sends b.N requests from benchClients closed-loop clients and
// reports latency and this process's CPU time per request.
func runRequests(b *testing.B, op func(context.Context, *rand.Rand) error) {
	ctx := context.Background()
	var (
		next atomic.Int64
		mu   sync.Mutex
		lat  []time.Duration
		wg   sync.WaitGroup
		fail atomic.Value
	)
	b.ReportAllocs()
	if *reqProfile != "" {
		f, err := os.Create(filepath.Join(*reqProfile, strings.ReplaceAll(b.Name(), "/", "_")+".cpu"))
		if err != nil {
			b.Fatal(err)
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			b.Fatal(err)
		}
		defer pprof.StopCPUProfile()
		// Allocation profiles before and after: go tool pprof -base.
		name := filepath.Join(*reqProfile, strings.ReplaceAll(b.Name(), "/", "_"))
		writeAllocs := func(suffix string) {
			if f, err := os.Create(name + suffix); err == nil {
				pprof.Lookup("allocs").WriteTo(f, 0)
				f.Close()
			}
		}
		writeAllocs(".allocs0")
		defer writeAllocs(".allocs1")
		if tf, err := os.Create(name + ".trace"); err == nil {
			if trace.Start(tf) == nil {
				defer tf.Close()
				defer trace.Stop()
			}
		}
	}
	cpu0, srv0 := cpuTime(), postgresCPU()
	b.ResetTimer()
	for c := range benchClients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(uint64(c), uint64(time.Now().UnixNano())))
			var local []time.Duration
			for next.Add(1) <= int64(b.N) {
				t0 := time.Now()
				if err := op(ctx, r); err != nil {
					fail.CompareAndSwap(nil, err)
					return
				}
				local = append(local, time.Since(t0))
			}
			mu.Lock()
			lat = append(lat, local...)
			mu.Unlock()
		}()
	}
	wg.Wait()
	b.StopTimer()
	if err, _ := fail.Load().(error); err != nil {
		b.Fatal(err)
	}
	cpu := cpuTime() - cpu0
	if b.Name() != "" && strings.Contains(b.Name(), "PostgreSQL") {
		// The server's processes did the rest of the work.
		b.ReportMetric(float64((postgresCPU()-srv0).Microseconds())/float64(b.N), "server-cpu-µs/op")
	}
	slices.Sort(lat)
	var sum time.Duration
	for _, d := range lat {
		sum += d
	}
	b.ReportMetric(float64(sum.Microseconds())/float64(len(lat))/1000, "mean-ms")
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds())/1000, "p99-ms")
	b.ReportMetric(float64(cpu.Microseconds())/float64(b.N), "cpu-µs/op")
}

// postgresCPU is the user and system CPU time of every process named
// postgres on the machine so far (/proc/PID/stat fields 14 and 15); the
// benchmark's server is the only one running.
func postgresCPU() time.Duration {
	dirs, _ := filepath.Glob("/proc/[0-9]*/stat")
	var ticks int64
	for _, d := range dirs {
		b, err := os.ReadFile(d)
		if err != nil {
			continue
		}
		st := string(b)
		open, end := strings.IndexByte(st, '('), strings.LastIndexByte(st, ')')
		if open < 0 || end < open || st[open+1:end] != "postgres" {
			continue
		}
		f := strings.Fields(st[end+2:])
		if len(f) < 13 {
			continue
		}
		u, _ := strconv.ParseInt(f[11], 10, 64)
		sy, _ := strconv.ParseInt(f[12], 10, 64)
		ticks += u + sy
	}
	return time.Duration(ticks) * (time.Second / 100) // USER_HZ
}

// cpuTime is the user and system CPU time of this process so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// walBytes is what Doppio's storage engine has written to its WAL so far
// (-1 for another system).
func walBytes(sys System) float64 {
	d, ok := sys.(*doppioSystem)
	if !ok {
		return -1
	}
	b, err := d.do(context.Background(), "GET", "/metrics", nil, 200)
	if err != nil {
		return -1
	}
	return metricValue(b, "doppio_storage_wal_bytes")
}
