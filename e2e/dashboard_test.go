package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/doppio-db/doppio/internal/promtest"
)

// devCluster is a running `doppio dev --nodes 3`.
type devCluster struct {
	cmd      *exec.Cmd
	data     string // its --data directory
	certsDir string // where --secure made the certificates
	mu       sync.Mutex
	logs     strings.Builder
	nodes    map[string]string // node id -> host:port of its REST port
	etcd     string            // client URL of its etcd
}

// startDevCluster runs `doppio dev --nodes 3` with flags and waits until
// its three nodes are ready; it is stopped when the test ends.
func startDevCluster(t *testing.T, flags ...string) *devCluster {
	t.Helper()
	data := t.TempDir()
	cmd := exec.Command(binary, append([]string{"dev", "--nodes", "3", "--data", data, "--http", freePort(t)}, flags...)...)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = cmd.Stdout
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(20 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
	})
	d := &devCluster{cmd: cmd, data: data, certsDir: filepath.Join(data, "certs"), nodes: map[string]string{}}
	ready := map[string]bool{}
	nodeLine := regexp.MustCompile(`^node (n\d): https?://(\S+)`)
	etcdLine := regexp.MustCompile(`^etcd: (https?://\S+)`)
	readyRe := regexp.MustCompile(`^\[(n\d)\] .*doppio node ready`)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			l := sc.Text()
			d.mu.Lock()
			d.logs.WriteString(l + "\n")
			if m := nodeLine.FindStringSubmatch(l); m != nil {
				d.nodes[m[1]] = m[2]
			}
			if m := etcdLine.FindStringSubmatch(l); m != nil {
				d.etcd = m[1]
			}
			if m := readyRe.FindStringSubmatch(l); m != nil {
				ready[m[1]] = true
			}
			d.mu.Unlock()
		}
	}()
	waitFor(t, 45*time.Second, "three nodes ready", func() (bool, string) {
		d.mu.Lock()
		defer d.mu.Unlock()
		return len(ready) == 3 && len(d.nodes) == 3 && d.etcd != "", d.logs.String()
	})
	return d
}

// log is everything the cluster printed so far.
func (d *devCluster) log() string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.logs.String()
}

// send makes one JSON request to node id and returns its status.
func (d *devCluster) send(ctx context.Context, id, method, path string, body any) (int, error) {
	d.mu.Lock()
	addr := d.nodes[id]
	d.mu.Unlock()
	var r *bytes.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		r = bytes.NewReader(b)
	} else {
		r = bytes.NewReader(nil)
	}
	req, err := http.NewRequestWithContext(ctx, method, "http://"+addr+path, r)
	if err != nil {
		return 0, err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	resp.Body.Close()
	return resp.StatusCode, nil
}

// dashboardQueries returns every PromQL query of the Grafana dashboard,
// with Grafana's rate interval made a window of several scrapes.
func dashboardQueries(t *testing.T, path string) []string {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	type panel struct {
		Title   string `json:"title"`
		Targets []struct {
			Expr string `json:"expr"`
		} `json:"targets"`
		Panels []json.RawMessage `json:"panels"`
	}
	var dash struct {
		Panels []panel `json:"panels"`
	}
	if err := json.Unmarshal(raw, &dash); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	var out []string
	for _, p := range dash.Panels {
		for _, tg := range p.Targets {
			out = append(out, strings.ReplaceAll(tg.Expr, "$__rate_interval", "10s"))
		}
		if len(p.Panels) > 0 {
			t.Fatalf("%s: panel %q nests panels (a collapsed row); keep rows open so every query is tested", path, p.Title)
		}
	}
	if len(out) == 0 {
		t.Fatalf("%s has no queries", path)
	}
	return out
}

