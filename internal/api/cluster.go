package api

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/doppio-db/doppio/client/wire"
	"github.com/doppio-db/doppio/internal/catalog"
	"github.com/doppio-db/doppio/internal/lazyctx"
	"github.com/doppio-db/doppio/internal/partition"
	"github.com/doppio-db/doppio/internal/peer"
	"github.com/doppio-db/doppio/internal/problem"
	"github.com/doppio-db/doppio/internal/replicas"
)

const (
	// headerForwardedBy marks a request one node forwarded to another; a
	// node never forwards such a request again, so routing tables that
	// disagree cannot bounce a request around.
	headerForwardedBy = "X-Doppio-Forwarded-By"
	// headerStaleness on a read allows an answer that old from any replica.
	headerStaleness = "X-Doppio-Staleness"
	// headerTimeout shortens the server's deadline for a request (a Go
	// duration or seconds), so an answer — at worst a 503 — comes before
	// the client gives up.
	headerTimeout = "X-Doppio-Timeout"
)

// Cluster is what the API asks the node about the cluster.
type Cluster interface {
	// Info is the body of GET /_cluster.
	Info(ctx context.Context) (wire.ClusterInfo, error)
	// Local is the body of GET /_internal/replicas (peer listener only):
	// this node's replicas and their Raft status.
	Local() wire.LocalInfo
}

// hopHeaders are not forwarded (RFC 9110 7.6.1).
var hopHeaders = map[string]bool{
	"Connection": true, "Keep-Alive": true, "Proxy-Authenticate": true, "Proxy-Authorization": true,
	"Te": true, "Trailer": true, "Transfer-Encoding": true, "Upgrade": true,
}

// forward replays r, with body, on the peer listener at addr (the
// partition's leader's, or for a router any node's; to says which and
// why), as r's caller, and copies its answer.
func (s *Server) forward(w *statusWriter, r *http.Request, body []byte, addr string, to error) error {
	if by := r.Header.Get(headerForwardedBy); by != "" {
		return &partition.NotAppliedError{Reason: partition.RefusedThere,
			Detail: fmt.Sprintf("node %s forwarded this request here, but %s; routing is settling, retry", by, to.Error())}
	}
	req, err := http.NewRequestWithContext(r.Context(), r.Method, s.peers.URL(addr, r.URL.RequestURI()), bytes.NewReader(body))
	if err != nil {
		return err
	}
	for k, vs := range r.Header {
		if !hopHeaders[k] {
			req.Header[k] = vs
		}
	}
	peer.SetCaller(r.Context(), req)
	req.Header.Set(headerForwardedBy, s.cfg.NodeID)
	if s.catalog != nil {
		req.Header.Set(headerCatalogRevision, s.catalog.Revision().String())
	}
	if deadline, ok := r.Context().Deadline(); ok {
		// The leader answers within what is left here, keeping a margin for
		// the answer to come back (and, if it refuses, to route again).
		req.Header.Set(headerTimeout, (time.Until(deadline) - retryMargin(deadline)).String())
	}
	resp, err := s.peers.Do(req)
	if err != nil {
		return forwardError(r, to, err)
	}
	defer resp.Body.Close()
	if err := refusedThere(r, resp, to); err != nil {
		return err
	}
	return copyAnswer(w, resp)
}

// copyAnswer passes another node's answer on to w as it came, but for
// its hop-by-hop header fields.
func copyAnswer(w http.ResponseWriter, resp *http.Response) error {
	h := w.Header()
	for k, vs := range resp.Header {
		if !hopHeaders[k] {
			h[k] = vs
		}
	}
	w.WriteHeader(resp.StatusCode)
	_, err := io.Copy(w, resp.Body)
	return err
}

// withDeadline bounds a data request by the server's request timeout, or
// the shorter X-Doppio-Timeout, so that no request waits forever for a
// quorum.
func (s *Server) withDeadline(r *http.Request) (*http.Request, context.CancelFunc, error) {
	d := s.cfg.RequestTimeout
	if vs, ok := r.Header[headerTimeout]; ok {
		v := vs[0]
		t, ok := parseDuration(positiveDurationPattern, v)
		if !ok {
			return r, func() {}, problem.Field(problem.Malformed, headerTimeout, "%s %q is not a positive duration (e.g. 2s, 500ms)", headerTimeout, v)
		}
		d = min(d, max(t, 1))
	}
	ctx, cancel := lazyctx.WithTimeout(r.Context(), d)
	if v := r.Header.Get(headerCatalogRevision); v != "" { // only forwarded requests carry it
		if since, ok := catalog.ParsePosition(v); ok {
			ctx = context.WithValue(ctx, catalogSince{}, since)
		}
	}
	return r.WithContext(ctx), cancel, nil
}

