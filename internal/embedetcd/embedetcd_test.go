package embedetcd

import (
	"bufio"
	"context"
	"io"
	"log/slog"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

func testLogger(t *testing.T) *slog.Logger {
	return slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelWarn}))
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}

func start(t *testing.T, dir string) *Server {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := Start(ctx, dir, testLogger(t))
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	return s
}

func client(t *testing.T, s *Server) *clientv3.Client {
	t.Helper()
	cli, err := clientv3.New(clientv3.Config{Endpoints: s.Endpoints(), DialTimeout: 5 * time.Second})
	if err != nil {
		t.Fatalf("client: %v", err)
	}
	t.Cleanup(func() { cli.Close() })
	return cli
}

func put(t *testing.T, s *Server, k, v string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := client(t, s).Put(ctx, k, v); err != nil {
		t.Fatalf("put: %v", err)
	}
}

func get(t *testing.T, s *Server, k string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := client(t, s).Get(ctx, k)
	if err != nil {
		t.Fatalf("get: %v", err)
	}
	if len(resp.Kvs) == 0 {
		return ""
	}
	return string(resp.Kvs[0].Value)
}

func peerPort(t *testing.T, s *Server) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := client(t, s).MemberList(ctx)
	if err != nil {
		t.Fatalf("member list: %v", err)
	}
	if len(resp.Members) != 1 || len(resp.Members[0].PeerURLs) != 1 {
		t.Fatalf("members: %v", resp.Members)
	}
	u, _ := url.Parse(resp.Members[0].PeerURLs[0])
	return u.Port()
}

func TestRestartKeepsDataAndPorts(t *testing.T) {
	dir := t.TempDir()
	s := start(t, dir)
	eps := s.Endpoints()
	if len(eps) != 1 || !strings.HasPrefix(eps[0], "http://127.0.0.1:") {
		t.Fatalf("endpoints: %v", eps)
	}
	pp := peerPort(t, s)
	put(t, s, "k", "v1")
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	s = start(t, dir)
	defer s.Close()
	if got := s.Endpoints(); got[0] != eps[0] {
		t.Errorf("client endpoint changed across restart: %v -> %v", eps, got)
	}
	if got := peerPort(t, s); got != pp {
		t.Errorf("peer port changed across restart: %s -> %s", pp, got)
	}
	if got := get(t, s, "k"); got != "v1" {
		t.Fatalf("after restart k = %q, want v1", got)
	}
}

// TestRestartOnTakenPorts occupies both ports of the first start: the member
// must come back on new ports with its data and a membership naming the new
// peer URL.
func TestRestartOnTakenPorts(t *testing.T) {
	dir := t.TempDir()
	s := start(t, dir)
	eps := s.Endpoints()
	pp := peerPort(t, s)
	put(t, s, "k", "v1")
	s.Close()

	cu, _ := url.Parse(eps[0])
	for _, port := range []string{cu.Port(), pp} {
		l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", port))
		if err != nil {
			t.Fatalf("occupy %s: %v", port, err)
		}
		defer l.Close()
	}

	s = start(t, dir)
	if got := s.Endpoints(); got[0] == eps[0] {
		t.Fatalf("client endpoint %v reused although taken", got)
	}
	newPeer := peerPort(t, s)
	if newPeer == pp {
		t.Fatalf("membership still names the old peer port %s", pp)
	}
	if got := get(t, s, "k"); got != "v1" {
		t.Fatalf("after restart on new ports k = %q, want v1", got)
	}
	put(t, s, "k", "v2")
	eps2 := s.Endpoints()
	s.Close()

	// The new ports are remembered and reused next time.
	s = start(t, dir)
	defer s.Close()
	if got := s.Endpoints(); got[0] != eps2[0] {
		t.Errorf("endpoint %v not reused: %v", eps2, got)
	}
	if got := peerPort(t, s); got != newPeer {
		t.Errorf("peer port %s not reused: %s", newPeer, got)
	}
	if got := get(t, s, "k"); got != "v2" {
		t.Fatalf("k = %q, want v2", got)
	}
}

func TestSideBySide(t *testing.T) {
	a := start(t, t.TempDir())
	defer a.Close()
	b := start(t, t.TempDir())
	defer b.Close()
	if a.Endpoints()[0] == b.Endpoints()[0] {
		t.Fatalf("same endpoint %v", a.Endpoints())
	}
	put(t, a, "k", "a")
	put(t, b, "k", "b")
	if got := get(t, a, "k"); got != "a" {
		t.Errorf("a: k = %q", got)
	}
	if got := get(t, b, "k"); got != "b" {
		t.Errorf("b: k = %q", got)
	}
}

// helperEnv makes the test binary act as a child process that starts a
// server on the given dir, writes a key and waits to be killed.
const helperEnv = "DOPPIO_EMBEDETCD_HELPER_DIR"

func TestMain(m *testing.M) {
	if dir := os.Getenv(helperEnv); dir != "" {
		os.Exit(helperMain(dir))
	}
	os.Exit(m.Run())
}

func helperMain(dir string) int {
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := Start(ctx, dir, logger)
	if err != nil {
		logger.Error("start", "err", err)
		return 1
	}
	cli, err := clientv3.New(clientv3.Config{Endpoints: s.Endpoints(), DialTimeout: 5 * time.Second})
	if err != nil {
		logger.Error("client", "err", err)
		return 1
	}
	if _, err := cli.Put(ctx, "k", "before-kill"); err != nil {
		logger.Error("put", "err", err)
		return 1
	}
	os.Stdout.WriteString("ready " + s.Endpoints()[0] + "\n")
	select {} // wait for SIGKILL
}

func TestRestartAfterKill9(t *testing.T) {
	dir := t.TempDir()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe, "-test.run=^$")
	cmd.Env = append(os.Environ(), helperEnv+"="+dir)
	cmd.Stderr = testWriter{t}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil || !strings.HasPrefix(line, "ready ") {
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatalf("child: %q %v", line, err)
	}
	childEndpoint := strings.TrimSpace(strings.TrimPrefix(line, "ready "))
	if err := cmd.Process.Kill(); err != nil { // SIGKILL: no clean shutdown
		t.Fatal(err)
	}
	go io.Copy(io.Discard, out)
	cmd.Wait()

	if _, err := os.Stat(filepath.Join(dir, portsFile)); err != nil {
		t.Fatalf("ports file: %v", err)
	}
	s := start(t, dir)
	defer s.Close()
	if got := s.Endpoints()[0]; got != childEndpoint {
		t.Errorf("endpoint after kill -9: %s, want the child's %s", got, childEndpoint)
	}
	if got := get(t, s, "k"); got != "before-kill" {
		t.Fatalf("after kill -9 k = %q, want before-kill", got)
	}
}
