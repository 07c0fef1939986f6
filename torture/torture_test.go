package torture

import (
	"context"
	"crypto/tls"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/doppio-db/doppio/internal/certs"
)

// The CI version of the suite: every nemesis, every workload, a short but
// real run on a fresh cluster of doppio processes in network namespaces.
//
//	DOPPIO_TORTURE=off            skip it (reported as skipped)
//	DOPPIO_TORTURE_SEED=n         replay a seed (default: fixed)
//	DOPPIO_TORTURE_DURATION=30s   run each nemesis longer
//	DOPPIO_TORTURE_NEMESIS=a,b    only these nemeses (the secure run is
//	                              partition's: TestSecureClusterUnderPartitions)
const defaultSeed = 20261122

// requireNamespaces fails the test, saying why, when it cannot build
// namespaces; it skips only when told to explicitly.
func requireNamespaces(t *testing.T) {
	t.Helper()
	if os.Getenv("DOPPIO_TORTURE") == "off" {
		t.Skip("DOPPIO_TORTURE=off: the fault-injection suite was explicitly turned off")
	}
	if err := CanCreateNetworks(); err != nil {
		t.Fatal(err)
	}
}

var (
	buildOnce sync.Once
	binPath   string
	buildErr  error
)

func TestMain(m *testing.M) {
	code := m.Run()
	if binPath != "" {
		os.RemoveAll(filepath.Dir(binPath))
	}
	os.Exit(code)
}

// doppioBinary builds cmd/doppio once for the package's tests.
func doppioBinary(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "doppio-torture-bin")
		if err != nil {
			buildErr = err
			return
		}
		binPath = filepath.Join(dir, "doppio")
		out, err := exec.Command("go", "build", "-o", binPath, "../cmd/doppio").CombinedOutput()
		if err != nil {
			buildErr = err
			t.Logf("%s", out)
		}
	})
	if buildErr != nil {
		t.Fatalf("build doppio: %v", buildErr)
	}
	return binPath
}

// lineLogger hands each line written to it to t.Log.
type lineLogger struct {
	t   *testing.T
	mu  sync.Mutex
	buf []byte
}

func (l *lineLogger) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.buf = append(l.buf, p...)
	for {
		i := slices.Index(l.buf, '\n')
		if i < 0 {
			return len(p), nil
		}
		l.t.Log(string(l.buf[:i]))
		l.buf = l.buf[i+1:]
	}
}

func TestEveryNemesisAgainstEveryWorkload(t *testing.T) {
	requireNamespaces(t)
	bin := doppioBinary(t)
	seed, d, only := suiteSettings(t)
	t.Logf("seed %d, %v per nemesis", seed, d)
	for _, nm := range Nemeses() {
		if nm.Name == "none" && only == "" {
			continue // every other run has quiet stretches
		}
		if only != "" && !slices.Contains(strings.Split(only, ","), nm.Name) {
			continue
		}
		t.Run(nm.Name, func(t *testing.T) {
			// mixed runs on five nodes: two of them use the others' etcd;
			// drain needs more nodes than the replication factor.
			nodes := 3
			if nm.Name == "mixed" || nm.Name == "drain" {
				nodes = 5
			}
			runNemesis(t, bin, nm, nodes, false, seed, d)
		})
	}
}

// TestSecureClusterUnderPartitions is the partition configuration of
// TestEveryNemesisAgainstEveryWorkload on a cluster in secure mode (TLS on
// every link, authentication on, the workloads acting as root by its
// client certificate), with the same checks: what TLS reconnections and
// authentication on every request and forward change must not cost
// consistency. DOPPIO_TORTURE_NEMESIS without "partition" leaves it out.
func TestSecureClusterUnderPartitions(t *testing.T) {
	requireNamespaces(t)
	seed, d, only := suiteSettings(t)
	if only != "" && !slices.Contains(strings.Split(only, ","), "partition") {
		return
	}
	nm, err := NemesisNamed("partition")
	if err != nil {
		t.Fatal(err)
	}
	bin := doppioBinary(t)
	t.Logf("seed %d, %v, secure", seed, d)
	runNemesis(t, bin, nm, 3, true, seed, d)
}