// headerCatalogRevision carries a forwarding node's catalog position
// (catalog.Revision: "<databases>/<tables>", the revisions of the newest
// entries of each kind it holds) to the node that serves the request,
// which reads the request's schema from etcd if its own watch has not
// reached them (a hint between nodes: a value that does not parse is
// ignored).
const headerCatalogRevision = "X-Doppio-Catalog-Revision"

// catalogSince is the context key of that revision.
type catalogSince struct{}

// access is what a read asks of the replica: linearizable, unless
// X-Doppio-Staleness allows an older answer.
func access(r *http.Request) (replicas.Access, error) {
	a := replicas.Access{Read: true}
	if vs, ok := r.Header[headerStaleness]; ok {
		v := vs[0]
		d, ok := parseDuration(durationPattern, v)
		if !ok {
			return a, problem.Field(problem.Malformed, headerStaleness, "%s %q is not a duration (e.g. 5s, 250ms)", headerStaleness, v)
		}
		a.Staleness = d
	}
	return a, nil
}

// The grammar of X-Doppio-Timeout (positive) and X-Doppio-Staleness,
// the same patterns the OpenAPI document declares: seconds as a plain
// number, or a Go duration of unsigned components ("1m30s", "500ms").
var (
	durationPattern         = regexp.MustCompile(`^(?:[0-9]+(?:\.[0-9]+)?|(?:[0-9]+(?:\.[0-9]+)?(?:ns|us|µs|ms|s|m|h))+)$`)
	positiveDurationPattern = regexp.MustCompile(`^(?:[0-9]*[1-9][0-9]*(?:\.[0-9]+)?|0+\.[0-9]*[1-9][0-9]*)(?:(?:ns|us|µs|ms|s|m|h)(?:[0-9]+(?:\.[0-9]+)?(?:ns|us|µs|ms|s|m|h))*)?$`)
)

// parseDuration reads a value of pattern; one too long for a Duration
// saturates, as both headers only ever shorten or widen to a bound.
func parseDuration(pattern *regexp.Regexp, v string) (time.Duration, bool) {
	v = strings.TrimSpace(v)
	if !pattern.MatchString(v) {
		return 0, false
	}
	if n, err := strconv.ParseFloat(v, 64); err == nil {
		if n*float64(time.Second) >= math.MaxInt64 {
			return math.MaxInt64, true
		}
		return time.Duration(n * float64(time.Second)), true
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		return math.MaxInt64, true
	}
	return d, true
}

// cluster answers GET /_cluster: every node and every partition, or with
// ?database= and ?node= the partitions of one database or with a replica
// on one node, and with ?limit= a page of them continued from ?cursor=
// (the answer's next), so a large cluster is read a page at a time.
func (s *Server) cluster(w http.ResponseWriter, r *http.Request, _ params) error {
	q, err := parseClusterPage(r.URL.Query())
	if err != nil {
		return err
	}
	if s.clusterInfo == nil {
		return writeJSON(w, http.StatusOK, map[string]any{})
	}
	if q.database != "" && s.catalog != nil {
		if _, err := s.database(r.Context(), q.database); err != nil {
			return err
		}
	}
	info, err := s.clusterInfo.Info(r.Context())
	if err != nil {
		return err
	}
	if q.node != "" && !slices.ContainsFunc(info.Nodes, func(n wire.NodeInfo) bool { return n.ID == q.node }) {
		return problem.New(problem.NotFound, "node %q is not in the cluster", q.node)
	}
	info.Partitions, info.Next = q.page(info.Partitions)
	return writeJSON(w, http.StatusOK, info)
}

// maxClusterPage bounds ?limit= on GET /_cluster.
const maxClusterPage = 10000

// clusterPage is the selection of GET /_cluster's partitions.
type clusterPage struct {
	database, node string
	limit          int // 0: all
	// after is the cursor: the page starts after this partition.
	after *partitionRef
}

type partitionRef struct {
	db string
	p  int
}

func parseClusterPage(v url.Values) (clusterPage, error) {
	q := clusterPage{database: v.Get("database"), node: v.Get("node")}
	for _, name := range []string{"database", "node", "limit", "cursor"} {
		if v.Has(name) && v.Get(name) == "" {
			return q, problem.Field(problem.Malformed, name, "%s is empty: give a value or leave the parameter out", name)
		}
	}
	if l := v.Get("limit"); l != "" {
		n, err := strconv.Atoi(l)
		if err != nil || n < 1 || n > maxClusterPage {
			return q, problem.Field(problem.Malformed, "limit", "limit must be 1 to %d, not %q", maxClusterPage, l)
		}
		q.limit = n
	}
	if c := v.Get("cursor"); c != "" {
		db, num, ok := strings.Cut(c, "/")
		p, err := strconv.Atoi(num)
		if !ok || db == "" || err != nil || p < 0 {
			return q, problem.Field(problem.Malformed, "cursor", "cursor %q is not a next from an earlier answer", c)
		}
		q.after = &partitionRef{db, p}
	}
	return q, nil
}

