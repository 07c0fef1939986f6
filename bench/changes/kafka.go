package main

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/doppio-db/doppio/client"
)

// The benchmark's datastream, its topic (the table's: "per-table", no
// prefix), and the probe's topic.
const (
	streamName  = "bench-kafka"
	streamTopic = "bench.Item"
	// probeTopic gets the probe's records: a bare producer with the
	// datastream's producer settings, to tell the broker's and clients'
	// share of the delivery lag from the datastream's.
	probeTopic = "bench-probe"
	probeEvery = 10 * time.Millisecond
)

// kafkaStream is the datastream half of the benchmark: a datastream from
// the database to a broker, and one franz-go consumer of its topic that
// remembers when each document's record first arrived.
type kafkaStream struct {
	c      *client.Client
	base   string
	cl     *kgo.Client // the consumer
	probe  *kgo.Client // the probe's producer
	cancel context.CancelFunc
	done   chan struct{}

	mu        sync.Mutex
	first     map[string]time.Time // first receipt, by document key "g/id"
	records   int                  // records received, redeliveries included
	dups      int                  // records of a document already received (each is written once)
	unparsed  int                  // records whose value names no key
	fetchErrs int
	lastErr   error
	// The probe's records as received: when produced, and how long after.
	probeRecv []probeSample

	observed period // the last observed load's
}

