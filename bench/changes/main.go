// Command changes measures the change stream on one node (embedded etcd,
// Pebble, the REST API, all in this process):
//
//   - lag: under a steady write load (-rate writes/s for -duration, from
//     -writers clients, one document per write), the time from a write's
//     acknowledgement to one consumer receiving its event over
//     GET /_changes, p50/p99/max (and from the write's start, which
//     includes the write's own latency);
//   - Kafka delivery lag (-kafka, on by default): during the same load, a
//     datastream from the database to a real Kafka broker (kafkatest, a
//     child JVM; JSON records, one topic for the table) and one franz-go
//     consumer of that topic: the same two lags per record, records/s,
//     redeliveries, documents that never arrived, and the datastream's own
//     status; then, the stream paused during the throughput load, how fast
//     it catches up on -events events once resumed;
//   - throughput: a single consumer reading -events events already in the
//     log (written as transactions of 100 documents) from a checkpoint,
//     as raw NDJSON lines and decoded by client/changes.
//
// Run: cd bench && go run ./changes [-rate 2000 -duration 10s -events 200000 -kafka=true]
package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/doppio-db/doppio/client"
	"github.com/doppio-db/doppio/client/changes"
	"github.com/doppio-db/doppio/internal/kafkatest"
	"github.com/doppio-db/doppio/internal/node"
)

var profile string

var hc = &http.Client{Transport: &http.Transport{
	MaxIdleConns: 1024, MaxIdleConnsPerHost: 1024, IdleConnTimeout: 30 * time.Second,
	DialContext: (&net.Dialer{Timeout: time.Second}).DialContext,
}}

