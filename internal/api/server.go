// Package api serves Doppio's REST interface: it parses and validates
// requests, resolves schemas from the catalog, sends operations to the
// partition replica the registry (internal/replicas) names and renders
// answers, every error as an RFC 9457 problem+json document.
package api

import (
	"bytes"
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/doppio-db/doppio/internal/audit"
	"github.com/doppio-db/doppio/internal/auth"
	"github.com/doppio-db/doppio/internal/bulkload"
	"github.com/doppio-db/doppio/internal/cache/tier"
	"github.com/doppio-db/doppio/internal/catalog"
	"github.com/doppio-db/doppio/internal/datastream"
	"github.com/doppio-db/doppio/internal/derived"
	"github.com/doppio-db/doppio/internal/http1"
	"github.com/doppio-db/doppio/internal/partition"
	"github.com/doppio-db/doppio/internal/peer"
	"github.com/doppio-db/doppio/internal/problem"
	"github.com/doppio-db/doppio/internal/quota"
	"github.com/doppio-db/doppio/internal/replicas"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// OpenAPI is the OpenAPI 3.1 document of this interface.
//
//go:embed openapi.yaml
var OpenAPI []byte

// Config sets the server's limits.
type Config struct {
	// MaxDocumentBytes bounds a document's JSON body and its Avro form
	// (default 1 MiB).
	MaxDocumentBytes int
	// MaxRequestBytes bounds a transaction or batch body (default 16 MiB).
	MaxRequestBytes int
	// MaxOps bounds the operations of a transaction or batch (default 1000).
	MaxOps int
	// NodeID names this node in X-Doppio-Forwarded-By.
	NodeID string
	// RequestTimeout bounds how long a request may wait for a leader or a
	// quorum before it is answered 503 (default 5 s; X-Doppio-Timeout
	// shortens it per request).
	RequestTimeout time.Duration
	// IdempotencyRetention is how long the outcome of a request with an
	// Idempotency-Key is remembered (default 24 h).
	IdempotencyRetention time.Duration
	// DialPeerTLS, when set, makes the requests this server sends to
	// other nodes' peer listeners (forwards, relays, query pages, change
	// streams) speak https over the connections it dials: secure mode,
	// where it presents the node certificate (certs.Loader.DialTLS).
	DialPeerTLS func(ctx context.Context, network, addr string) (net.Conn, error)
	// Authenticate makes every route but the public ones require an
	// authenticated caller holding the route's privilege (see
	// AttachAuth; until it is attached they answer 503). Off, every
	// request may do everything (insecure mode).
	Authenticate bool
	// Knobs change the server's behaviour for tests.
	Knobs Knobs
}

// Knobs change a server's behaviour for tests; the zero value changes
// nothing.
type Knobs struct {
	// Caller, when set, names the caller of each request it reports one
	// for, in place of an authentication the test does not run.
	Caller func(*http.Request) (auth.Caller, bool)
}

func (c Config) withDefaults() Config {
	if c.MaxDocumentBytes <= 0 {
		c.MaxDocumentBytes = 1 << 20
	}
	if c.MaxRequestBytes <= 0 {
		c.MaxRequestBytes = 16 << 20
	}
	if c.MaxOps <= 0 {
		c.MaxOps = 1000
	}
	if c.RequestTimeout <= 0 {
		c.RequestTimeout = 5 * time.Second
	}
	if c.IdempotencyRetention <= 0 {
		c.IdempotencyRetention = DefaultIdempotencyRetention
	}
	return c
}

// Server is the REST handler of one node.
type Server struct {
	cfg      Config
	catalog  *catalog.Catalog
	registry *replicas.Registry
	streams  *datastream.Manager
	loads    *bulkload.Manager
	derived  *derived.Manager
	quotas   *quota.Store // nil: nothing is limited
	log      *slog.Logger
	// rest and peer are what the REST and the peer listener serve.
	rest, peer *listener
	ready      atomic.Bool
	// draining: the node is stopping; every answer closes its connection.
	draining atomic.Bool
	// streamsEnd ends every streaming answer (change streams) when the
	// node stops (EndStreams): their clients resume elsewhere from their
	// checkpoints, and the HTTP server's shutdown need not wait for them.
	streamsEnd context.Context
	endStreams context.CancelFunc

	requests *prometheus.CounterVec
	latency  *prometheus.HistogramVec
	scrape   http.Handler

	clusterInfo Cluster
	transfers   *transfers   // partition backups and restores running here
	peers       *peer.Client // forwarding to other nodes
	relay       func() []Peer

	auth     atomic.Pointer[auth.Authenticator]
	auditLog atomic.Pointer[audit.Log]

	// early remembers leaders' over-quota refusals (RefuseEarly); nil
	// until quotas are loaded.
	early        atomic.Pointer[earlyRefusals]
	earlyRefused prometheus.Counter

	// tier, when set, may answer staleness-bounded reads of one document
	// (cached.go).
	tier *tier.Tier
}

// New returns a server over catalog and router; registry receives the
// server's metrics and is what /metrics exposes. cluster, when set,
// answers /_cluster.
func New(cfg Config, cat *catalog.Catalog, rt *replicas.Registry, registry *prometheus.Registry, log *slog.Logger, cluster Cluster) *Server {
	s := &Server{
		cfg: cfg.withDefaults(), catalog: cat, registry: rt, log: log,
		clusterInfo: cluster, peers: peer.NewClient(cfg.DialPeerTLS),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "doppio_http_requests_total", Help: "HTTP requests by route, method and status.",
		}, []string{"route", "method", "code"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "doppio_http_request_duration_seconds", Help: "HTTP request latency by route template, method and status class (2xx, 4xx, 5xx...).",
			Buckets: prometheus.ExponentialBuckets(0.0001, 2, 16),
		}, []string{"route", "method", "class"}),
		earlyRefused: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "doppio_quota_early_refusals_total",
			Help: "Requests this node refused as over quota without forwarding them, because their leader had just refused the same caller's same requests.",
		}),
	}
	rs := routes()
	s.rest, s.peer = newListener(rs, false), newListener(rs, true)
	registry.MustRegister(s.requests, s.latency, s.earlyRefused)
	s.transfers = newTransfers(registry)
	s.scrape = promhttp.HandlerFor(registry, promhttp.HandlerOpts{})
	s.streamsEnd, s.endStreams = context.WithCancel(context.Background())
	return s
}