// page selects from partitions (sorted by database, then partition) and
// returns the cursor of the next page ("" on the last).
func (q clusterPage) page(partitions []wire.PartitionInfo) ([]wire.PartitionInfo, string) {
	out := []wire.PartitionInfo{}
	for _, pi := range partitions {
		if q.database != "" && pi.Database != q.database {
			continue
		}
		if q.node != "" && !slices.Contains(pi.Replicas, q.node) && !slices.ContainsFunc(pi.Members, func(m wire.ReplicaInfo) bool { return m.Node == q.node }) {
			continue
		}
		if a := q.after; a != nil && (pi.Database < a.db || pi.Database == a.db && pi.Partition <= a.p) {
			continue
		}
		if q.limit > 0 && len(out) == q.limit {
			last := out[len(out)-1]
			return out, last.Database + "/" + strconv.Itoa(last.Partition)
		}
		out = append(out, pi)
	}
	return out, ""
}

// internalReplicas answers this node's replicas, for another node's
// /_cluster.
func (s *Server) internalReplicas(w http.ResponseWriter, r *http.Request, _ params) error {
	if s.clusterInfo == nil {
		return writeJSON(w, http.StatusOK, map[string]any{})
	}
	return writeJSON(w, http.StatusOK, s.clusterInfo.Local())
}

// partitionPage is one partition's answer to a query over all its
// document groups: the page with its sort values (for merging) and the
// rendered documents of its keys (null where a document vanished).
type partitionPage struct {
	Keys       [][]byte          `json:"keys"`
	SortValues [][]byte          `json:"sortValues,omitempty"`
	Count      int               `json:"count"`
	Next       string            `json:"next,omitempty"`
	Documents  []json.RawMessage `json:"documents"`
}

// fetchPage asks the leader's node for one partition's page of a query,
// at its peer listener, as r's caller: the leader charges the page's read
// units to that user's quota, as it would a forwarded read.
func (s *Server) fetchPage(r *http.Request, to *partition.NotAppliedError, table string) (partitionPage, error) {
	var page partitionPage
	u := s.peers.URL(to.Peer, fmt.Sprintf("/_internal/query/%s/%s/%d?%s", url.PathEscape(to.DB), url.PathEscape(table), to.Partition, r.URL.RawQuery))
	req, err := http.NewRequestWithContext(r.Context(), http.MethodGet, u, nil)
	if err != nil {
		return page, err
	}
	for _, h := range []string{headerSchemaVersion, headerStaleness, headerTimeout, headerVersion} {
		if v := r.Header.Get(h); v != "" {
			req.Header.Set(h, v)
		}
	}
	req.Header.Set(headerForwardedBy, s.cfg.NodeID)
	peer.SetCaller(r.Context(), req)
	resp, err := s.peers.Do(req)
	if err != nil {
		return page, &problem.Error{Kind: problem.Unavailable, Operation: -1, RetryAfter: 1,
			Detail: fmt.Sprintf("%s, but asking it failed: %v", to.Error(), err)}
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return page, err
	}
	if resp.StatusCode != http.StatusOK {
		var pb problemBody
		_ = json.Unmarshal(b, &pb)
		kind := problem.Unavailable
		switch resp.StatusCode {
		case http.StatusConflict:
			kind = problem.Conflict
		case http.StatusTooManyRequests:
			kind = problem.OverQuota
		}
		e := &problem.Error{Kind: kind, Operation: -1, Field: pb.Field, RetryAfter: pb.RetryAfter,
			Detail: fmt.Sprintf("partition %s/%d on node %s: %s", to.DB, to.Partition, to.Node, pb.Detail)}
		if kind == problem.Unavailable && e.RetryAfter == 0 {
			e.RetryAfter = 1
		}
		return page, e
	}
	if err := json.Unmarshal(b, &page); err != nil {
		return page, fmt.Errorf("partition %s/%d on node %s: %w", to.DB, to.Partition, to.Node, err)
	}
	if len(page.Documents) != len(page.Keys) {
		return page, errors.New("partition page: documents do not match keys")
	}
	return page, nil
}