// startKafkaStream creates the datastream (JSON records, one topic per
// table, created by the datastream with topicPartitions partitions),
// starts the consumer, and returns once every task runs and records of
// writes made after that reach the consumer: topic creation, metadata
// discovery and the producer's connections are not in the measurement.
func startKafkaStream(ctx context.Context, c *client.Client, base, broker string, partitions, topicPartitions int) (*kafkaStream, error) {
	t0 := time.Now()
	_, _, err := c.PutDatastream(ctx, streamName, client.DatastreamSpec{
		Database: "bench",
		Sink: client.DatastreamSink{Type: "kafka", Brokers: []string{broker}, Topics: "per-table",
			Format: "json", TopicPartitions: topicPartitions},
	})
	if err != nil {
		return nil, fmt.Errorf("creating the datastream: %w", err)
	}
	// The datastream's producer settings (internal/datastream/kafka.go).
	probe, err := kgo.NewClient(kgo.SeedBrokers(broker),
		kgo.RecordPartitioner(kgo.StickyKeyPartitioner(nil)),
		kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.ProducerLinger(2*time.Millisecond),
		kgo.RecordDeliveryTimeout(15*time.Second),
		kgo.ProduceRequestTimeout(10*time.Second))
	if err != nil {
		return nil, err
	}
	tctx, tcancel := context.WithTimeout(ctx, 30*time.Second)
	_, err = kadm.NewClient(probe).CreateTopic(tctx, int32(topicPartitions), -1, nil, probeTopic)
	tcancel()
	if err != nil {
		probe.Close()
		return nil, fmt.Errorf("creating the probe topic: %w", err)
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(broker), kgo.ConsumeTopics(streamTopic, probeTopic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.MetadataMinAge(100*time.Millisecond), kgo.MetadataMaxAge(time.Second))
	if err != nil {
		probe.Close()
		return nil, err
	}
	cctx, cancel := context.WithCancel(context.Background())
	ks := &kafkaStream{c: c, base: base, cl: cl, probe: probe, cancel: cancel, done: make(chan struct{}), first: map[string]time.Time{}}
	go ks.consume(cctx)

	if err := ks.waitStatus(ctx, 60*time.Second, "every task running", func(st streamStatus) bool {
		if len(st.Partitions) != partitions {
			return false
		}
		for _, p := range st.Partitions {
			if p.State != "running" || p.Checkpoint == "" || p.Detail != "" {
				return false
			}
		}
		return true
	}); err != nil {
		ks.close()
		return nil, err
	}
	// Warm-up: enough groups to reach every partition.
	var keys []string
	for j := range 16 * partitions {
		g := fmt.Sprint("warm-", j)
		if _, err := c.Put(ctx, "bench", "Item", client.Key{g, int64(0)}, map[string]any{"n": j}); err != nil {
			ks.close()
			return nil, fmt.Errorf("warm-up write: %w", err)
		}
		keys = append(keys, g+"/0")
	}
	if missing := ks.waitFor(keys, 60*time.Second); missing > 0 {
		ks.close()
		return nil, fmt.Errorf("warm-up: %d of %d records did not reach the Kafka consumer within 60s (%v)", missing, len(keys), ks.err())
	}
	// The probe's producer id and connections, before the measurement.
	if err := probe.ProduceSync(ctx, &kgo.Record{Topic: probeTopic, Value: []byte("warm-up")}).FirstErr(); err != nil {
		ks.close()
		return nil, fmt.Errorf("probe warm-up: %w", err)
	}
	// The topic as the datastream created it.
	tctx, tcancel = context.WithTimeout(ctx, 30*time.Second)
	topics, err := kadm.NewClient(probe).ListTopics(tctx, streamTopic)
	tcancel()
	if err == nil {
		err = topics.Error()
	}
	if err != nil {
		ks.close()
		return nil, fmt.Errorf("the datastream's topic: %w", err)
	}
	fmt.Printf("# datastream %s → topic %s (created by the datastream: %d partitions; JSON records): tasks running and warm-up records consumed after %v\n",
		streamName, streamTopic, len(topics[streamTopic].Partitions), time.Since(t0).Round(time.Millisecond))
	return ks, nil
}

// consume reads the topic until ctx ends. A fetch's records are stamped
// with the time the poll returned them.
func (ks *kafkaStream) consume(ctx context.Context) {
	defer close(ks.done)
	var keys []string
	for {
		fs := ks.cl.PollFetches(ctx)
		if ctx.Err() != nil {
			return
		}
		now := time.Now()
		keys = keys[:0]
		unparsed := 0
		var probes []probeSample
		fs.EachRecord(func(r *kgo.Record) {
			if r.Topic == probeTopic {
				if len(r.Value) == 8 {
					at := time.Unix(0, int64(binary.BigEndian.Uint64(r.Value)))
					probes = append(probes, probeSample{at, now.Sub(at)})
				}
				return
			}
			if k, ok := docKey(r.Value); ok {
				keys = append(keys, k)
			} else {
				unparsed++
			}
		})
		var errs []error
		fs.EachError(func(_ string, _ int32, err error) { errs = append(errs, err) })
		ks.mu.Lock()
		for _, k := range keys {
			if _, seen := ks.first[k]; seen {
				ks.dups++
			} else {
				ks.first[k] = now
			}
		}
		ks.records += len(keys) + unparsed
		ks.probeRecv = append(ks.probeRecv, probes...)
		ks.unparsed += unparsed
		ks.fetchErrs += len(errs)
		if len(errs) > 0 {
			ks.lastErr = errs[len(errs)-1]
		}
		ks.mu.Unlock()
	}
}

// docKey reads the document key of a JSON record value (the /_changes
// event: `{"scn":…,"table":…,"key":["g12",345],…}`) as "g12/345" without
// decoding the whole value. The benchmark's groups hold no ',' or ']'.
func docKey(v []byte) (string, bool) {
	const at = `"key":[`
	i := bytes.Index(v, []byte(at))
	if i < 0 {
		return "", false
	}
	rest := v[i+len(at):]
	j := bytes.IndexByte(rest, ']')
	if j < 0 {
		return "", false
	}
	g, id, ok := bytes.Cut(rest[:j], []byte(","))
	if !ok {
		return "", false
	}
	gs, err := strconv.Unquote(string(g))
	if err != nil {
		return "", false
	}
	return gs + "/" + string(id), true
}

func (ks *kafkaStream) err() error {
	ks.mu.Lock()
	defer ks.mu.Unlock()
	return ks.lastErr
}

// waitFor waits until a record of every key arrived or d passed, and
// returns how many did not.
func (ks *kafkaStream) waitFor(keys []string, d time.Duration) int {
	deadline := time.Now().Add(d)
	pending := keys
	for {
		ks.mu.Lock()
		pending = slices.DeleteFunc(pending, func(k string) bool { _, ok := ks.first[k]; return ok })
		ks.mu.Unlock()
		if len(pending) == 0 || time.Now().After(deadline) {
			return len(pending)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// streamStatus is GET /_datastreams/{name}/status with what
// client.DatastreamStatus leaves out: when each partition's owner
// published its part.
type streamStatus struct {
	State      string            `json:"state"`
	Partitions []partitionStatus `json:"partitions"`
}

type partitionStatus struct {
	client.DatastreamPartition
	Reported *time.Time `json:"reported"`
}

func (ks *kafkaStream) status(ctx context.Context) (streamStatus, error) {
	var st streamStatus
	req, err := http.NewRequestWithContext(ctx, "GET", ks.base+"/_datastreams/"+streamName+"/status", nil)
	if err != nil {
		return st, err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return st, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return st, err
	}
	if resp.StatusCode != http.StatusOK {
		return st, fmt.Errorf("status: %s: %s", resp.Status, b)
	}
	return st, json.Unmarshal(b, &st)
}

func (ks *kafkaStream) waitStatus(ctx context.Context, d time.Duration, what string, cond func(streamStatus) bool) error {
	deadline := time.Now().Add(d)
	for {
		st, err := ks.status(ctx)
		if err == nil && cond(st) {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("datastream: not %s within %v (last status %+v, error %v)", what, d, st, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// probeSample is one probe record: produced at, received d later.
type probeSample struct {
	at time.Time
	d  time.Duration
}

// period is what was observed while a load ran: the datastream's status
// read once a second, the probe's latencies, and the CPU time used.
type period struct {
	what        string
	n           int     // status samples
	maxLagS     float64 // the worst partition's, over the samples
	maxLagTxns  uint64
	lagS        []float64 // every partition sample's lag in seconds
	ages        []float64 // how old each partition sample's publication was when read
	lagAtPub    []float64 // a non-zero lag minus that age: the lag when published
	unknownLag  int       // partition samples without a lag in seconds
	maxTotalEPS float64   // the partitions' throughputs summed, best sample
	failures    int       // the most consecutive failures any partition showed
	notRunning  int       // partition samples in another state than running
	lastError   string
	errs        int // status requests that failed

	start     time.Time
	probeAck  []time.Duration
	probeRecv []probeSample
	probeSent int
	probeErrs int

	seconds, cpu, jvmCPU float64 // wall and CPU seconds: this process, the broker's JVM
}

// observe samples the status and runs the probe until the returned
// function is called; that function keeps the observations for report.
func (ks *kafkaStream) observe(ctx context.Context, what string) func() {
	stop := make(chan struct{})
	done := make(chan period)
	ks.mu.Lock()
	ks.probeRecv = nil
	ks.mu.Unlock()
	start, cpu0, jvm0 := time.Now(), cpuTime(), jvmCPU()
	var probeMu sync.Mutex
	var probeAck []time.Duration
	var probeSent, probeErrs int
	var probes sync.WaitGroup
	go func() {
		t := time.NewTicker(probeEvery)
		defer t.Stop()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			case <-t.C:
			}
			v := make([]byte, 8)
			at := time.Now()
			binary.BigEndian.PutUint64(v, uint64(at.UnixNano()))
			probes.Add(1)
			probeMu.Lock()
			probeSent++
			probeMu.Unlock()
			ks.probe.Produce(ctx, &kgo.Record{Topic: probeTopic, Key: []byte(fmt.Sprint("p", i%97)), Value: v}, func(_ *kgo.Record, err error) {
				defer probes.Done()
				probeMu.Lock()
				defer probeMu.Unlock()
				if err != nil {
					probeErrs++
					return
				}
				probeAck = append(probeAck, time.Since(at))
			})
		}
	}()
	go func() {
		s := period{what: what, start: start}
		for {
			// About once a second, at no fixed phase to the owners'
			// once-a-second publication (the lag read depends on it).
			select {
			case <-stop:
				done <- s
				return
			case <-time.After(750*time.Millisecond + rand.N(500*time.Millisecond)):
			}
			st, err := ks.status(ctx)
			read := time.Now()
			if err != nil {
				s.errs++
				continue
			}
			s.n++
			total := 0.0
			for _, p := range st.Partitions {
				if p.Lag.Seconds == nil {
					s.unknownLag++
				} else {
					s.maxLagS = max(s.maxLagS, *p.Lag.Seconds)
					s.lagS = append(s.lagS, *p.Lag.Seconds)
					if p.Reported != nil {
						age := read.Sub(*p.Reported).Seconds()
						s.ages = append(s.ages, age)
						if *p.Lag.Seconds > 0 {
							s.lagAtPub = append(s.lagAtPub, max(0, *p.Lag.Seconds-age))
						}
					}
				}
				s.maxLagTxns = max(s.maxLagTxns, p.Lag.Transactions)
				total += p.Throughput
				s.failures = max(s.failures, p.Failures)
				if p.State != "running" {
					s.notRunning++
				}
				if p.LastError != nil {
					s.lastError = p.LastError.Message
				}
			}
			s.maxTotalEPS = max(s.maxTotalEPS, total)
		}
	}()
	return func() {
		close(stop)
		s := <-done
		s.seconds, s.cpu, s.jvmCPU = time.Since(start).Seconds(), (cpuTime() - cpu0).Seconds(), jvmCPU()-jvm0
		probes.Wait()
		time.Sleep(200 * time.Millisecond) // the last probes' receipt
		probeMu.Lock()
		s.probeAck, s.probeSent, s.probeErrs = probeAck, probeSent, probeErrs
		probeMu.Unlock()
		ks.mu.Lock()
		s.probeRecv = slices.Clone(ks.probeRecv)
		ks.mu.Unlock()
		ks.observed = s
	}
}

func (s period) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "during the %s (%.1f s): CPU %.1f s in this process (node, writers, consumers), %.1f s in the broker's JVM\n", s.what, s.seconds, s.cpu, s.jvmCPU)
	fmt.Fprintf(&b, "probe (a bare franz-go producer with the datastream's settings, one record every %v, %d sent, %d failed):\n", probeEvery, s.probeSent, s.probeErrs)
	fmt.Fprintf(&b, "| probe | p50 | p99 | max |\n|---|---:|---:|---:|\n")
	fmt.Fprintf(&b, "| produce → acknowledgement | %s | %s | %s |\n", pct(s.probeAck, 50), pct(s.probeAck, 99), pct(s.probeAck, 100))
	var recv []time.Duration
	windows := map[int][]time.Duration{}
	for _, p := range s.probeRecv {
		recv = append(recv, p.d)
		w := int(p.at.Sub(s.start) / window)
		windows[w] = append(windows[w], p.d)
	}
	fmt.Fprintf(&b, "| produce → consumer receipt (%d records) | %s | %s | %s |\n", len(recv), pct(recv, 50), pct(recv, 99), pct(recv, 100))
	fmt.Fprintf(&b, "probe produce → consumer receipt by %v ([records] p50/p99/max ms):%s\n", window, byWindow(windows))
	fmt.Fprintf(&b, "datastream status read about once a second: %d samples; worst partition lag %.3f s, %d transactions; throughput up to %.0f events/s (all partitions); most consecutive failures %d; partition samples not running %d\n",
		s.n, s.maxLagS, s.maxLagTxns, s.maxTotalEPS, s.failures, s.notRunning)
	fmt.Fprintf(&b, "status lag seconds over %d partition samples: p50 %.3f, p99 %.3f, max %.3f; the owner's publication was %.3f/%.3f/%.3f s old when read (p50/p99/max); %d samples showed a lag > 0, which less the publication's age is p50 %.3f, max %.3f s",
		len(s.lagS), fpct(s.lagS, 50), fpct(s.lagS, 99), fpct(s.lagS, 100), fpct(s.ages, 50), fpct(s.ages, 99), fpct(s.ages, 100),
		len(s.lagAtPub), fpct(s.lagAtPub, 50), fpct(s.lagAtPub, 100))
	if s.unknownLag > 0 {
		fmt.Fprintf(&b, "; lag unknown in %d partition samples", s.unknownLag)
	}
	if s.errs > 0 {
		fmt.Fprintf(&b, "; %d status requests failed", s.errs)
	}
	if s.lastError != "" {
		b.WriteString("; last error: " + s.lastError)
	}
	return b.String()
}

// jvmCPU is the CPU seconds used so far by this process's java children
// (the broker), 0 if /proc cannot tell.
func jvmCPU() float64 {
	tasks, _ := filepath.Glob("/proc/self/task/*/children")
	total := 0.0
	for _, t := range tasks {
		b, err := os.ReadFile(t)
		if err != nil {
			continue
		}
		for _, pid := range strings.Fields(string(b)) {
			if comm, err := os.ReadFile("/proc/" + pid + "/comm"); err != nil || strings.TrimSpace(string(comm)) != "java" {
				continue
			}
			stat, err := os.ReadFile("/proc/" + pid + "/stat")
			if err != nil {
				continue
			}
			// Fields after the command's ')': state is the first, utime
			// and stime the 12th and 13th (clock ticks, 100 a second).
			f := strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+1:]))
			if len(f) < 13 {
				continue
			}
			ut, _ := strconv.ParseFloat(f[11], 64)
			st, _ := strconv.ParseFloat(f[12], 64)
			total += (ut + st) / 100
		}
	}
	return total
}

// report waits for every acknowledged write's record and prints the
// Kafka delivery lags next to the /_changes lags of the same load.
func (ks *kafkaStream) report(ctx context.Context, ld load) {
	keys := make([]string, 0, len(ld.acked))
	for k := range ld.acked {
		keys = append(keys, k)
	}
	waitStart := time.Now()
	missing := ks.waitFor(slices.Clone(keys), 60*time.Second)
	waited := time.Since(waitStart)

	ks.mu.Lock()
	var fromAck, fromReq []time.Duration
	windows := map[int][]time.Duration{} // acknowledgement → receipt by 5 s of the load, by write start
	early := 0
	var last time.Time
	var missingKeys []string
	for _, k := range keys {
		at, ok := ks.first[k]
		if !ok {
			missingKeys = append(missingKeys, k)
			continue
		}
		ack := ld.acked[k]
		if at.Before(ack) {
			early++
		}
		fromAck = append(fromAck, max(0, at.Sub(ack)))
		fromReq = append(fromReq, at.Sub(ld.started[k]))
		w := int(ld.started[k].Sub(ld.startAt) / window)
		windows[w] = append(windows[w], max(0, at.Sub(ack)))
		if at.After(last) {
			last = at
		}
	}
	// Records of writes that were not acknowledged (a failed request may
	// still have committed).
	unacked := 0
	for k := range ks.first {
		if _, ok := ld.acked[k]; !ok && !strings.HasPrefix(k, "warm-") {
			unacked++
		}
	}
	records, dups, unparsed, fetchErrs, lastErr := ks.records, ks.dups, ks.unparsed, ks.fetchErrs, ks.lastErr
	ks.mu.Unlock()

	fmt.Printf("\n## Kafka delivery under the same load (datastream %s → %s)\n\n", streamName, streamTopic)
	span := last.Sub(ld.startAt)
	fmt.Printf("acknowledged writes: %d; their records received: %d, missing: %d (waited %v after the load for the last ones)\n",
		len(keys), len(fromAck), missing, waited.Round(time.Millisecond))
	if len(missingKeys) > 0 {
		slices.Sort(missingKeys)
		fmt.Printf("! missing, first ones: %v\n", missingKeys[:min(10, len(missingKeys))])
	}
	fmt.Printf("records delivered: %d in %v from the first write to the last record (%.0f records/s); %d received before their write's answer\n",
		len(fromAck), span.Round(time.Millisecond), float64(len(fromAck))/span.Seconds(), early)
	fmt.Printf("records consumed so far: %d, redeliveries (a document's record again): %d, records of unacknowledged writes: %d, unreadable values: %d, fetch errors: %d",
		records, dups, unacked, unparsed, fetchErrs)
	if lastErr != nil {
		fmt.Printf(" (last: %v)", lastErr)
	}
	fmt.Println()
	fmt.Printf("| lag | p50 | p99 | max |\n|---|---:|---:|---:|\n")
	fmt.Printf("| acknowledgement → Kafka consumer receipt | %s | %s | %s |\n", pct(fromAck, 50), pct(fromAck, 99), pct(fromAck, 100))
	fmt.Printf("| write request start → Kafka consumer receipt | %s | %s | %s |\n", pct(fromReq, 50), pct(fromReq, 99), pct(fromReq, 100))
	fmt.Printf("| acknowledgement → /_changes consumer receipt (same load) | %s | %s | %s |\n", pct(ld.fromAck, 50), pct(ld.fromAck, 99), pct(ld.fromAck, 100))
	fmt.Printf("| write request start → /_changes consumer receipt (same load) | %s | %s | %s |\n", pct(ld.fromReq, 50), pct(ld.fromReq, 99), pct(ld.fromReq, 100))
	fmt.Printf("Kafka / /_changes, write start → receipt: p50 %s, p99 %s, max %s\n",
		ratio(fromReq, ld.fromReq, 50), ratio(fromReq, ld.fromReq, 99), ratio(fromReq, ld.fromReq, 100))
	fmt.Printf("acknowledgement → Kafka consumer receipt by %v of the load ([writes started in it] p50/p99/max ms):%s\n", window, byWindow(windows))
	fmt.Println(ks.observed)

	st, err := ks.status(ctx)
	if err != nil {
		fmt.Printf("! status: %v\n", err)
		return
	}
	fmt.Printf("status at the end (all records received): %s\n", statusLine(st))
	time.Sleep(2 * time.Second) // the owners publish at most once a second
	st, err = ks.status(ctx)
	if err != nil {
		fmt.Printf("! status: %v\n", err)
		return
	}
	fmt.Printf("status 2 s later:\n")
	printStatus(st)
}

// pause pauses the datastream and waits until its tasks have seen it, so
// the next load stays in the log until catchUp.
func (ks *kafkaStream) pause(ctx context.Context) error {
	if _, err := ks.c.PauseDatastream(ctx, streamName); err != nil {
		return err
	}
	err := ks.waitStatus(ctx, 15*time.Second, "paused", func(st streamStatus) bool {
		for _, p := range st.Partitions {
			if p.State != "paused" {
				return false
			}
		}
		return st.State == "paused"
	})
	// The state is the definition's; a task sees it at its next round (a
	// read waits up to 250 ms).
	time.Sleep(time.Second)
	return err
}

// catchUp resumes the datastream paused before the throughput load and
// times how long its records take to reach the consumer.
func (ks *kafkaStream) catchUp(ctx context.Context, events int) {
	ks.mu.Lock()
	before, dups0 := len(ks.first), ks.dups
	ks.mu.Unlock()
	stop := ks.observe(ctx, "catch-up")
	start, cpu0 := time.Now(), cpuTime()
	if _, err := ks.c.ResumeDatastream(ctx, streamName); err != nil {
		fmt.Printf("! resume: %v\n", err)
		stop()
		return
	}
	deadline := start.Add(5 * time.Minute)
	got := 0
	for {
		ks.mu.Lock()
		got = len(ks.first) - before
		ks.mu.Unlock()
		if got >= events || time.Now().After(deadline) {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	el, cpu := time.Since(start), cpuTime()-cpu0
	stop()
	ks.mu.Lock()
	dups := ks.dups - dups0
	ks.mu.Unlock()
	fmt.Printf("\n## the datastream catching up\n\n")
	fmt.Printf("paused during the throughput load, then resumed: %d of %d events' records received in %.2f s (%.0f records/s), redeliveries %d; this process's CPU (node and consumer; not the broker's JVM) %.2f s, %.0f records per CPU s\n",
		got, events, el.Seconds(), float64(got)/el.Seconds(), dups, cpu.Seconds(), float64(got)/cpu.Seconds())
	if got < events {
		fmt.Printf("! %d records missing after 5 min\n", events-got)
	}
	fmt.Println(ks.observed)
}

func statusLine(st streamStatus) string {
	now := time.Now()
	oldest := 0.0
	states := map[string]int{}
	maxLag, unknown := 0.0, 0
	var lagTxns uint64
	failures := 0
	var errs []string
	for _, p := range st.Partitions {
		states[p.State]++
		if p.Reported != nil {
			oldest = max(oldest, now.Sub(*p.Reported).Seconds())
		}
		if p.Lag.Seconds == nil {
			unknown++
		} else {
			maxLag = max(maxLag, *p.Lag.Seconds)
		}
		lagTxns += p.Lag.Transactions
		failures += p.Failures
		if p.LastError != nil {
			errs = append(errs, fmt.Sprintf("p%d: %s", p.Partition, p.LastError.Message))
		}
	}
	out := fmt.Sprintf("state %s, partitions %v, worst lag %.3f s, %d transactions behind in all, failures %d; oldest publication read %.3f s old", st.State, states, maxLag, lagTxns, failures, oldest)
	if unknown > 0 {
		out += fmt.Sprintf(", lag unknown on %d", unknown)
	}
	if len(errs) > 0 {
		out += ", errors: " + strings.Join(errs, "; ")
	}
	return out
}

func printStatus(st streamStatus) {
	fmt.Printf("| partition | state | checkpoint | latest | lag txns | lag s | delivered | failures | last error |\n|---:|---|---|---|---:|---:|---:|---:|---|\n")
	for _, p := range st.Partitions {
		lag := "?"
		if p.Lag.Seconds != nil {
			lag = fmt.Sprintf("%.3f", *p.Lag.Seconds)
		}
		last := ""
		if p.LastError != nil {
			last = p.LastError.Message
		}
		fmt.Printf("| %d | %s | %s | %s | %d | %s | %d | %d | %s |\n", p.Partition, p.State, p.Checkpoint, p.Latest, p.Lag.Transactions, lag, p.Delivered, p.Failures, last)
	}
}

// window is the span of the load whose lag percentiles are shown apart
// (the broker's JVM compiles its hot paths during the first seconds).
const window = 5 * time.Second

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// fpct is the p-th percentile of xs (nearest rank), 0 when empty.
func fpct(xs []float64, p int) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	i := (len(s)*p + 99) / 100
	return s[min(max(i-1, 0), len(s)-1)]
}

// byWindow renders lags grouped by window as " [count] p50/p99/max ...".
func byWindow(windows map[int][]time.Duration) string {
	last := -1
	for w := range windows {
		last = max(last, w)
	}
	var b strings.Builder
	for w := range last + 1 {
		ds := windows[w]
		fmt.Fprintf(&b, " [%d] %.0f/%.0f/%.0f", len(ds), ms(pctOf(ds, 50)), ms(pctOf(ds, 99)), ms(pctOf(ds, 100)))
	}
	return b.String()
}

// ratio is a's percentile over b's.
func ratio(a, b []time.Duration, p int) string {
	x, y := pctOf(a, p), pctOf(b, p)
	if y <= 0 {
		return "-"
	}
	return fmt.Sprintf("%.1f×", float64(x)/float64(y))
}

func (ks *kafkaStream) close() {
	ks.cancel()
	<-ks.done
	ks.cl.Close()
	ks.probe.Close()
}
