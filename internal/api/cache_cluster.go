package api

import (
	"bytes"
	"encoding/json"
	"net/http"

	"github.com/doppio-db/doppio/client/wire"
)

// relayClusterWithCache relays GET /_cluster to a node, as relayAny, and
// adds this router's read side of the cache tier to the answer's cache
// section: routers register nowhere, so no node can report them.
func (s *Server) relayClusterWithCache(w *statusWriter, r *http.Request) error {
	buf := &bufferedAnswer{header: http.Header{}}
	sw := &statusWriter{ResponseWriter: buf}
	if err := s.relayAny(sw, r); err != nil && !sw.wrote {
		return err
	}
	var body map[string]json.RawMessage
	if sw.status() != http.StatusOK || json.Unmarshal(buf.body.Bytes(), &body) != nil {
		return copyBuffered(w, sw.status(), buf)
	}
	var c wire.CacheInfo
	if raw, ok := body["cache"]; ok && json.Unmarshal(raw, &c) != nil {
		return copyBuffered(w, sw.status(), buf)
	}
	own := s.tier.Report(s.cfg.NodeID, "router")
	c.Processes = append(c.Processes, own)
	for i := range c.Tables {
		if reads, ok := own.Tables[c.Tables[i].Database+"."+c.Tables[i].Table]; ok {
			c.Tables[i].Add(reads)
		}
	}
	if c.Tables == nil {
		c.Tables = []wire.CacheTable{}
	}
	if c.Updaters == nil {
		c.Updaters = []wire.CacheUpdater{}
	}
	raw, err := json.Marshal(c)
	if err != nil {
		return err
	}
	body["cache"] = raw
	return writeJSON(w, http.StatusOK, body)
}

// bufferedAnswer holds an answer so that it can be changed before it is
// sent.
type bufferedAnswer struct {
	header http.Header
	body   bytes.Buffer
}

func (b *bufferedAnswer) Header() http.Header         { return b.header }
func (b *bufferedAnswer) Write(p []byte) (int, error) { return b.body.Write(p) }
func (b *bufferedAnswer) WriteHeader(int)             {}

// copyBuffered sends a held answer on as it came.
func copyBuffered(w http.ResponseWriter, status int, b *bufferedAnswer) error {
	for k, vs := range b.header {
		w.Header()[k] = vs
	}
	w.WriteHeader(status)
	_, err := w.Write(b.body.Bytes())
	return err
}
