package e2e

import (
	"bufio"
	"encoding/json"
	"io"
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
	"testing"
	"time"
)

// outputProc is a process whose stdout and stderr are read into one
// buffer as they come.
type outputProc struct {
	cmd  *exec.Cmd
	mu   sync.Mutex
	out  strings.Builder
	done chan struct{}
	err  error
}

func startProc(t *testing.T, env []string, name string, args ...string) *outputProc {
	t.Helper()
	p := &outputProc{cmd: exec.Command(name, args...), done: make(chan struct{})}
	p.cmd.Env = append(os.Environ(), env...)
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	p.cmd.Stdout, p.cmd.Stderr = w, w
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	w.Close()
	go func() {
		sc := bufio.NewScanner(r)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			p.mu.Lock()
			p.out.WriteString(sc.Text() + "\n")
			p.mu.Unlock()
		}
		p.err = p.cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(func() {
		_ = p.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-p.done:
		case <-time.After(20 * time.Second):
			_ = p.cmd.Process.Kill()
			<-p.done
		}
	})
	return p
}

func (p *outputProc) output() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.out.String()
}

// await waits until the output matches re and returns the submatches.
func (p *outputProc) await(t *testing.T, d time.Duration, re string) []string {
	t.Helper()
	rx := regexp.MustCompile(re)
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		if m := rx.FindStringSubmatch(p.output()); m != nil {
			return m
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("no %q within %s in:\n%s", re, d, p.output())
	return nil
}

// exited waits for the process to end and returns its exit code.
func (p *outputProc) exited(t *testing.T, d time.Duration) int {
	t.Helper()
	select {
	case <-p.done:
	case <-time.After(d):
		t.Fatalf("still running after %s:\n%s", d, p.output())
	}
	if ee, ok := p.err.(*exec.ExitError); ok {
		return ee.ExitCode()
	}
	return 0
}

// gone reports whether no process (not even a zombie) has the pid.
func gone(pid int) bool {
	_, err := os.Stat(filepath.Join("/proc", strconv.Itoa(pid)))
	return os.IsNotExist(err)
}

// TestDevClusterFailsWholeWhenItsPortIsTaken: `doppio dev --nodes 3` on
// a taken --http port ends at once, non-zero, naming the port, and
// starts nothing.
func TestDevClusterFailsWholeWhenItsPortIsTaken(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	p := startProc(t, nil, binary, "dev", "--nodes", "3", "--data", t.TempDir(), "--http", l.Addr().String())
	if code := p.exited(t, 10*time.Second); code == 0 {
		t.Fatalf("exit 0:\n%s", p.output())
	}
	if out := p.output(); !strings.Contains(out, "--http "+l.Addr().String()+" is taken") || strings.Contains(out, "node n1") {
		t.Errorf("output does not name the taken port, or started nodes:\n%s", out)
	}
}

// TestDevClusterStopsEveryNodeWhenOneCannotStart: nodes that fail while
// the cluster starts (here all, by a bad node flag) end the command
// non-zero with the failing node's own words, and no node process stays.
func TestDevClusterStopsEveryNodeWhenOneCannotStart(t *testing.T) {
	p := startProc(t, nil, binary, "dev", "--nodes", "2", "--data", t.TempDir(), "--http", "127.0.0.1:0", "--placement-mode", "bogus")
	if code := p.exited(t, 60*time.Second); code == 0 {
		t.Fatalf("exit 0:\n%s", p.output())
	}
	out := p.output()
	if !regexp.MustCompile(`node n\d exited while the cluster started .*every node was stopped.*placement mode "bogus"`).MatchString(out) {
		t.Errorf("no clear failure:\n%s", out)
	}
	for _, m := range regexp.MustCompile(`\(pid (\d+)\)`).FindAllStringSubmatch(out, -1) {
		pid, _ := strconv.Atoi(m[1])
		if !gone(pid) {
			t.Errorf("node pid %d still exists after doppio dev ended", pid)
		}
	}
}

// TestDevClusterReportsReapsAndRestartsADeadNode: a dev cluster run as
// `go run` runs it (from a go-build directory that vanishes) keeps its
// restart commands working from DATA/bin; a killed node is reported,
// reaped (no zombie) and, with --restart-on-exit, started again.
func TestDevClusterReportsReapsAndRestartsADeadNode(t *testing.T) {
	data := t.TempDir()
	goBuild := filepath.Join(t.TempDir(), "go-build1234", "exe")
	if err := os.MkdirAll(goBuild, 0o755); err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(binary)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(goBuild, "doppio"), raw, 0o755); err != nil {
		t.Fatal(err)
	}
	p := startProc(t, nil, filepath.Join(goBuild, "doppio"), "dev", "--nodes", "2", "--data", data, "--http", "127.0.0.1:0", "--restart-on-exit")
	p.await(t, 90*time.Second, `all 2 nodes ready`)
	if err := os.RemoveAll(filepath.Dir(goBuild)); err != nil { // as go run does when it exits
		t.Fatal(err)
	}
	m := p.await(t, time.Second, `node n2: http://\S+  \(pid (\d+)\)\n  restart: (\S+) start --id n2`)
	if want := filepath.Join(data, "bin", "doppio"); m[2] != want {
		t.Errorf("restart command runs %s, want %s", m[2], want)
	}
	if out, err := exec.Command(m[2], "version").CombinedOutput(); err != nil || !strings.HasPrefix(string(out), "doppio ") {
		t.Errorf("the restart command's binary: %v %s", err, out)
	}
	pid, _ := strconv.Atoi(m[1])
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	p.await(t, 10*time.Second, `node n2 exited \(signal: killed\); restarting it`)
	deadline := time.Now().Add(5 * time.Second)
	for !gone(pid) && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	if !gone(pid) {
		st, _ := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
		t.Errorf("killed node %d not reaped: %s", pid, st)
	}
	p.await(t, 10*time.Second, `node n2 restarted \(pid \d+\)`)
	p.await(t, 60*time.Second, `(?s)node n2 restarted.*\[n2\] .*doppio node ready`)
}