// Attach gives the server the catalog and router once they are open; call
// it before SetReady(true).
func (s *Server) Attach(cat *catalog.Catalog, rt *replicas.Registry) {
	s.catalog, s.registry = cat, rt
}

// SetReady marks the node able (or not) to serve; /readyz follows it.
func (s *Server) SetReady(v bool) { s.ready.Store(v) }

// Drain makes every answer from now on close its connection
// ("Connection: close"), so that a stopping node's clients leave its
// keep-alive connections after an answer, not by finding them closed with
// a request under way (which, for a write, they could not safely resend).
func (s *Server) Drain() { s.draining.Store(true) }

// EndStreams ends every streaming answer under way and any that begins
// later.
func (s *Server) EndStreams() { s.endStreams() }

// ServeHTTP serves a request of the REST listener: the public routes
// only, and peer.HeaderCaller is dropped unread, so no client can claim a
// caller by header.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	r.Header.Del(peer.HeaderCaller)
	r.Header.Del(headerIdempotencyOp)
	s.serveOn(s.rest, w, r)
}

// PeerHandler serves the requests of the peer listener: every route, the
// node-only ones included, each run as the caller peer.CallerOf finds
// (the user a forwarding node names, or else the sending node itself).
func (s *Server) PeerHandler() http.Handler { return peerHandler{s} }

type peerHandler struct{ s *Server }

func (h peerHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	c, err := peer.CallerOf(r.Header)
	if err != nil {
		h.s.failUnrouted(w, r, problem.Field(problem.Malformed, peer.HeaderCaller, "%v", err))
		return
	}
	h.s.serveOn(h.s.peer, w, r.WithContext(auth.WithCaller(r.Context(), c)))
}

