// Package promtest runs the Prometheus server and promtool of the
// machine's packages for tests: Install finds them, installing Debian's
// prometheus package with apt-get when they are missing, and Start runs a
// server that scrapes given targets, with Query to ask it PromQL.
//
// In a test:
//
//	srv := promtest.Start(t, promtest.Config{Targets: []string{"127.0.0.1:8080"}})
//	v, err := srv.Query(ctx, `sum(doppio_replicas_leading)`)
//
// The first use on a machine without Prometheus needs root and Debian's
// archive (apt-get update, then apt-get install prometheus); a file lock
// under os.UserCacheDir() makes concurrent test processes install once.
package promtest

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/doppio-db/doppio/internal/testport"
)

// Tools are the paths of the Prometheus server and of promtool.
type Tools struct {
	Prometheus, Promtool string
}

// Install returns the Prometheus tools, installing Debian's prometheus
// package first when either is missing; it fails t when it cannot.
func Install(t testing.TB) Tools {
	t.Helper()
	if tools, ok := lookup(); ok {
		return tools
	}
	cache, err := os.UserCacheDir()
	if err != nil {
		t.Fatalf("promtest: no cache directory for the install lock: %v", err)
	}
	if err := os.MkdirAll(filepath.Join(cache, "doppio"), 0o755); err != nil {
		t.Fatal(err)
	}
	lock, err := os.OpenFile(filepath.Join(cache, "doppio", "prometheus-install.lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		t.Fatal(err)
	}
	defer syscall.Flock(int(lock.Fd()), syscall.LOCK_UN)
	if tools, ok := lookup(); ok { // installed by another process meanwhile
		return tools
	}
	for _, args := range [][]string{{"apt-get", "update"}, {"apt-get", "install", "-y", "--no-install-recommends", "prometheus"}} {
		cmd := exec.Command(args[0], args[1:]...)
		cmd.Env = append(os.Environ(), "DEBIAN_FRONTEND=noninteractive")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("promtest: %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	tools, ok := lookup()
	if !ok {
		t.Fatal("promtest: prometheus and promtool still not on PATH after installing Debian's prometheus package")
	}
	return tools
}

func lookup() (Tools, bool) {
	p, err1 := exec.LookPath("prometheus")
	pt, err2 := exec.LookPath("promtool")
	return Tools{Prometheus: p, Promtool: pt}, err1 == nil && err2 == nil
}

// Config is what a test server scrapes.
type Config struct {
	// Targets are the host:port addresses scraped at /metrics, as job
	// "doppio".
	Targets []string
	// Interval is the scrape and rule evaluation interval (default 1s).
	Interval time.Duration
	// RuleFiles are alerting or recording rule files the server loads.
	RuleFiles []string
}

// Server is a running Prometheus server.
type Server struct {
	// URL is its HTTP API's base, http://host:port.
	URL string
}

// Start runs a Prometheus server with its data in a temporary directory,
// waits until it is ready, and stops it when t ends.
func Start(t testing.TB, cfg Config) *Server {
	t.Helper()
	tools := Install(t)
	if cfg.Interval <= 0 {
		cfg.Interval = time.Second
	}
	dir := t.TempDir()
	targets, _ := json.Marshal(cfg.Targets)
	rules, _ := json.Marshal(cfg.RuleFiles)
	// JSON is YAML: the lists need no quoting of their own.
	conf := fmt.Sprintf("global:\n  scrape_interval: %s\n  evaluation_interval: %s\nrule_files: %s\nscrape_configs:\n  - job_name: doppio\n    static_configs:\n      - targets: %s\n",
		cfg.Interval, cfg.Interval, rules, targets)
	confPath := filepath.Join(dir, "prometheus.yml")
	if err := os.WriteFile(confPath, []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	addr, err := testport.Free("127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	logs, err := os.Create(filepath.Join(dir, "prometheus.log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(tools.Prometheus, "--config.file="+confPath, "--storage.tsdb.path="+filepath.Join(dir, "data"),
		"--web.listen-address="+addr, "--log.level=warn")
	cmd.Stdout, cmd.Stderr = logs, logs
	// Killed with the test process however that ends.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatalf("promtest: start prometheus: %v", err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-exited
		logs.Close()
	})
	s := &Server{URL: "http://" + addr}
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := http.Get(s.URL + "/-/ready")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return s
			}
		}
		select {
		case <-exited:
			out, _ := os.ReadFile(logs.Name())
			t.Fatalf("promtest: prometheus exited before it was ready:\n%s", out)
		default:
		}
		if time.Now().After(deadline) {
			out, _ := os.ReadFile(logs.Name())
			t.Fatalf("promtest: prometheus not ready within 30s:\n%s", out)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// Sample is one series of an instant query's answer.
type Sample struct {
	Labels map[string]string
	Value  float64
}

// Query runs expr as an instant query now. A scalar answer is one sample
// without labels.
func (s *Server) Query(ctx context.Context, expr string) ([]Sample, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.URL+"/api/v1/query?query="+url.QueryEscape(expr), nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var answer struct {
		Status string `json:"status"`
		Error  string `json:"error"`
		Data   struct {
			ResultType string          `json:"resultType"`
			Result     json.RawMessage `json:"result"`
		} `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&answer); err != nil {
		return nil, fmt.Errorf("query %q: %s: %w", expr, resp.Status, err)
	}
	if answer.Status != "success" {
		return nil, fmt.Errorf("query %q: %s", expr, answer.Error)
	}
	switch answer.Data.ResultType {
	case "scalar":
		var v [2]any
		if err := json.Unmarshal(answer.Data.Result, &v); err != nil {
			return nil, err
		}
		f, err := parseValue(v[1])
		return []Sample{{Value: f}}, err
	case "vector":
		var series []struct {
			Metric map[string]string `json:"metric"`
			Value  [2]any            `json:"value"`
		}
		if err := json.Unmarshal(answer.Data.Result, &series); err != nil {
			return nil, err
		}
		out := make([]Sample, 0, len(series))
		for _, sr := range series {
			f, err := parseValue(sr.Value[1])
			if err != nil {
				return nil, err
			}
			out = append(out, Sample{Labels: sr.Metric, Value: f})
		}
		return out, nil
	}
	return nil, fmt.Errorf("query %q: unexpected result type %q", expr, answer.Data.ResultType)
}

// parseValue reads a sample value, which the API sends as a string
// ("NaN" and "+Inf" included).
func parseValue(v any) (float64, error) {
	s, ok := v.(string)
	if !ok {
		return 0, fmt.Errorf("sample value %v is not a string", v)
	}
	return strconv.ParseFloat(s, 64)
}
