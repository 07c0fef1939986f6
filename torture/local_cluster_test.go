package torture

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/doppio-db/doppio/internal/embedetcd"
	"github.com/doppio-db/doppio/internal/testport"
)

// localCluster is three `doppio start` processes on 127.0.0.1 sharing an
// etcd run inside the test: no network namespaces, so it needs no root.
// (The fault harness puts nodes in namespaces; this one only checks that the
// workloads pass against a healthy cluster and one kill -9.)
type localCluster struct {
	t     *testing.T
	bin   string
	nodes []*localNode
}

type localNode struct {
	args []string
	addr string
	peer string // base URL of its peer listener (the --grpc port)
	mu   sync.Mutex
	cmd  *exec.Cmd
	logs bytes.Buffer
}

func (c *localCluster) Endpoints() []string {
	out := make([]string, len(c.nodes))
	for i, n := range c.nodes {
		out[i] = n.addr
	}
	return out
}

var localReady = regexp.MustCompile(`doppio node ready.* http=(\S+)`)

// localPort returns a loopback address whose port is free now, below the
// kernel's ephemeral range (see testport).
func localPort(t *testing.T) string {
	t.Helper()
	addr, err := testport.Free("127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	return addr
}

// startLocalCluster starts n nodes of the package's doppio binary.
func startLocalCluster(t *testing.T, n int) *localCluster {
	t.Helper()
	dir := t.TempDir()
	bin := doppioBinary(t) // built once per package run (torture_test.go)
	etcd, err := embedetcd.Start(context.Background(), filepath.Join(dir, "etcd"), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { etcd.Close() })
	c := &localCluster{t: t, bin: bin}
	for i := range n {
		id := fmt.Sprintf("n%d", i+1)
		http, peer := localPort(t), localPort(t)
		c.nodes = append(c.nodes, &localNode{addr: "http://" + http, peer: "http://" + peer, args: []string{"start", "--id", id,
			"--data", filepath.Join(dir, id), "--http", http, "--grpc", peer, "--etcd", etcd.Endpoints()[0]}})
	}
	var wg sync.WaitGroup
	for i := range c.nodes {
		wg.Add(1)
		go func() { defer wg.Done(); c.start(i) }()
	}
	wg.Wait()
	t.Cleanup(func() {
		for i := range c.nodes {
			c.kill(i)
		}
		if t.Failed() {
			logs, _ := os.MkdirTemp("", "doppio-torture-logs-")
			for _, n := range c.nodes {
				n.mu.Lock()
				p := filepath.Join(logs, n.args[2]+".log")
				_ = os.WriteFile(p, n.logs.Bytes(), 0o644)
				t.Logf("%s logs in %s; the tail:\n%s", n.args[2], p, tail(n.logs.String(), 2000))
				n.mu.Unlock()
			}
		}
	})
	return c
}

func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}

// start runs node i and waits for its ready line.
func (c *localCluster) start(i int) {
	n := c.nodes[i]
	cmd := exec.Command(c.bin, n.args...)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		c.t.Error(err)
		return
	}
	if err := cmd.Start(); err != nil {
		c.t.Error(err)
		return
	}
	n.mu.Lock()
	n.cmd = cmd
	n.mu.Unlock()
	ready := make(chan bool, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		sent := false
		for sc.Scan() {
			n.mu.Lock()
			n.logs.WriteString(sc.Text() + "\n")
			n.mu.Unlock()
			if !sent && localReady.MatchString(sc.Text()) {
				ready <- true
				sent = true
			}
		}
		if !sent {
			ready <- false
		}
	}()
	select {
	case ok := <-ready:
		if !ok {
			c.t.Errorf("node %v exited before it was ready", n.args)
		}
	case <-time.After(60 * time.Second):
		c.t.Errorf("node %v not ready after 60 s", n.args)
	}
}

// kill sends SIGKILL to node i and reaps it.
func (c *localCluster) kill(i int) {
	n := c.nodes[i]
	n.mu.Lock()
	cmd := n.cmd
	n.cmd = nil
	n.mu.Unlock()
	if cmd == nil {
		return
	}
	_ = cmd.Process.Signal(syscall.SIGKILL)
	_ = cmd.Wait()
}

// runWorkloads sets up, runs (for d) and checks every workload concurrently;
// fault (if not nil) runs alongside, given the run's duration.
func runWorkloads(t *testing.T, target Target, ws []Workload, seed uint64, d time.Duration, fault func(d time.Duration)) []Result {
	t.Helper()
	ctx := context.Background()
	setupCtx, cancel := context.WithTimeout(ctx, 90*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	errs := make([]error, len(ws))
	for i, w := range ws {
		wg.Add(1)
		go func() { defer wg.Done(); errs[i] = w.Setup(setupCtx, target) }()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("%s setup: %v", ws[i].Name(), err)
		}
	}
	runCtx, stop := context.WithTimeout(ctx, d)
	defer stop()
	for i, w := range ws {
		wg.Add(1)
		rng := rand.New(rand.NewPCG(seed, uint64(i)))
		go func() { defer wg.Done(); errs[i] = w.Run(runCtx, target, rng) }()
	}
	if fault != nil {
		fault(d)
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("%s run: %v", ws[i].Name(), err)
		}
	}
	checkCtx, cancel2 := context.WithTimeout(ctx, 90*time.Second)
	defer cancel2()
	results := make([]Result, len(ws))
	// Artifacts outlive the test, so a failure can be studied.
	dir, err := os.MkdirTemp("", fmt.Sprintf("doppio-torture-%d-", seed))
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("artifacts (written on failure) under %s", dir)
	defer func() {
		if entries, err := os.ReadDir(dir); err == nil && len(entries) == 0 {
			os.Remove(dir)
		}
	}()
	for i, w := range ws {
		wg.Add(1)
		go func() { defer wg.Done(); results[i] = w.Check(checkCtx, target, dir) }()
	}
	wg.Wait()
	return results
}

func TestWorkloadsPassOnLocalClusterWithKill(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a cluster of three processes")
	}
	c := startLocalCluster(t, 3)
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	ws := []Workload{&Register{}, &Bank{}, &Counter{}, &Set{}, &Changelog{}}
	results := runWorkloads(t, c, ws, seed, 9*time.Second, func(d time.Duration) {
		time.Sleep(d / 3)
		c.kill(2)
		t.Logf("killed n3 (kill -9)")
		time.Sleep(d / 3)
		c.start(2)
		t.Logf("restarted n3")
	})
	for i, r := range results {
		if h, ok := ws[i].(interface{ History() *History }); ok && h.History() != nil {
			t.Logf("%s: %s", r.Workload, Summary(h.History().Ops()))
		}
		t.Logf("%s: attempted %d, acknowledged %d, indeterminate %d, lost %d, violations %d, longest write gap %s",
			r.Workload, r.Attempted, r.Acknowledged, r.Indeterminate, r.Lost, r.Violations, r.LongestWriteGap.Round(time.Millisecond))
		if !r.OK() {
			t.Errorf("%s failed: %v (artifacts %v)", r.Workload, r.Failures, r.Artifacts)
		}
		if r.Acknowledged == 0 {
			t.Errorf("%s: nothing acknowledged", r.Workload)
		}
	}
}
