// Package localcluster runs Doppio clusters of real `doppio start`
// processes on this machine for the benchmarks: an etcd in the calling
// process, node processes on free loopback ports, and small HTTP helpers.
package localcluster

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/doppio-db/doppio/client"
	"github.com/doppio-db/doppio/client/wire"

	"github.com/doppio-db/doppio/internal/embedetcd"
	"github.com/doppio-db/doppio/internal/testport"

	"github.com/doppio-db/doppio/bench/internal/benchutil"
)

// HTTPClient keeps many idle connections per node: up to one prober per
// partition writes at once, and new connections per attempt would only
// measure the kernel.
var HTTPClient = &http.Client{Transport: &http.Transport{
	MaxIdleConns:        8192,
	MaxIdleConnsPerHost: 4096,
	IdleConnTimeout:     30 * time.Second,
	DialContext:         (&net.Dialer{Timeout: time.Second}).DialContext,
}}

var readyLine = regexp.MustCompile(`doppio (?:node|router) ready.* http=(\S+)`)

// Proc is one `doppio start` (or `doppio router`) process.
type Proc struct {
	ID   string
	cmd  *exec.Cmd
	Addr string // http://host:port
	mu   sync.Mutex
	logs bytes.Buffer
	done chan struct{}
}

// Tail returns the last n lines of the process's log.
func (p *Proc) Tail(n int) string {
	p.mu.Lock()
	defer p.mu.Unlock()
	lines := strings.Split(strings.TrimRight(p.logs.String(), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// Pid is the process's id, for reading its CPU time in /proc.
func (p *Proc) Pid() int { return p.cmd.Process.Pid }

// Kill sends SIGKILL (kill -9) and reaps the process.
func (p *Proc) Kill() {
	if p.cmd.Process == nil {
		return
	}
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.done
}

// Cluster is an etcd in this process and N node processes.
type Cluster struct {
	Dir   string
	Etcd  *embedetcd.Server
	Nodes []*Proc
}

// FreePort returns a loopback address with a port free at the moment,
// below the kernel's ephemeral range (see testport).
func FreePort() (string, error) { return testport.Free("127.0.0.1") }

// Start starts etcd and n nodes (n1, n2, …) with the extra flags, data
// under dir.
func Start(ctx context.Context, binary, dir string, n int, extra []string) (*Cluster, error) {
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	etcd, err := embedetcd.Start(ctx, filepath.Join(dir, "etcd"), quiet)
	if err != nil {
		return nil, err
	}
	c := &Cluster{Dir: dir, Etcd: etcd}
	errs := make([]error, n)
	c.Nodes = make([]*Proc, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			id := fmt.Sprintf("n%d", i+1)
			c.Nodes[i], errs[i] = StartNode(binary, id, filepath.Join(dir, id), etcd.Endpoints()[0], extra)
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			c.Stop()
			return nil, err
		}
	}
	return c, nil
}

// StartNode starts node id with its data in data against the etcd at
// etcd, and waits until it serves.
func StartNode(binary, id, data, etcd string, extra []string) (*Proc, error) {
	httpAddr, err := FreePort()
	if err != nil {
		return nil, err
	}
	grpcAddr, err := FreePort()
	if err != nil {
		return nil, err
	}
	return startProc(binary, id, append([]string{"start", "--id", id, "--data", data, "--http", httpAddr, "--grpc", grpcAddr,
		"--etcd", etcd}, extra...))
}

// StartRouter starts `doppio router` id against the etcd at etcd, and
// waits until it serves.
func StartRouter(binary, id, etcd string, extra []string) (*Proc, error) {
	httpAddr, err := FreePort()
	if err != nil {
		return nil, err
	}
	return startProc(binary, id, append([]string{"router", "--id", id, "--http", httpAddr, "--etcd", etcd}, extra...))
}

// startProc runs binary with args and waits until its log says it is
// ready.
func startProc(binary, id string, args []string) (*Proc, error) {
	cmd := exec.Command(binary, args...)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return nil, err
	}
	cmd.Stdout = io.Discard
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	p := &Proc{ID: id, cmd: cmd, done: make(chan struct{})}
	found := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		sent := false
		for sc.Scan() {
			p.mu.Lock()
			if p.logs.Len() > 4<<20 { // keep the tail only
				b := append([]byte(nil), p.logs.Bytes()[p.logs.Len()-(1<<20):]...)
				p.logs.Reset()
				p.logs.Write(b)
			}
			p.logs.WriteString(sc.Text() + "\n")
			p.mu.Unlock()
			if m := readyLine.FindStringSubmatch(sc.Text()); m != nil && !sent {
				found <- m[1]
				sent = true
			}
		}
		if !sent {
			close(found)
		}
		_ = cmd.Wait()
		close(p.done)
	}()
	select {
	case addr, ok := <-found:
		if !ok {
			return nil, fmt.Errorf("doppio %v exited before it was ready:\n%s", args, p.Tail(30))
		}
		p.Addr = "http://" + addr
	case <-time.After(60 * time.Second):
		p.Kill()
		return nil, fmt.Errorf("doppio %v not ready after 60s:\n%s", args, p.Tail(30))
	}
	return p, nil
}

// Stop kills every node, closes etcd and removes the data; stopping
// again does nothing more.
func (c *Cluster) Stop() {
	for _, n := range c.Nodes {
		if n != nil {
			n.Kill()
		}
	}
	if c.Etcd != nil {
		c.Etcd.Close()
		c.Etcd = nil
	}
	os.RemoveAll(c.Dir)
}