// serveOn routes a request among what l serves and renders its outcome.
func (s *Server) serveOn(l *listener, w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	sw := &statusWriter{ResponseWriter: w}
	if s.cfg.Knobs.Caller != nil {
		if c, ok := s.cfg.Knobs.Caller(r); ok {
			r = r.WithContext(auth.WithCaller(r.Context(), c))
		}
	}
	if s.draining.Load() {
		w.Header().Set("Connection", "close")
	}
	method := r.Method
	if method == http.MethodHead {
		method = http.MethodGet // net/http drops the body of a HEAD answer
	}
	rt, p, err := l.match(method, r.URL.EscapedPath())
	pattern := "unmatched"
	if err == nil {
		pattern = rt.pattern
		if rt.pattern != "/healthz" && rt.pattern != "/readyz" && rt.pattern != "/metrics" && !s.ready.Load() {
			err = &partition.NotAppliedError{Reason: partition.RefusedThere, Detail: "node is starting"}
		} else if r, err = s.authorize(rt, r, p); err == nil {
			var cancel context.CancelFunc
			if rt.stream {
				ctx, c := context.WithCancel(r.Context())
				stop := context.AfterFunc(s.streamsEnd, c)
				cancel = func() { stop(); c() }
				r = r.WithContext(ctx)
			} else {
				r, cancel, err = s.withDeadline(r)
			}
			if err == nil {
				err = s.serve(rt, sw, r, p)
			}
			cancel()
		}
	}
	if err != nil {
		s.fail(l, sw, r, err)
	}
	if rt != nil && rt.audit != "" {
		s.auditRequest(rt, r, sw.status(), err)
	}
	s.record(rt, pattern, r.Method, sw.status(), start)
}

// failUnrouted answers a request refused before routing.
func (s *Server) failUnrouted(w http.ResponseWriter, r *http.Request, err error) {
	start := time.Now()
	sw := &statusWriter{ResponseWriter: w}
	s.fail(s.peer, sw, r, err)
	s.record(nil, "unmatched", r.Method, sw.status(), start)
}

// routeSeries caches a route's metric series for requests of its own
// method: WithLabelValues hashes its labels on every call, and formatting
// the status allocated, on every request.
type routeSeries struct {
	latency sync.Map // status class -> prometheus.Observer
	codes   sync.Map // status -> prometheus.Counter
}

// record counts a request and its latency under its route (pattern),
// method and status; rt is the matched route, or nil.
func (s *Server) record(rt *route, pattern, method string, status int, start time.Time) {
	d := time.Since(start).Seconds()
	if rt == nil || method != rt.method {
		s.requests.WithLabelValues(pattern, methodLabel(method), strconv.Itoa(status)).Inc()
		s.latency.WithLabelValues(pattern, methodLabel(method), statusClass(status)).Observe(d)
		return
	}
	rs := &rt.series
	o, ok := rs.latency.Load(status / 100)
	if !ok {
		o, _ = rs.latency.LoadOrStore(status/100, s.latency.WithLabelValues(rt.pattern, rt.method, statusClass(status)))
	}
	o.(prometheus.Observer).Observe(d)
	c, ok := rs.codes.Load(status)
	if !ok {
		c, _ = rs.codes.LoadOrStore(status, s.requests.WithLabelValues(rt.pattern, rt.method, strconv.Itoa(status)))
	}
	c.(prometheus.Counter).Inc()
}

// HTTPServer returns the server for the REST listener: plain requests
// are served by internal/http1; the streaming routes, and anything http1
// leaves to it, by net/http.
func (s *Server) HTTPServer() *http1.Server {
	hs := http1.New(s, s.log)
	hs.BadRequest, hs.FallbackFor = s.badRequest, s.rest.streaming
	return hs
}

// PeerHTTPServer returns the server for the peer listener (see
// peer.Mux.HTTP), on the same internal/http1 path as HTTPServer, so a
// forwarded request costs the node it reaches what a client's would.
func (s *Server) PeerHTTPServer() *http1.Server {
	hs := http1.New(s.PeerHandler(), s.log)
	hs.BadRequest, hs.FallbackFor = s.badRequest, s.peer.streaming
	return hs
}