// suiteSettings reads the seed, the duration of each nemesis and the
// nemeses to run from the environment (see defaultSeed).
func suiteSettings(t *testing.T) (seed uint64, d time.Duration, only string) {
	t.Helper()
	seed = uint64(defaultSeed)
	if s := os.Getenv("DOPPIO_TORTURE_SEED"); s != "" {
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("DOPPIO_TORTURE_SEED=%q: %v", s, err)
		}
		seed = v
	}
	d = 10 * time.Second
	if s := os.Getenv("DOPPIO_TORTURE_DURATION"); s != "" {
		v, err := time.ParseDuration(s)
		if err != nil {
			t.Fatalf("DOPPIO_TORTURE_DURATION=%q: %v", s, err)
		}
		d = v
	}
	return seed, d, os.Getenv("DOPPIO_TORTURE_NEMESIS")
}

// suiteWorkloads is DOPPIO_TORTURE_WORKLOADS (a list, or "all"), by
// default every workload.
func suiteWorkloads() string {
	if s := os.Getenv("DOPPIO_TORTURE_WORKLOADS"); s != "" {
		return s
	}
	return strings.Join(WorkloadNames(), ",")
}

// runNemesis runs the suite's workloads (suiteWorkloads) against a
// fresh cluster of nodes (in secure mode if secure) for d while nm
// injects faults, and fails t unless the run was real (faults planned
// and injected, operations acknowledged) and every check passed.
func runNemesis(t *testing.T, bin string, nm Nemesis, nodes int, secure bool, seed uint64, d time.Duration) {
	t.Helper()
	// Kept when the test fails: node logs, data, histories.
	dir, err := os.MkdirTemp("", "doppio-torture-"+nm.Name+"-")
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	start := StartCluster
	if secure {
		start = StartSecureCluster
	}
	c, err := start(ctx, bin, dir, nodes)
	if err != nil {
		os.RemoveAll(dir)
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := c.Close(); err != nil {
			t.Errorf("tear down: %v", err)
		}
		if !t.Failed() {
			os.RemoveAll(dir)
			return
		}
		for _, n := range c.Nodes {
			t.Logf("%s log (tail):\n%s", n.ID, tailFile(n.LogPath(), 40))
		}
		t.Logf("node logs, data and the workloads' histories are kept under %s", dir)
	})
	if secure {
		requireAuthentication(t, c)
	}
	ws, err := NewWorkloads(suiteWorkloads())
	if err != nil {
		t.Fatal(err)
	}
	r := Run(ctx, c, Options{Nemesis: nm, Workloads: ws, Duration: d, Seed: seed, Dir: filepath.Join(dir, "artifacts"), Log: &lineLogger{t: t}})
	if len(r.Plan) == 0 && nm.Name != "none" {
		t.Errorf("%s planned no fault in %v", nm.Name, d)
	}
	for _, e := range r.Events {
		if e.Err != "" {
			t.Errorf("nemesis step failed: %v", e)
		}
	}
	if len(r.Results) != len(ws) {
		t.Errorf("%d of %d workloads checked: %v", len(r.Results), len(ws), r.Errors)
	}
	for _, w := range r.Results {
		if w.Acknowledged == 0 {
			t.Errorf("%s: no operation acknowledged in %v: not a real run", w.Workload, d)
		}
	}
	if !r.OK() {
		test, flag := "TestEveryNemesisAgainstEveryWorkload", ""
		if secure {
			test, flag = "TestSecureClusterUnderPartitions", " -secure"
		}
		t.Errorf("nemesis %s failed; replay with DOPPIO_TORTURE_SEED=%d DOPPIO_TORTURE_NEMESIS=%s go test -run %s (or make torture TORTURE_FLAGS='-nemesis %s -nodes %d -duration %v -seed %d%s')",
			nm.Name, seed, nm.Name, test, nm.Name, nodes, d, seed, flag)
	}
}

