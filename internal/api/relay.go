package api

import (
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/doppio-db/doppio/internal/partition"

	"github.com/doppio-db/doppio/internal/backoff"
)

// Peer is a storage node a stateless router may relay to.
type Peer struct {
	ID   string
	Addr string // host:port of its peer listener (internal/peer)
}

// Relay makes s a stateless router (`doppio router`): it hosts no
// partition, so document requests go to their partition's leader (the
// replicas.Registry it was attached with finds none here), and the requests
// that a node answers from its own state (schemas, whose index progress is
// per replica, the cluster view, datastreams, quotas, bulk loads) go to any live node
// that peers returns, at its peer listener. Call it before SetReady(true).
func (s *Server) Relay(peers func() []Peer) { s.relay = peers }

// relayed reports whether a route is answered by any storage node rather
// than by the partition's leader.
func relayed(pattern string) bool {
	return strings.HasPrefix(pattern, "/_schemas") || strings.HasPrefix(pattern, "/_cluster") ||
		strings.HasPrefix(pattern, "/_datastreams") || strings.HasPrefix(pattern, "/_quotas") ||
		strings.HasPrefix(pattern, "/_bulk") || strings.HasPrefix(pattern, "/_derived")
}

type relayTarget Peer

func (t relayTarget) Error() string {
	return fmt.Sprintf("node %s (%s) serves this request", t.ID, t.Addr)
}

// relayAny forwards r to a live node, the first one peers lists while it
// answers (so a schema read after a schema write through this router sees
// it: both reach the same node's catalog), moving on while nodes refuse it
// without applying it, within r's deadline.
func (s *Server) relayAny(w *statusWriter, r *http.Request) error {
	var body []byte
	if r.Body != nil && r.Method != http.MethodGet && r.Method != http.MethodHead {
		b, err := readLimited(r, int64(s.cfg.MaxRequestBytes))
		if err != nil {
			return err
		}
		body = b
	}
	deadline, _ := r.Context().Deadline()
	b := retryBackoff()
	for {
		peers := s.relay()
		var err error = &partition.NotAppliedError{Reason: partition.RefusedThere, Detail: "no storage node is registered"}
		for _, p := range peers {
			err = s.forward(w, r, body, p.Addr, relayTarget(p))
			if w.wrote || !notApplied(r, err) {
				return err
			}
		}
		if r.Context().Err() != nil || time.Until(deadline) < b.Peek()+retryMargin(deadline) {
			return err
		}
		if backoff.Sleep(r.Context(), b.Next()) != nil {
			return err
		}
	}
}