// TestDashboardQueriesReturnDataFromALiveCluster runs every query of the
// Grafana dashboard (deploy/grafana/doppio.json) against Debian's
// Prometheus scraping a live `doppio dev --nodes 3` under a small load
// (writes, reads, and writes beyond a quota): each must answer series
// with numbers. The health metrics must also say the exact state of the
// settled cluster: every partition led once, none unavailable or
// under-replicated, one controller.
func TestDashboardQueriesReturnDataFromALiveCluster(t *testing.T) {
	queries := dashboardQueries(t, "../deploy/grafana/doppio.json")
	promtest.Install(t) // before the cluster starts: an install may be slow
	d := startDevCluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()

	const partitions = 4 + 1
	for _, req := range []struct {
		method, path string
		body         any
		want         int
	}{
		{"PUT", "/_schemas/dash", map[string]any{"partitions": 4, "replicas": 3}, 201},
		{"PUT", "/_schemas/dash/Item", json.RawMessage(`{"key":[{"name":"id","type":"string"}],"schema":{"type":"record","name":"Item","fields":[{"name":"n","type":"long"}]}}`), 201},
		{"PUT", "/_schemas/limited", map[string]any{"partitions": 1, "replicas": 3}, 201},
		{"PUT", "/_schemas/limited/Item", json.RawMessage(`{"key":[{"name":"id","type":"string"}],"schema":{"type":"record","name":"Item","fields":[{"name":"n","type":"long"}]}}`), 201},
		{"PUT", "/_quotas/databases/limited", map[string]any{"writeUnitsPerSecond": 1}, 201},
	} {
		if got, err := d.send(ctx, "n1", req.method, req.path, req.body); err != nil || got != req.want {
			t.Fatalf("%s %s: %d %v, want %d", req.method, req.path, got, err, req.want)
		}
	}

	var targets []string
	for _, id := range []string{"n1", "n2", "n3"} {
		targets = append(targets, d.nodes[id])
	}
	srv := promtest.Start(t, promtest.Config{Targets: targets, Interval: time.Second})

	// The load runs until the queries are answered, so that every rate
	// has samples in its window.
	load, stopLoad := context.WithCancel(ctx)
	var throttled, served sync.WaitGroup
	throttled.Add(1)
	served.Add(1)
	loadDone := make(chan struct{})
	go func() {
		defer close(loadDone)
		once429, once200 := sync.OnceFunc(throttled.Done), sync.OnceFunc(served.Done)
		for i := 0; load.Err() == nil; i++ {
			node := []string{"n1", "n2", "n3"}[i%3]
			path := fmt.Sprintf("/dash/Item/k%d", i%50)
			if s, _ := d.send(load, node, "PUT", path, map[string]any{"n": i}); s/100 == 2 {
				once200()
			}
			d.send(load, node, "GET", path, nil)
			if s, _ := d.send(load, node, "PUT", fmt.Sprintf("/limited/Item/k%d", i), map[string]any{"n": i}); s == http.StatusTooManyRequests {
				once429()
			}
			time.Sleep(20 * time.Millisecond)
		}
	}()
	defer func() { stopLoad(); <-loadDone }()
	throttled.Wait()
	served.Wait()

	start := time.Now()
	exact := map[string]float64{
		`count(up{job="doppio"} == 1)`:                                            3,
		`sum(doppio_replicas_leading)`:                                            partitions,
		`sum(doppio_replicas)`:                                                    partitions * 3,
		`sum(doppio_replicas_leaderless)`:                                         0,
		`max(doppio_cluster_partitions_unavailable)`:                              0,
		`max(doppio_cluster_partitions_under_replicated)`:                         0,
		`sum(doppio_controller_active)`:                                           1,
		`count(doppio_storage_disk_free_bytes > 0)`:                               3,
		`max(abs(doppio_time_seconds - timestamp(doppio_time_seconds))) < bool 1`: 1,
	}
	for q, want := range exact {
		waitFor(t, 60*time.Second, q, func() (bool, string) {
			got, err := srv.Query(ctx, q)
			if err != nil {
				return false, err.Error()
			}
			return len(got) == 1 && got[0].Value == want, fmt.Sprintf("%s = %v, want %v", q, got, want)
		})
	}
	for _, q := range queries {
		waitFor(t, 30*time.Second, "data for "+q, func() (bool, string) {
			got, err := srv.Query(ctx, q)
			if err != nil {
				return false, err.Error()
			}
			for _, s := range got {
				if !math.IsNaN(s.Value) {
					return true, ""
				}
			}
			return false, fmt.Sprintf("%s answered %v", q, got)
		})
	}
	t.Logf("%d dashboard queries answered with data %v after the load began", len(queries), time.Since(start).Round(time.Millisecond))
}
