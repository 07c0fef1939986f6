package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
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
)

var binary string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "doppio-e2e")
	if err != nil {
		panic(err)
	}
	binary = filepath.Join(dir, "doppio")
	if mode, err = modeFromEnv(dir); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	build := exec.Command("go", "build", "-o", binary, "../cmd/doppio")
	build.Stdout, build.Stderr = os.Stdout, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "build doppio:", err)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// devNode is one `doppio dev` process.
type devNode struct {
	t    testing.TB
	cmd  *exec.Cmd
	addr string
	data string
	logs *bytes.Buffer
	// eof is closed once the process's stderr reached its end (nodes
	// started by runNode): logs is then complete and safe to read.
	eof chan struct{}
	// logMu guards logs while the process runs (nodes started by runNode).
	logMu *sync.Mutex
}

// tail returns the last k lines of the node's log so far (runNode's nodes).
func (n *devNode) tail(k int) string {
	if n.logMu == nil {
		return ""
	}
	n.logMu.Lock()
	defer n.logMu.Unlock()
	lines := strings.Split(strings.TrimRight(n.logs.String(), "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-k):], "\n")
}

var readyLine = regexp.MustCompile(`doppio node ready.* http=(\S+)`)

// startDev starts `doppio dev` on data and waits until it is ready.
func startDev(t testing.TB, data string) *devNode {
	t.Helper()
	cmd := exec.Command(binary, mode.args([]string{"dev", "--data", data, "--http", "127.0.0.1:0"})...)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	n := &devNode{t: t, cmd: cmd, data: data, logs: &bytes.Buffer{}}
	found := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		sent := false
		for sc.Scan() {
			line := sc.Text()
			n.logs.WriteString(line + "\n")
			if m := readyLine.FindStringSubmatch(line); m != nil && !sent {
				found <- m[1]
				sent = true
			}
		}
		if !sent {
			close(found)
		}
	}()
	select {
	case addr, ok := <-found:
		if !ok {
			t.Fatalf("doppio dev exited before it was ready")
		}
		n.addr = mode.url(addr)
	case <-time.After(30 * time.Second):
		cmd.Process.Kill()
		t.Fatalf("doppio dev not ready after 30s")
	}
	t.Cleanup(func() { n.kill() })
	return n
}

// kill sends SIGKILL and reaps the process.
func (n *devNode) kill() {
	if n.cmd.ProcessState != nil {
		return
	}
	_ = n.cmd.Process.Signal(syscall.SIGKILL)
	_ = n.cmd.Wait()
}

// do sends a JSON request and returns the status, headers and body.
func (n *devNode) do(method, path string, body any, headers ...string) (int, http.Header, []byte) {
	n.t.Helper()
	status, h, b, err := n.try(context.Background(), method, path, body, headers...)
	if err != nil {
		n.t.Fatalf("%s %s: %v", method, path, err)
	}
	return status, h, b
}

func (n *devNode) try(ctx context.Context, method, path string, body any, headers ...string) (int, http.Header, []byte, error) {
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = strings.NewReader(b)
	default:
		js, err := json.Marshal(b)
		if err != nil {
			return 0, nil, nil, err
		}
		rd = bytes.NewReader(js)
	}
	req, err := http.NewRequestWithContext(ctx, method, n.addr+path, rd)
	if err != nil {
		return 0, nil, nil, err
	}
	if rd != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := mode.http.Do(req)
	if err != nil {
		return 0, nil, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, b, err
}

// must asserts a status.
func (n *devNode) must(want int, method, path string, body any, headers ...string) []byte {
	n.t.Helper()
	got, _, b := n.do(method, path, body, headers...)
	if got != want {
		n.t.Fatalf("%s %s: status %d, want %d: %s", method, path, got, want, b)
	}
	return b
}

const counterSchema = `{"key":[{"name":"group","type":"string"},{"name":"id","type":"long"}],
 "schema":{"type":"record","name":"Counter","fields":[{"name":"n","type":"long","default":0},{"name":"writer","type":"string","default":""}]}}`

func setupCounters(t testing.TB, n *devNode) {
	n.must(201, "PUT", "/_schemas/e2e", map[string]any{"partitions": 8, "replicas": 1})
	n.must(201, "PUT", "/_schemas/e2e/Counter", counterSchema)
}
