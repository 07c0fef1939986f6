// Package redistest runs real Redis servers for tests: a primary and
// its replicas from the machine's redis-server, on free ports, stopped
// when the test ends, with Kill and Restart to inject faults.
//
// In a test:
//
//	c := redistest.Start(t, 1)          // a primary and one replica
//	addrs := c.Addrs()                 // the primary first
//	c.Primary.Kill()                   // SIGKILL; Restart brings it back empty
//
// The first use on a machine without redis-server installs Debian's
// redis-server package with apt-get (as root), once across concurrent
// test processes, under an internal/cachefill lock. Programs that are not
// tests (the fault suite's command, the benchmarks) use Binary and Run.
package redistest

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/doppio-db/doppio/internal/cachefill"
	"github.com/doppio-db/doppio/internal/testport"
)

// Install returns the path of redis-server, installing Debian's
// redis-server package first when it is missing; it fails t when it
// cannot.
func Install(t testing.TB) string {
	t.Helper()
	path, err := Binary()
	if err != nil {
		t.Fatalf("redistest: %v", err)
	}
	return path
}

// Binary is Install for programs that are not tests (the fault suite's
// command, the benchmarks): it returns the error instead.
func Binary() (string, error) {
	cache, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("no cache directory for the install lock: %w", err)
	}
	found := func() bool { _, err := exec.LookPath("redis-server"); return err == nil }
	err = cachefill.Fill(filepath.Join(cache, "doppio", "redis-install.lock"), found, func() error {
		for _, args := range [][]string{{"apt-get", "update"}, {"apt-get", "install", "-y", "--no-install-recommends", "redis-server"}} {
			cmd := exec.Command(args[0], args[1:]...)
			cmd.Env = append(os.Environ(), "DEBIAN_FRONTEND=noninteractive")
			if out, err := cmd.CombinedOutput(); err != nil {
				return fmt.Errorf("%s: %v\n%s", strings.Join(args, " "), err, out)
			}
		}
		return nil
	})
	if err != nil {
		return "", fmt.Errorf("install redis-server: %w", err)
	}
	path, err := exec.LookPath("redis-server")
	if err != nil {
		return "", errors.New("redis-server still not on PATH after installing Debian's redis-server package")
	}
	return path, nil
}

// Cluster is a primary and its replicas.
type Cluster struct {
	Primary  *Server
	Replicas []*Server
}

// Addrs is every server's address, the primary first: the form
// --cache-redis takes.
func (c *Cluster) Addrs() []string {
	out := []string{c.Primary.Addr}
	for _, r := range c.Replicas {
		out = append(out, r.Addr)
	}
	return out
}

// Start runs a primary and n replicas of it, each without persistence,
// waits until the replicas have synchronised, and stops them all when t
// ends.
func Start(t testing.TB, n int) *Cluster {
	t.Helper()
	bin := Install(t)
	c := &Cluster{Primary: start(t, bin, "")}
	for range n {
		c.Replicas = append(c.Replicas, start(t, bin, c.Primary.Addr))
	}
	for _, r := range c.Replicas {
		r.waitSynced(t)
	}
	return c
}

// Server is one running redis-server.
type Server struct {
	// Addr is its host:port; it keeps it across Restart.
	Addr string

	bin, primary, dir string

	mu     sync.Mutex
	cmd    *exec.Cmd
	exited chan struct{}
}

func start(t testing.TB, bin, primary string) *Server {
	t.Helper()
	addr, err := testport.Free("127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	s, err := Run(bin, addr, t.TempDir(), primary)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Kill)
	return s
}

// Run starts redis-server bin without persistence, listening on addr
// (host:port) with its files under dir, a replica of primary unless that
// is "", and waits until it answers. The caller ends it with Kill; it
// dies with the calling process in any case.
func Run(bin, addr, dir, primary string) (*Server, error) {
	s := &Server{Addr: addr, bin: bin, primary: primary, dir: dir}
	if err := s.run(); err != nil {
		return nil, err
	}
	return s, nil
}

func (s *Server) run() error {
	host, port, _ := net.SplitHostPort(s.Addr)
	args := []string{"--port", port, "--bind", host, "--save", "", "--appendonly", "no",
		"--dir", s.dir, "--protected-mode", "no", "--logfile", filepath.Join(s.dir, "redis.log")}
	if s.primary != "" {
		host, pport, _ := net.SplitHostPort(s.primary)
		args = append(args, "--replicaof", host, pport, "--repl-diskless-load", "swapdb")
	}
	cmd := exec.Command(s.bin, args...)
	// Killed with the test process however that ends.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("redistest: start redis-server: %w", err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	s.mu.Lock()
	s.cmd, s.exited = cmd, exited
	s.mu.Unlock()
	deadline := time.Now().Add(15 * time.Second)
	for {
		if reply, err := s.Do("PING"); err == nil && reply == "PONG" {
			return nil
		}
		select {
		case <-exited:
			log, _ := os.ReadFile(filepath.Join(s.dir, "redis.log"))
			return fmt.Errorf("redistest: redis-server on %s exited before it answered:\n%s", s.Addr, log)
		default:
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("redistest: redis-server on %s did not answer within 15s", s.Addr)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Kill ends the server with SIGKILL and waits until it is gone; its data
// is lost (no persistence). Killing a killed server does nothing.
func (s *Server) Kill() {
	s.mu.Lock()
	cmd, exited := s.cmd, s.exited
	s.cmd = nil
	s.mu.Unlock()
	if cmd == nil {
		return
	}
	_ = cmd.Process.Kill()
	<-exited
}

// Restart starts a killed server again on its address, empty; a replica
// synchronises from its primary again.
func (s *Server) Restart(t testing.TB) {
	t.Helper()
	s.Kill()
	if err := s.run(); err != nil {
		t.Fatal(err)
	}
	if s.primary != "" {
		s.waitSynced(t)
	}
}

// waitSynced waits until a replica's link to its primary is up.
func (s *Server) waitSynced(t testing.TB) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		info, err := s.Do("INFO", "replication")
		if err == nil && strings.Contains(info, "master_link_status:up") {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("redistest: replica %s not synchronised with %s within 15s: %v %s", s.Addr, s.primary, err, info)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Do sends one command and returns its reply as text: a status, an
// integer, or a bulk string ("" for nil); an error reply is an error.
// It speaks RESP itself so that tests can poke a server without a
// client library.
func (s *Server) Do(args ...string) (string, error) {
	conn, err := net.DialTimeout("tcp", s.Addr, time.Second)
	if err != nil {
		return "", err
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(5 * time.Second))
	var b strings.Builder
	fmt.Fprintf(&b, "*%d\r\n", len(args))
	for _, a := range args {
		fmt.Fprintf(&b, "$%d\r\n%s\r\n", len(a), a)
	}
	if _, err := conn.Write([]byte(b.String())); err != nil {
		return "", err
	}
	r := bufio.NewReader(conn)
	line, err := r.ReadString('\n')
	if err != nil {
		return "", err
	}
	line = strings.TrimSuffix(line, "\r\n")
	if line == "" {
		return "", fmt.Errorf("redistest: empty reply")
	}
	switch line[0] {
	case '+', ':':
		return line[1:], nil
	case '-':
		return "", fmt.Errorf("redis: %s", line[1:])
	case '$':
		n, err := strconv.Atoi(line[1:])
		if err != nil || n < 0 {
			return "", err
		}
		buf := make([]byte, n+2)
		if _, err := io.ReadFull(r, buf); err != nil {
			return "", err
		}
		return string(buf[:n]), nil
	}
	return "", fmt.Errorf("redistest: reply %q not understood", line)
}