// methodLabel is the method as a metric label: one of HTTP's, or OTHER,
// so that requests with made-up methods (net/http accepts any token)
// cannot grow /metrics without bound.
func methodLabel(m string) string {
	switch m {
	case http.MethodGet, http.MethodHead, http.MethodPut, http.MethodPost, http.MethodPatch,
		http.MethodDelete, http.MethodOptions, http.MethodConnect, http.MethodTrace:
		return m
	}
	return "OTHER"
}

// refusals maps the statuses internal/http1 refuses requests with to
// their problem kinds.
var refusals = map[int]problem.Kind{
	http.StatusBadRequest:                  problem.Malformed,
	http.StatusExpectationFailed:           problem.ExpectationFailed,
	http.StatusRequestHeaderFieldsTooLarge: problem.HeaderTooLarge,
	http.StatusNotImplemented:              problem.NotImplemented,
	http.StatusHTTPVersionNotSupported:     problem.VersionNotSupported,
}

// badRequest answers a request internal/http1 refuses before routing (a
// target that is not a valid URI, a malformed request line or header, an
// unsupported transfer coding or version, a header too long): as
// problem+json like every refusal, about the target as sent (r.URL.Path).
func (s *Server) badRequest(w http.ResponseWriter, r *http.Request, status int, detail string) {
	start := time.Now()
	kind, ok := refusals[status]
	if !ok {
		kind = problem.Malformed
	}
	sw := &statusWriter{ResponseWriter: w}
	writeProblem(sw, problemFor(problem.New(kind, "%s", detail), r.URL.Path), 0, 0, "", false)
	s.requests.WithLabelValues("unmatched", methodLabel(r.Method), strconv.Itoa(sw.status())).Inc()
	s.latency.WithLabelValues("unmatched", methodLabel(r.Method), statusClass(sw.status())).Observe(time.Since(start).Seconds())
}

// statusClass is a status as a latency label: its class ("2xx", "4xx"),
// so that a route's fast refusals and slow failures do not blur its
// successes, without a series per status.
func statusClass(status int) string {
	if status < 100 || status > 599 {
		return "other"
	}
	return strconv.Itoa(status/100) + "xx"
}

// call runs a handler, turning a panic into a 500 so no input can take the
// node down. A write that raced with a schema change (the partition built
// indexes for a newer table version than the request resolved) is run
// again from the start, body included.
//
// It returns the body it read, so that a request for a partition led
// elsewhere can be forwarded whole.
func (s *Server) call(rt *route, w *statusWriter, r *http.Request, p params) (body []byte, err error) {
	defer func() {
		if v := recover(); v != nil {
			s.log.Error("handler panic", "route", rt.pattern, "panic", v)
			err = errors.New("internal error")
		}
	}()
	if r.Method == http.MethodGet || r.Method == http.MethodHead || r.Body == nil {
		return nil, rt.handle(s, w, r, p)
	}
	body, err = readLimited(r, int64(s.cfg.MaxRequestBytes))
	if err != nil {
		return nil, err
	}
	for attempt := 0; ; attempt++ {
		r.Body = io.NopCloser(bytes.NewReader(body))
		err = rt.handle(s, w, r, p)
		if err != partition.ErrSchemaChanged || w.wrote || attempt == 2 {
			return body, err
		}
	}
}

type problemBody struct {
	Type       string `json:"type"`
	Title      string `json:"title"`
	Status     int    `json:"status"`
	Detail     string `json:"detail"`
	Instance   string `json:"instance,omitempty"`
	Field      string `json:"field,omitempty"`
	Operation  *int   `json:"operation,omitempty"`
	RetryAfter int    `json:"retryAfter,omitempty"`
}

func (s *Server) fail(l *listener, w *statusWriter, r *http.Request, err error) {
	if w.wrote {
		return // the answer has begun; nothing more can be said
	}
	var mbe *http.MaxBytesError
	if errors.As(err, &mbe) {
		err = problem.New(problem.TooLarge, "request body is larger than the limit of %d bytes", mbe.Limit)
	}
	pe, ok := problem.As(err)
	if !ok {
		s.log.Error("request failed", "method", r.Method, "path", r.URL.Path, "err", err)
		body := internalProblem()
		writeProblem(w, body, 0, 0, "", false)
		return
	}
	body := problemFor(pe, r.URL.EscapedPath())
	var allow string
	if pe.Kind == problem.NotAllowed {
		// RFC 9110 15.5.6: a 405 lists the methods the resource supports.
		allow = l.allowed(r)
	}
	writeProblem(w, body, pe.RetryAfter, pe.Wait, allow, notApplied(r, err))
}