// TestRouterWithoutEtcdSaysSoAndExits: a router whose etcd does not
// answer fails within seconds naming the endpoint.
func TestRouterWithoutEtcdSaysSoAndExits(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := "http://" + l.Addr().String()
	l.Close()
	start := time.Now()
	p := startProc(t, nil, binary, "router", "--etcd", dead, "--http", "127.0.0.1:0")
	if code := p.exited(t, 15*time.Second); code == 0 {
		t.Fatalf("exit 0:\n%s", p.output())
	}
	if took := time.Since(start); took > 10*time.Second {
		t.Errorf("took %s to give up", took)
	}
	if out := p.output(); !strings.Contains(out, "cannot reach etcd at "+dead) {
		t.Errorf("output does not name the endpoint:\n%s", out)
	}
}

// TestNodeTakesConfigFromFileAndEnvironmentAndReportsItsVersion: a dev
// node configured by a --config file (its address) and a DOPPIO_*
// variable (JSON logs) serves there, logs JSON, and reports the binary's
// version in /metrics, /_cluster and doppio cluster status.
func TestNodeTakesConfigFromFileAndEnvironmentAndReportsItsVersion(t *testing.T) {
	out, err := exec.Command(binary, "version", "--json").Output()
	if err != nil {
		t.Fatal(err)
	}
	var info struct{ Version, GoVersion string }
	if err := json.Unmarshal(out, &info); err != nil || info.Version == "" || info.GoVersion == "" {
		t.Fatalf("version --json: %s, %v", out, err)
	}
	addr := freePort(t)
	config := filepath.Join(t.TempDir(), "doppio.yaml")
	if err := os.WriteFile(config, []byte("http: "+addr+"\ndata: "+t.TempDir()+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	p := startProc(t, []string{"DOPPIO_LOG_FORMAT=json"}, binary, "dev", "--config", config)
	p.await(t, 60*time.Second, `"msg":"doppio node ready".*"http":"`+regexp.QuoteMeta(addr)+`"`)
	for _, line := range strings.Split(strings.TrimSpace(p.output()), "\n") {
		if !json.Valid([]byte(line)) {
			t.Errorf("a log line is not JSON: %s", line)
		}
	}
	url := "http://" + addr
	get := func(path string) string {
		resp, err := http.Get(url + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return string(b)
	}
	if m := get("/metrics"); !regexp.MustCompile(`(?m)^doppio_build_info\{.*version="` + regexp.QuoteMeta(info.Version) + `"\} 1$`).MatchString(m) {
		t.Errorf("/metrics has no doppio_build_info for %s", info.Version)
	}
	var cluster struct {
		Nodes         []struct{ ID, Version string }
		MixedVersions bool
	}
	if err := json.Unmarshal([]byte(get("/_cluster")), &cluster); err != nil || len(cluster.Nodes) != 1 || cluster.Nodes[0].Version != info.Version || cluster.MixedVersions {
		t.Errorf("/_cluster: %+v, %v; want one node at %s, not mixed", cluster, err, info.Version)
	}
	status, err := exec.Command(binary, "cluster", "status", "--server", url).CombinedOutput()
	if err != nil || !regexp.MustCompile(`(?m)^NODE\s+STATE\s+INTENT\s+ZONE\s+VERSION`).Match(status) || !regexp.MustCompile(`(?m)^dev\s+alive\s+active\s+-\s+`+regexp.QuoteMeta(info.Version)+`\s`).Match(status) {
		t.Errorf("cluster status: %v\n%s", err, status)
	}
}
