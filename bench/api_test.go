package bench

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/doppio-db/doppio/internal/http1"
	"github.com/doppio-db/doppio/internal/node"
)

var (
	target string // base URL of the node under test
	noop   string // base URL of the no-op handler, served by net/http
	// noopHTTP1 is the no-op handler served by internal/http1, as the
	// node serves the API.
	noopHTTP1 string
	// httpServer chooses how the node serves HTTP: fast-path (plain
	// requests by internal/http1) or net-http (net/http alone), as the
	// flag of doppio start.
	httpServer = flag.String("http-server", "fast-path", "how the node serves HTTP: fast-path or net-http")
	client     = &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 256, MaxConnsPerHost: 256}}
)

func TestMain(m *testing.M) {
	flag.Parse()
	if flag.Lookup("test.bench").Value.String() == "" {
		os.Exit(m.Run()) // only benchmarks live here: start nothing
	}
	dir, err := os.MkdirTemp("", "doppio-bench")
	if err != nil {
		panic(err)
	}
	n, err := node.Start(context.Background(), node.Config{DataDir: dir, HTTPAddr: "127.0.0.1:0", NetHTTPOnly: *httpServer == "net-http"})
	if err != nil {
		panic(err)
	}
	target = "http://" + n.Addr()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	noop = "http://" + ln.Addr().String()
	noopHandler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`{"subject":"hello","body":"world"}`))
	})
	go http.Serve(ln, noopHandler)
	// The same handler behind the node's own HTTP server: the ceiling of
	// the document API as served.
	ln1, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	noopHTTP1 = "http://" + ln1.Addr().String()
	go http1.New(noopHandler, nil).Serve(ln1)
	if err := setup(); err != nil {
		panic(err)
	}
	code := m.Run()
	n.Close()
	os.RemoveAll(dir)
	os.Exit(code)
}