func main() {
	rate := flag.Int("rate", 2000, "writes per second of the steady load")
	duration := flag.Duration("duration", 10*time.Second, "how long the steady load runs")
	writers := flag.Int("writers", 32, "concurrent writing clients")
	partitions := flag.Int("partitions", 8, "partitions of the database")
	events := flag.Int("events", 200000, "events in the log for the throughput run")
	withKafka := flag.Bool("kafka", true, "also measure a datastream to a real Kafka broker (needs Java; Maven on first use)")
	topicPartitions := flag.Int("topic-partitions", 8, "partitions of the datastream's Kafka topic")
	cpuprofile := flag.String("cpuprofile", "", "write a CPU profile of the reading runs here")
	flag.Parse()
	profile = *cpuprofile

	dir, err := os.MkdirTemp("", "doppio-bench-changes-")
	check(err)
	defer os.RemoveAll(dir)
	ctx := context.Background()
	var broker *kafkatest.Broker
	if *withKafka {
		t0 := time.Now()
		broker, err = kafkatest.Run(ctx, filepath.Join(dir, "kafka"), nil)
		check(err)
		defer broker.Stop() // after the node's Close: the node stops producing first
		fmt.Printf("# Kafka %s broker on %s after %v\n", kafkatest.Version, broker.Addr(), time.Since(t0).Round(time.Millisecond))
	}
	n, err := node.Start(ctx, node.Config{DataDir: filepath.Join(dir, "node"), HTTPAddr: "127.0.0.1:0",
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	check(err)
	defer n.Close()
	base := "http://" + n.Addr()
	c := client.New(base, client.WithHTTPClient(hc))
	_, _, err = c.PutDatabase(ctx, "bench", client.DatabaseSpec{Partitions: *partitions, Replicas: 1})
	check(err)
	_, _, err = c.PutTable(ctx, "bench", "Item", client.TableSpec{
		Key:    []client.KeyPart{{Name: "g", Type: "string"}, {Name: "id", Type: "long"}},
		Schema: json.RawMessage(`{"type":"record","name":"Item","fields":[{"name":"n","type":"long"},{"name":"pad","type":"string","default":""}]}`),
	})
	check(err)
	fmt.Printf("# change stream benchmark, %s, GOMAXPROCS %d, load average at start: %s\n", time.Now().UTC().Format("2006-01-02 15:04 UTC"), runtime.GOMAXPROCS(0), loadavg())
	var ks *kafkaStream
	if broker != nil {
		ks, err = startKafkaStream(ctx, c, base, broker.Addr(), *partitions, *topicPartitions)
		check(err)
		defer ks.close()
	}
	ld := lag(ctx, base, *rate, *duration, *writers, ks)
	if ks != nil {
		ks.report(ctx, ld)
		check(ks.pause(ctx))
	}
	throughput(ctx, c, base, *events)
	if ks != nil {
		ks.catchUp(ctx, *events)
	}
	fmt.Printf("load average at end: %s\n", loadavg())
}

// load is what the steady write load did: each acknowledged write's
// start and acknowledgement by document key ("g/id"), and the /_changes
// consumer's lags.
type load struct {
	startAt          time.Time
	started, acked   map[string]time.Time
	fromAck, fromReq []time.Duration
}

// lag runs the steady write load, measures the /_changes consumer's lag
// and, if ks is not nil, observes the datastream meanwhile (its status,
// the probe, CPU).
func lag(ctx context.Context, base string, rate int, d time.Duration, writers int, ks *kafkaStream) load {
	s, err := changes.Open(ctx, client.New(base), "bench", changes.Options{})
	check(err)
	defer s.Close()
	first, err := s.Next() // the start checkpoint: subscribed
	check(err)
	_ = first
	var (
		mu      sync.Mutex
		acked   = map[string]time.Time{}
		started = map[string]time.Time{}
		fromAck []time.Duration
		fromReq []time.Duration
		early   int
	)
	received := make(chan struct{})
	var want atomic.Int64
	want.Store(-1)
	go func() {
		got := int64(0)
		for {
			l, err := s.Next()
			if err != nil {
				return
			}
			now := time.Now()
			if l.Event == nil {
				continue
			}
			k := keyText(l.Event.Key)
			mu.Lock()
			if t, ok := acked[k]; ok {
				fromAck = append(fromAck, max(0, now.Sub(t)))
			} else {
				early++ // the event arrived before the write's answer
				fromAck = append(fromAck, 0)
			}
			fromReq = append(fromReq, now.Sub(started[k]))
			mu.Unlock()
			got++
			if w := want.Load(); w >= 0 && got >= w {
				close(received)
				return
			}
		}
	}()
	interval := time.Second / time.Duration(rate)
	startAt := time.Now()
	var stopSampling func()
	if ks != nil {
		stopSampling = ks.observe(ctx, "steady load")
	}
	var next atomic.Int64
	var wg sync.WaitGroup
	var errs atomic.Int64
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := next.Add(1) - 1
				at := startAt.Add(time.Duration(i) * interval)
				if at.Sub(startAt) >= d {
					return
				}
				time.Sleep(time.Until(at))
				g := fmt.Sprint("g", i%997)
				k := fmt.Sprint(g, "/", i)
				body := fmt.Sprintf(`{"n":%d,"pad":"w%d"}`, i, w)
				mu.Lock()
				started[k] = time.Now()
				mu.Unlock()
				req, _ := http.NewRequest("PUT", fmt.Sprintf("%s/bench/Item/%s/%d", base, g, i), strings.NewReader(body))
				req.Header.Set("Content-Type", "application/json")
				resp, err := hc.Do(req)
				if err != nil || resp.StatusCode != 201 {
					errs.Add(1)
					if resp != nil {
						resp.Body.Close()
					}
					continue
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				mu.Lock()
				acked[k] = time.Now()
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(startAt)
	if stopSampling != nil {
		stopSampling()
	}
	mu.Lock()
	total := int64(len(acked))
	if int64(len(fromAck)) >= total {
		want.Store(0)
		mu.Unlock()
	} else {
		want.Store(total)
		mu.Unlock()
		select {
		case <-received:
		case <-time.After(30 * time.Second):
			fmt.Println("! not every event arrived within 30s")
		}
	}
	mu.Lock()
	defer mu.Unlock()
	fmt.Printf("\n## lag under a steady write load\n\n")
	fmt.Printf("target %d writes/s for %v from %d clients: %d writes acknowledged in %v (%.0f/s), %d failed\n",
		rate, d, writers, total, elapsed.Round(time.Millisecond), float64(total)/elapsed.Seconds(), errs.Load())
	fmt.Printf("events received: %d (%d before their write's answer)\n", len(fromAck), early)
	fmt.Printf("| lag | p50 | p99 | max |\n|---|---:|---:|---:|\n")
	fmt.Printf("| acknowledgement → consumer receipt | %s | %s | %s |\n", pct(fromAck, 50), pct(fromAck, 99), pct(fromAck, 100))
	fmt.Printf("| write request start → consumer receipt | %s | %s | %s |\n", pct(fromReq, 50), pct(fromReq, 99), pct(fromReq, 100))
	// Writers are done: the maps are only read from now on.
	return load{startAt: startAt, started: started, acked: acked, fromAck: slices.Clone(fromAck), fromReq: slices.Clone(fromReq)}
}

// keyText is a decoded key tuple as "g/id". Integers print in full (fmt
// prints a float64 of 1,000,000 as 1e+06, which would match no write).
func keyText(key []any) string {
	parts := make([]string, len(key))
	for i, v := range key {
		switch x := v.(type) {
		case float64:
			parts[i] = strconv.FormatFloat(x, 'f', -1, 64)
		case json.Number:
			parts[i] = x.String()
		default:
			parts[i] = fmt.Sprint(x)
		}
	}
	return strings.Join(parts, "/")
}

func throughput(ctx context.Context, c *client.Client, base string, events int) {
	s, err := changes.Open(ctx, client.New(base), "bench", changes.Options{})
	check(err)
	l, err := s.Next()
	check(err)
	from := l.Checkpoint
	s.Close()
	// Load: transactions of 100 documents, 8 groups written at once.
	const perTxn = 100
	var wg sync.WaitGroup
	var next atomic.Int64
	pad := strings.Repeat("x", 64)
	loadStart := time.Now()
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := next.Add(1) - 1
				if i*perTxn >= int64(events) {
					return
				}
				g := fmt.Sprint("t", w, "-", i)
				var ops []client.TxnOp
				for j := range perTxn {
					ops = append(ops, client.PutOp("Item", client.Key{g, int64(j)}, map[string]any{"n": j, "pad": pad}))
				}
				_, err := c.Txn(ctx, "bench", client.Txn{PartitionKey: g, Ops: ops})
				check(err)
			}
		}()
	}
	wg.Wait()
	fmt.Printf("\n## one consumer reading the log\n\nloaded %d events (transactions of %d documents of ~90 bytes) in %v\n", events, perTxn, time.Since(loadStart).Round(time.Millisecond))
	fmt.Printf("| reader | events | seconds | events/s | MB/s | process CPU s | events per CPU s |\n|---|---:|---:|---:|---:|---:|---:|\n")

	if profile != "" {
		f, err := os.Create(profile)
		check(err)
		check(pprof.StartCPUProfile(f))
		defer pprof.StopCPUProfile()
	}
	// Raw NDJSON lines, as a consumer that only forwards them would.
	req, _ := http.NewRequestWithContext(ctx, "GET", base+"/_changes/bench?from="+from, nil)
	resp, err := hc.Do(req)
	check(err)
	br := bufio.NewReaderSize(resp.Body, 1<<20)
	start, cpu0 := time.Now(), cpuTime()
	got, bytesRead := 0, 0
	for got < events {
		line, err := br.ReadSlice('\n')
		check(err)
		bytesRead += len(line)
		if bytes.HasPrefix(line, []byte(`{"scn"`)) {
			got++
		}
	}
	el, cpu := time.Since(start), cpuTime()-cpu0
	resp.Body.Close()
	fmt.Printf("| raw NDJSON lines | %d | %.2f | %.0f | %.1f | %.2f | %.0f |\n", got, el.Seconds(), float64(got)/el.Seconds(), float64(bytesRead)/el.Seconds()/1e6, cpu.Seconds(), float64(got)/cpu.Seconds())

	// Decoded events through client/changes.
	s, err = changes.Open(ctx, client.New(base), "bench", changes.Options{From: from})
	check(err)
	start, cpu0 = time.Now(), cpuTime()
	got = 0
	for got < events {
		l, err := s.Next()
		check(err)
		if l.Event != nil {
			got++
		}
	}
	el, cpu = time.Since(start), cpuTime()-cpu0
	s.Close()
	fmt.Printf("| client/changes Stream.Next (JSON decoded) | %d | %.2f | %.0f | | %.2f | %.0f |\n", got, el.Seconds(), float64(got)/el.Seconds(), cpu.Seconds(), float64(got)/cpu.Seconds())
}

func pct(ds []time.Duration, p int) string {
	if len(ds) == 0 {
		return "-"
	}
	return fmt.Sprintf("%.1f ms", float64(pctOf(ds, p))/float64(time.Millisecond))
}

// pctOf is the p-th percentile of ds (nearest rank), 0 when ds is empty.
func pctOf(ds []time.Duration, p int) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	i := (len(s)*p + 99) / 100
	i = min(max(i-1, 0), len(s)-1)
	return s[i]
}

// cpuTime is the CPU time this process (node and consumer) has used.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func loadavg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	f := strings.Fields(string(b))
	return strings.Join(f[:3], " ")
}

func check(err error) {
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}