// problemFor is the problem+json body of pe about the resource instance.
func problemFor(pe *problem.Error, instance string) problemBody {
	body := problemBody{
		Type: pe.Kind.Type(), Title: pe.Kind.Title(), Status: pe.Kind.Status(), Detail: pe.Detail,
		Instance: instance, Field: pe.Field, RetryAfter: pe.RetryAfter,
	}
	if pe.Operation >= 0 {
		op := pe.Operation
		body.Operation = &op
	}
	return body
}

// allowed lists the methods other than r's that routes serve at r's path.
func (l *listener) allowed(r *http.Request) string {
	escaped := r.URL.EscapedPath()
	segs, err := splitPath(escaped)
	if err != nil {
		return ""
	}
	raw := strings.Split(escaped[1:], "/")
	var out []string
	for _, rt := range l.routes.all {
		if _, ok := rt.bind(segs, raw); ok && rt.method != r.Method && !slices.Contains(out, rt.method) {
			out = append(out, rt.method)
		}
	}
	return strings.Join(out, ", ")
}

func writeProblem(w http.ResponseWriter, body problemBody, retryAfter int, wait time.Duration, allow string, notApplied bool) {
	h := w.Header()
	for k := range h {
		// A derived table's version stays named: a 404 is that version's.
		if k != headerVersion {
			delete(h, k)
		}
	}
	h.Set("Content-Type", "application/problem+json")
	if wait > 0 {
		h.Set(headerRetryAfterMs, strconv.FormatInt(max(wait.Milliseconds(), 1), 10))
	}
	if notApplied && body.Status == http.StatusServiceUnavailable {
		h.Set(headerNotApplied, "true")
	}
	if allow != "" {
		h.Set("Allow", allow)
	}
	if retryAfter > 0 {
		h.Set("Retry-After", strconv.Itoa(retryAfter))
	}
	if body.Status == http.StatusUnauthorized {
		h.Set("WWW-Authenticate", auth.Challenge)
	}
	w.WriteHeader(body.Status)
	_ = json.NewEncoder(w).Encode(body)
}

type statusWriter struct {
	http.ResponseWriter
	code  int
	wrote bool
}

func (w *statusWriter) WriteHeader(code int) {
	if !w.wrote {
		w.code, w.wrote = code, true
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if !w.wrote {
		w.code, w.wrote = http.StatusOK, true
	}
	return w.ResponseWriter.Write(b)
}

func (w *statusWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func (w *statusWriter) status() int {
	if w.code == 0 {
		return http.StatusOK
	}
	return w.code
}

func (s *Server) healthz(w http.ResponseWriter, r *http.Request, _ params) error {
	return writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
}

func (s *Server) readyz(w http.ResponseWriter, r *http.Request, _ params) error {
	if !s.ready.Load() {
		return &problem.Error{Kind: problem.Unavailable, Detail: "node is starting", Operation: -1, RetryAfter: 1}
	}
	return writeJSON(w, http.StatusOK, map[string]string{"status": "ready"})
}

func (s *Server) metrics(w http.ResponseWriter, r *http.Request, _ params) error {
	s.scrape.ServeHTTP(w, r)
	return nil
}

func writeJSON(w http.ResponseWriter, status int, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, err = w.Write(append(b, '\n'))
	return err
}

// internalProblem answers a failure that is not the client's: the detail
// stays in the node's log, not in the answer.
func internalProblem() problemBody {
	return problemBody{Type: problem.InternalType, Title: "Internal error", Status: 500, Detail: "internal error; the node's log has the cause"}
}

// RequestTimeout is the longest a request may take here: no read, however
// forwarded and retried, outlives it.
func (s *Server) RequestTimeout() time.Duration { return s.cfg.RequestTimeout }
