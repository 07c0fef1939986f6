package api_test

import (
	"bufio"
	"fmt"
	"net"
	"net/http"
	"strings"
	"testing"
)

// TestEveryAnswerIsCounted: a request answered by a route (of its own
// method, whose series the route keeps, twice with one status and once
// with another, or HEAD on a GET route), one that matches none, one whose
// target is not a valid URI (answered before routing) and one with a
// made-up method (counted as OTHER, so that such methods cannot grow
// /metrics) each count once in the request counter, under its route and
// status, and once in the latency histogram, under its route and status
// class.
func TestEveryAnswerIsCounted(t *testing.T) {
	if a := send(t, "PUT", "/_schemas/metricsdb", `{"partitions":1}`); a.status/100 != 2 {
		t.Fatalf("create database: %d %s", a.status, a.body)
	}
	// Methods no other test of the package sends to these paths.
	cases := []struct{ method, path, route, status string }{
		{"HEAD", "/healthz", "/healthz", "200"},
		{"GET", "/_schemas/metricsdb", "/_schemas/{db}", "200"},
		{"GET", "/_schemas/metricsdb", "/_schemas/{db}", "200"},
		{"GET", "/_schemas/nometricsdb", "/_schemas/{db}", "404"},
		{"DELETE", "/_nothing", "unmatched", "404"},
		{"PATCH", "/_schemas/x/%G1", "unmatched", "400"},
		{"BREW", "/_nothing", "unmatched", "404"},
	}
	for _, c := range cases {
		label := c.method
		if label == "BREW" {
			label = "OTHER"
		}
		requests := fmt.Sprintf(`doppio_http_requests_total{code=%q,method=%q,route=%q}`, c.status, label, c.route)
		latency := fmt.Sprintf(`doppio_http_request_duration_seconds_count{class=%q,method=%q,route=%q}`, c.status[:1]+"xx", label, c.route)
		r0, l0 := scrape(t, requests), scrape(t, latency)
		if got := sendAlone(t, c.method, c.path); fmt.Sprint(got) != c.status {
			t.Fatalf("%s %s: %d, want %s", c.method, c.path, got, c.status)
		}
		if got := scrape(t, requests) - r0; got != 1 {
			t.Errorf("%s %s: %s moved by %v, want 1", c.method, c.path, requests, got)
		}
		if got := scrape(t, latency) - l0; got != 1 {
			t.Errorf("%s %s: %s moved by %v, want 1", c.method, c.path, latency, got)
		}
	}
	if body := string(send(t, "GET", "/metrics", nil).body); strings.Contains(body, `method="BREW"`) {
		t.Error(`/metrics has a method="BREW" label`)
	}
}

// scrape returns the value of the sample line named exactly by sample in
// /metrics (0 if absent).
func scrape(t *testing.T, sample string) float64 {
	t.Helper()
	for _, line := range strings.Split(string(send(t, "GET", "/metrics", nil).body), "\n") {
		if v, ok := strings.CutPrefix(line, sample+" "); ok {
			var f float64
			if _, err := fmt.Sscan(v, &f); err != nil {
				t.Fatalf("%q: %v", line, err)
			}
			return f
		}
	}
	return 0
}

// sendAlone sends one request without a body on a connection of its own
// and returns the answer's status, so that nothing an earlier test left
// on the shared client's connections comes between.
func sendAlone(t *testing.T, method, path string) int {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := fmt.Fprintf(c, "%s %s HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", method, path); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), &http.Request{Method: method})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}