// requireAuthentication fails t unless c's nodes refuse a TLS client that
// presents no certificate (401) and accept root's: what proves that the
// run is authenticated on every request, not only encrypted.
func requireAuthentication(t *testing.T, c *Cluster) {
	t.Helper()
	anonymous, err := certs.ClientTLS(c.certs.dir, "")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		cfg  *tls.Config
		want int
	}{{"no client certificate", anonymous, http.StatusUnauthorized}, {"root's certificate", c.TLS(), http.StatusOK}} {
		hc := &http.Client{Timeout: 5 * time.Second, Transport: newTransport(tc.cfg)}
		for _, n := range c.Nodes {
			resp, err := hc.Get(n.URL() + "/_cluster")
			if err != nil {
				t.Fatalf("%s: GET /_cluster with %s: %v", n.ID, tc.name, err)
			}
			resp.Body.Close()
			if resp.StatusCode != tc.want {
				t.Fatalf("%s: GET /_cluster with %s answered %d, want %d", n.ID, tc.name, resp.StatusCode, tc.want)
			}
		}
		hc.CloseIdleConnections()
	}
}

func TestPlansAreDeterministicAndKeepAMajority(t *testing.T) {
	for _, nm := range Nemeses() {
		for _, n := range []int{3, 5} {
			a, b := nm.Plan(42, time.Minute, n), nm.Plan(42, time.Minute, n)
			if !reflect.DeepEqual(a, b) {
				t.Fatalf("%s on %d nodes: two plans from one seed differ:\n%v\n%v", nm.Name, n, a, b)
			}
			if nm.Name == "none" {
				if len(a) != 0 {
					t.Fatalf("none planned %v", a)
				}
				continue
			}
			if len(a) < 5 {
				t.Fatalf("%s on %d nodes planned %d faults in a minute", nm.Name, n, len(a))
			}
			kinds := map[string]bool{}
			end := time.Duration(0)
			for _, f := range a {
				kinds[f.Kind] = true
				if f.At < end {
					t.Fatalf("%s: fault %v starts before the previous one is healed (%v)", nm.Name, f, end)
				}
				end = f.At + f.Hold
				if end > time.Minute {
					t.Fatalf("%s: fault %v outlasts the run", nm.Name, f)
				}
				if len(f.Nodes) > minority(n) && len(f.Groups) == 0 {
					t.Fatalf("%s: fault %v takes more than a minority of %d nodes", nm.Name, f, n)
				}
				if len(f.Groups) == 2 {
					all := append(append(slices.Clone(f.Groups[0]), f.Groups[1]...), f.Nodes...)
					slices.Sort(all)
					if len(all) != n || len(slices.Compact(all)) != n {
						t.Fatalf("%s: partition %v does not cover %d nodes once each", nm.Name, f, n)
					}
					if f.Kind == "partition" && (len(f.Groups[0]) > minority(n) || len(f.Groups[1]) <= n/2) {
						t.Fatalf("%s: partition %v is not minority | majority", nm.Name, f)
					}
				}
			}
			if nm.Name == "mixed" && len(kinds) < 4 {
				t.Fatalf("mixed drew only %v in a minute", kinds)
			}
		}
	}
	if reflect.DeepEqual(Nemeses()[1].Plan(1, time.Minute, 3), Nemeses()[1].Plan(2, time.Minute, 3)) {
		t.Fatal("two seeds gave one plan")
	}
}

func TestWriteReportKeepsTheRestOfTheFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "reliability.md")
	head, bugs := "# Reliability\n\nIntro.\n\n", "\n## Bugs found\n\n- one\n"
	section := func(s string) string { return reportBegin + "\n" + s + "\n" + reportEnd + "\n" }
	if err := os.WriteFile(path, []byte(head+section("old")+bugs), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := WriteReport(path, section("new")); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(path)
	if want := head + section("new") + bugs; string(b) != want {
		t.Fatalf("report is\n%s\nwant\n%s", b, want)
	}
	md := Markdown("cmd", 7, "machine", []RunReport{{Nemesis: "kill", Nodes: 3, Duration: time.Second,
		Results: []Result{{Workload: "set", Attempted: 10, Acknowledged: 9, Indeterminate: 1, LongestWriteGap: 1500 * time.Millisecond}}}})
	if !strings.Contains(md, "| kill | set | 10 | 9 | 1 | 0 | 0 | 1.5s | ok |") {
		t.Fatalf("markdown lacks the row:\n%s", md)
	}
}
