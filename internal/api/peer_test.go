package api

import (
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/doppio-db/doppio/internal/auth"
	"github.com/doppio-db/doppio/internal/partition"
	"github.com/doppio-db/doppio/internal/peer"
)

// probeServer is a Server whose listeners serve one probe route,
// GET /probe, that records the caller and the caller header its request
// carries, on real REST and peer listeners.
type probeServer struct {
	rest, peer string // base URLs

	mu     sync.Mutex
	caller auth.Caller
	had    bool
	header string
}

func startProbe(t *testing.T) *probeServer {
	t.Helper()
	ps := &probeServer{}
	s := New(Config{}, nil, nil, prometheus.NewRegistry(), slog.New(slog.DiscardHandler), nil)
	s.SetReady(true)
	probe := &route{method: "GET", pattern: "/probe", segs: []string{"probe"},
		handle: func(_ *Server, w http.ResponseWriter, r *http.Request, _ params) error {
			ps.mu.Lock()
			ps.caller, ps.had = auth.CallerFrom(r.Context())
			ps.header = r.Header.Get(peer.HeaderCaller)
			ps.mu.Unlock()
			w.WriteHeader(http.StatusNoContent)
			return nil
		}}
	s.rest, s.peer = newListener([]*route{probe}, false), newListener([]*route{probe}, true)
	serve := func(hs interface {
		Serve(net.Listener) error
		Close() error
	}) string {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		go func() { _ = hs.Serve(ln) }()
		t.Cleanup(func() { _ = hs.Close() })
		return "http://" + ln.Addr().String()
	}
	ps.rest, ps.peer = serve(s.HTTPServer()), serve(s.PeerHTTPServer())
	return ps
}

// get sends GET base/probe with the caller header values given.
func (ps *probeServer) get(t *testing.T, base string, callers ...string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, base+"/probe", nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range callers {
		req.Header.Add(peer.HeaderCaller, c)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func (ps *probeServer) seen() (auth.Caller, bool, string) {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	c, had, h := ps.caller, ps.had, ps.header
	ps.caller, ps.had, ps.header = auth.Caller{}, false, ""
	return c, had, h
}

func TestCallerHeaderCountsOnlyOnThePeerListener(t *testing.T) {
	ps := startProbe(t)

	// REST: the header is dropped unread; no caller is claimed by it.
	if st, b := ps.get(t, ps.rest, "root"); st != http.StatusNoContent {
		t.Fatalf("REST with %s: %d %s", peer.HeaderCaller, st, b)
	}
	if c, had, h := ps.seen(); had || h != "" {
		t.Errorf("REST handler saw caller %+v (set: %v) and header %q; want neither", c, had, h)
	}

	// Peer: the header names the user; without it the sender is a node.
	if st, b := ps.get(t, ps.peer, "alice"); st != http.StatusNoContent {
		t.Fatalf("peer with a caller: %d %s", st, b)
	}
	if c, had, _ := ps.seen(); !had || c != (auth.Caller{User: "alice"}) {
		t.Errorf("peer with %s: alice ran as %+v (set: %v)", peer.HeaderCaller, c, had)
	}
	if st, b := ps.get(t, ps.peer); st != http.StatusNoContent {
		t.Fatalf("peer without a caller: %d %s", st, b)
	}
	if c, had, _ := ps.seen(); !had || c != (auth.Caller{Node: true}) {
		t.Errorf("peer without %s ran as %+v (set: %v), want the node", peer.HeaderCaller, c, had)
	}

	// Peer: a header naming no valid user, or two, is refused and runs
	// nothing.
	for _, bad := range [][]string{{"node"}, {"a b"}, {"alice", "root"}} {
		st, b := ps.get(t, ps.peer, bad...)
		if st != http.StatusBadRequest || !strings.Contains(b, `"field":"`+peer.HeaderCaller+`"`) {
			t.Errorf("peer with %s %q: %d %s, want a 400 about the header", peer.HeaderCaller, bad, st, b)
		}
		if _, had, _ := ps.seen(); had {
			t.Errorf("peer with %s %q ran the handler", peer.HeaderCaller, bad)
		}
	}
}

func TestForwardsAndPagesCarryTheCallerAndNothingElse(t *testing.T) {
	var mu sync.Mutex
	var got []string
	leader := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		got = r.Header.Values(peer.HeaderCaller)
		mu.Unlock()
		if strings.HasPrefix(r.URL.Path, "/_internal/query/") {
			_, _ = io.WriteString(w, `{"keys":[],"count":0,"documents":[]}`)
			return
		}
		w.WriteHeader(http.StatusCreated)
	}))
	defer leader.Close()
	addr := strings.TrimPrefix(leader.URL, "http://")
	s := New(Config{NodeID: "n1"}, nil, nil, prometheus.NewRegistry(), slog.New(slog.DiscardHandler), nil)

	for _, tc := range []struct {
		name   string
		caller *auth.Caller
		want   []string
	}{
		{"a user's request", &auth.Caller{User: "bob"}, []string{"bob"}},
		{"a node's request", &auth.Caller{Node: true}, nil},
		{"an insecure request", &auth.Caller{}, nil},
		{"a request with no caller", nil, nil},
	} {
		r := httptest.NewRequest(http.MethodPut, "/db/T/k", nil)
		r.Header.Set(peer.HeaderCaller, "mallory") // as a client might send it
		if tc.caller != nil {
			r = r.WithContext(auth.WithCaller(r.Context(), *tc.caller))
		}
		w := &statusWriter{ResponseWriter: httptest.NewRecorder()}
		if err := s.forward(w, r, nil, addr, errors.New("test")); err != nil || w.status() != http.StatusCreated {
			t.Fatalf("%s: forward: %v, status %d", tc.name, err, w.status())
		}
		mu.Lock()
		if strings.Join(got, ",") != strings.Join(tc.want, ",") {
			t.Errorf("%s: forwarded with %s %q, want %q", tc.name, peer.HeaderCaller, got, tc.want)
		}
		got = nil
		mu.Unlock()

		// A query's page from another partition's leader is charged to the
		// same caller there.
		to := &partition.NotAppliedError{Reason: partition.Elsewhere, DB: "db", Partition: 1, Node: "n2", Peer: addr}
		if _, err := s.fetchPage(r, to, "T"); err != nil {
			t.Fatalf("%s: fetchPage: %v", tc.name, err)
		}
		mu.Lock()
		if strings.Join(got, ",") != strings.Join(tc.want, ",") {
			t.Errorf("%s: page asked with %s %q, want %q", tc.name, peer.HeaderCaller, got, tc.want)
		}
		mu.Unlock()
	}
}