func send(method, url, body string) (int, error) {
	var rd io.Reader
	if body != "" {
		rd = bytes.NewReader([]byte(body))
	}
	req, err := http.NewRequest(method, url, rd)
	if err != nil {
		return 0, err
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := client.Do(req)
	if err != nil {
		return 0, err
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode, nil
}

func setup() error {
	steps := []struct{ method, path, body string }{
		{"PUT", "/_schemas/bench", `{"partitions":8,"replicas":1}`},
		{"PUT", "/_schemas/bench/Mailbox", `{"key":[{"name":"mailboxId","type":"string"}],"schema":{"type":"record","name":"Mailbox","fields":[{"name":"unread","type":"long","default":0},{"name":"total","type":"long","default":0}]}}`},
		{"PUT", "/_schemas/bench/Message", `{"key":[{"name":"mailboxId","type":"string"},{"name":"messageId","type":"long"}],"schema":{"type":"record","name":"Message","fields":[{"name":"subject","type":"string"},{"name":"body","type":"string"}]}}`},
		{"PUT", "/_schemas/bench/Inbox", `{"key":[{"name":"mailboxId","type":"string"},{"name":"messageId","type":"long"}],"schema":{"type":"record","name":"Inbox","fields":[{"name":"subject","type":"string","index":"text"},{"name":"isInbox","type":"boolean","index":"attribute"},{"name":"createdOn","type":"long","index":"attribute"}]}}`},
	}
	for _, s := range steps {
		if code, err := send(s.method, target+s.path, s.body); err != nil || code >= 300 {
			return fmt.Errorf("%s %s: %d %v", s.method, s.path, code, err)
		}
	}
	for i := range 1000 {
		if code, err := send("PUT", fmt.Sprintf("%s/bench/Message/m%d/%d", target, i%100, i), `{"subject":"hello","body":"world"}`); err != nil || code >= 300 {
			return fmt.Errorf("seed: %d %v", code, err)
		}
	}
	for i := range 1000 {
		body := fmt.Sprintf(`{"subject":"hello world %d","isInbox":%v,"createdOn":%d}`, i, i%4 != 0, i)
		if code, err := send("PUT", fmt.Sprintf("%s/bench/Inbox/m%d/%d", target, i%10, i), body); err != nil || code >= 300 {
			return fmt.Errorf("seed: %d %v", code, err)
		}
	}
	for i := range 100 {
		if code, err := send("PUT", fmt.Sprintf("%s/bench/Mailbox/m%d", target, i), `{"unread":0}`); err != nil || code >= 300 {
			return fmt.Errorf("seed: %d %v", code, err)
		}
	}
	return nil
}

// run drives op from parallel clients and reports ops/s, p50 and p99.
func run(b *testing.B, want int, op func(i int64) (method, url, body string)) {
	var (
		next atomic.Int64
		mu   sync.Mutex
		lat  []time.Duration
	)
	b.SetParallelism(8)
	b.ResetTimer()
	start := time.Now()
	b.RunParallel(func(pb *testing.PB) {
		local := make([]time.Duration, 0, 1024)
		for pb.Next() {
			method, url, body := op(next.Add(1))
			t0 := time.Now()
			code, err := send(method, url, body)
			local = append(local, time.Since(t0))
			if err != nil || code != want {
				b.Errorf("%s %s: %d %v", method, url, code, err)
				return
			}
		}
		mu.Lock()
		lat = append(lat, local...)
		mu.Unlock()
	})
	elapsed := time.Since(start)
	b.StopTimer()
	slices.Sort(lat)
	if len(lat) == 0 {
		return
	}
	b.ReportMetric(float64(len(lat))/elapsed.Seconds(), "ops/s")
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs")
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-µs")
}

func BenchmarkNoopHandler(b *testing.B) {
	run(b, 200, func(int64) (string, string, string) { return "GET", noop + "/bench/Message/m1/1", "" })
}

func BenchmarkNoopHandlerHTTP1(b *testing.B) {
	run(b, 200, func(int64) (string, string, string) { return "GET", noopHTTP1 + "/bench/Message/m1/1", "" })
}

func BenchmarkGet(b *testing.B) {
	run(b, 200, func(i int64) (string, string, string) {
		k := (i * 7919) % 1000
		return "GET", fmt.Sprintf("%s/bench/Message/m%d/%d", target, k%100, k), ""
	})
}

func BenchmarkPut(b *testing.B) {
	base := time.Now().UnixNano()
	run(b, 201, func(i int64) (string, string, string) {
		return "PUT", fmt.Sprintf("%s/bench/Message/p%d/%d", target, i%1000, base+i), `{"subject":"hello","body":"world"}`
	})
}

func BenchmarkInc(b *testing.B) {
	run(b, 200, func(i int64) (string, string, string) {
		return "PATCH", fmt.Sprintf("%s/bench/Mailbox/m%d", target, i%100), `{"$inc":{"unread":1}}`
	})
}

// BenchmarkTxn5 is a 5-operation transaction in one document group: four
// message puts and a counter increment on the mailbox.
func BenchmarkTxn5(b *testing.B) {
	base := time.Now().UnixNano()
	run(b, 200, func(i int64) (string, string, string) {
		box := fmt.Sprintf("m%d", i%100)
		body := fmt.Sprintf(`{"partitionKey":%q,"ops":[
			{"op":"put","table":"Message","key":[%q,%d],"document":{"subject":"a","body":"b"}},
			{"op":"put","table":"Message","key":[%q,%d],"document":{"subject":"a","body":"b"}},
			{"op":"put","table":"Message","key":[%q,%d],"document":{"subject":"a","body":"b"}},
			{"op":"put","table":"Message","key":[%q,%d],"document":{"subject":"a","body":"b"}},
			{"op":"patch","table":"Mailbox","key":[%q],"patch":{"$inc":{"unread":4,"total":4}}}]}`,
			box, box, base+4*i, box, base+4*i+1, box, base+4*i+2, box, base+4*i+3, box)
		return "POST", target + "/bench/_txn", body
	})
}

// BenchmarkQueryInbox is the paper's inbox query on a 100-message mailbox:
// isInbox:true, newest first, a page of 20.
func BenchmarkQueryInbox(b *testing.B) {
	run(b, 200, func(i int64) (string, string, string) {
		return "GET", fmt.Sprintf("%s/bench/Inbox/m%d?query=isInbox:true&sort=-createdOn&limit=20", target, i%10), ""
	})
}