// Do sends a request with a JSON body (nil for none) and returns the
// status and body.
func Do(ctx context.Context, base, method, path string, body any, headers ...string) (int, []byte, error) {
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = strings.NewReader(b)
	default:
		js, err := json.Marshal(b)
		if err != nil {
			return 0, nil, err
		}
		rd = bytes.NewReader(js)
	}
	req, err := http.NewRequestWithContext(ctx, method, base+path, rd)
	if err != nil {
		return 0, nil, err
	}
	if rd != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := HTTPClient.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, b, err
}

// Info reads GET /_cluster from the node at base.
func Info(ctx context.Context, base string) (wire.ClusterInfo, error) {
	var info wire.ClusterInfo
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	st, b, err := Do(ctx, base, "GET", "/_cluster", nil)
	if err != nil {
		return info, err
	}
	if st != 200 {
		return info, fmt.Errorf("GET /_cluster: %d %s", st, b)
	}
	return info, json.Unmarshal(b, &info)
}

// Build compiles cmd/doppio into a new temporary directory under workDir
// (the system's when empty) and returns the binary and a function that
// removes it.
func Build(ctx context.Context, workDir string) (binary string, cleanup func(), err error) {
	dir, err := os.MkdirTemp(workDir, "doppio-bench-bin-")
	if err != nil {
		return "", nil, err
	}
	binary = filepath.Join(dir, "doppio")
	root, err := benchutil.RepoRoot()
	if err != nil {
		os.RemoveAll(dir)
		return "", nil, err
	}
	// In the main module: the bench module's go.sum lacks what only the
	// binary (not the harnesses) imports.
	build := exec.CommandContext(ctx, "go", "build", "-o", binary, "./cmd/doppio")
	build.Dir = root
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		os.RemoveAll(dir)
		return "", nil, fmt.Errorf("build doppio: %w", err)
	}
	return binary, func() { os.RemoveAll(dir) }, nil
}

// Settled reports whether every partition has a leader and replicas
// caught-up members and, when mustHold is given, whether the replicas are
// spread evenly over every node with each of those nodes holding some.
func Settled(info wire.ClusterInfo, partitions, replicas int, mustHold []string) (bool, string) {
	if len(info.Partitions) != partitions {
		return false, fmt.Sprintf("%d partitions", len(info.Partitions))
	}
	per := map[string]int{}
	for _, p := range info.Partitions {
		if p.Leader == "" || len(p.Replicas) != replicas || len(p.Members) != replicas {
			return false, fmt.Sprintf("partition %d: leader %q, replicas %v, %d members", p.Partition, p.Leader, p.Replicas, len(p.Members))
		}
		for _, m := range p.Members {
			// Under load a follower is a few entries behind at any instant:
			// caught up is what the nodes promote a learner at.
			if m.Lag == nil || *m.Lag > 64 || m.Role == "learner" {
				return false, fmt.Sprintf("partition %d: member %s %s, lag %v", p.Partition, m.Node, m.Role, m.Lag)
			}
		}
		for _, r := range p.Replicas {
			per[r]++
		}
	}
	if mustHold == nil {
		return true, ""
	}
	lo, hi := 1<<30, 0
	for _, n := range info.Nodes {
		lo, hi = min(lo, per[n.ID]), max(hi, per[n.ID])
	}
	for _, id := range mustHold {
		if per[id] == 0 {
			return false, fmt.Sprintf("replicas per node %v", per)
		}
	}
	return hi-lo <= 1, fmt.Sprintf("replicas per node %v", per)
}

// WaitUntil is Poll every 250 ms.
func WaitUntil(ctx context.Context, d time.Duration, what string, cond func() (bool, string, error)) error {
	return Poll(ctx, 250*time.Millisecond, d, what, cond)
}

// Poll calls cond every interval until it holds, for at most d; the error
// names what was awaited and the last state cond described (a cond error
// is a state, tried again).
func Poll(ctx context.Context, interval, d time.Duration, what string, cond func() (bool, string, error)) error {
	deadline := time.Now().Add(d)
	state := ""
	for time.Now().Before(deadline) {
		ok, s, err := cond()
		if err == nil && ok {
			return nil
		}
		state = s
		if err != nil {
			state = err.Error()
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(interval):
		}
	}
	return fmt.Errorf("%s: not within %v; last state: %s", what, d, state)
}

// MetricSum sums an unlabelled metric over the nodes' /metrics.
func (c *Cluster) MetricSum(ctx context.Context, name string) float64 {
	var sum float64
	for _, n := range c.Nodes {
		st, b, err := Do(ctx, n.Addr, "GET", "/metrics", nil)
		if err != nil || st != 200 {
			continue
		}
		for _, line := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(line, name+" "); ok {
				f, _ := strconv.ParseFloat(strings.TrimSpace(v), 64)
				sum += f
			}
		}
	}
	return sum
}

// CreateTable creates database db (partitions partitions of replicas
// replicas) and its table, then waits until every partition is placed,
// led and caught up.
func (c *Cluster) CreateTable(ctx context.Context, cl *client.Client, db string, partitions, replicas int, table string, spec client.TableSpec) error {
	if _, _, err := cl.PutDatabase(ctx, db, client.DatabaseSpec{Partitions: partitions, Replicas: replicas}); err != nil {
		return fmt.Errorf("create database %s: %w", db, err)
	}
	if _, _, err := cl.PutTable(ctx, db, table, spec); err != nil {
		return fmt.Errorf("create table %s.%s: %w", db, table, err)
	}
	return WaitUntil(ctx, 2*time.Minute, "partitions placed", func() (bool, string, error) {
		info, err := Info(ctx, c.Nodes[0].Addr)
		if err != nil {
			return false, "", err
		}
		ok, state := Settled(info, partitions, replicas, nil)
		return ok, state, nil
	})
}
