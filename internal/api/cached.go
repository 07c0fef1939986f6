package api

import (
	"fmt"
	"io"
	"net/http"
	"strconv"
	"time"

	"github.com/doppio-db/doppio/internal/cache"
	"github.com/doppio-db/doppio/internal/cache/tier"
	"github.com/doppio-db/doppio/internal/keys"
	"github.com/doppio-db/doppio/internal/partition"
	"github.com/doppio-db/doppio/internal/peer"
)

const (
	// headerCache says which tier answered a staleness-bounded read of
	// one document: local, redis, miss or bypass.
	headerCache = "X-Doppio-Cache"
	// headerAge bounds, in milliseconds, how old a cached answer may be.
	headerAge = "X-Doppio-Age"
)

// AttachCache makes t answer this server's staleness-bounded reads of one
// document of a cacheable table (docs/design/cache.md); call it before
// SetReady(true).
func (s *Server) AttachCache(t *tier.Tier) { s.tier = t }

// cachedGetOne answers a read of one document that carries
// X-Doppio-Staleness: from the hot-key cache or Redis when an entry is
// fresh enough, else from the storage nodes (this node's replica, or the
// leader's node asked for the stored record), filling both tiers with
// that answer. The answer is rendered here either way, as getOne renders
// it.
func (s *Server) cachedGetOne(w http.ResponseWriter, r *http.Request, tg target, opts readOptions) error {
	def := &tg.table.Def
	if def.Cache == nil {
		w.Header().Set(headerCache, string(tier.Bypass))
		return s.getOne(w, r, tg, opts)
	}
	a, err := access(r)
	if err != nil {
		return err
	}
	enc, err := keys.EncodeTuple(tg.key)
	if err != nil {
		return err
	}
	group, _ := keys.EncodeTuple(tg.key[:1])
	d := tier.Doc{
		Ref: cache.Ref{DB: tg.db.Name, Generation: def.CacheGeneration, Table: def.Name,
			Partition: keys.PartitionOf(group, tg.db.Partitions), Key: enc},
		Table: tg.db.Name + "." + def.Name,
		TTL:   def.Cache.TTL,
	}
	l := s.tier.Read(r.Context(), d, a.Staleness)
	if (l.Source == tier.Local || l.Source == tier.Redis) && int(l.Entry.Version) <= tg.table.Latest() {
		h := w.Header()
		h.Set(headerCache, string(l.Source))
		h.Set(headerAge, strconv.FormatInt(l.Age.Milliseconds(), 10))
		e := l.Entry
		return answerOne(w, r, tg, opts, pointRead{
			rec:   partition.Record{Version: e.Version, SCN: e.SCN, Mtime: e.Mtime, Avro: e.Data},
			found: !e.Tombstone(), scn: e.SCN, asOf: l.AsOf(),
		})
	}
	if l.Source != tier.Bypass {
		l.Source = tier.Miss
	}
	pr, err := s.readOne(r, tg)
	if to, ok := partition.AsNotApplied(err, partition.Elsewhere); ok {
		var done bool
		if pr, done, err = s.fetchOne(w, r, to); done {
			return err
		}
	}
	if err != nil {
		return err
	}
	e := cache.Entry{SCN: pr.scn, AsOf: pr.asOf.UnixMilli()}
	if pr.found {
		e.Version, e.Data, e.Mtime = pr.rec.Version, pr.rec.Avro, pr.rec.Mtime
	}
	if l.Source == tier.Miss {
		s.tier.Fill(d, e)
	}
	w.Header().Set(headerCache, string(l.Source))
	return answerOne(w, r, tg, opts, pr)
}

// fetchOne asks the node that leads the document's partition (to) for
// the stored record (its Avro bytes, version, SCN and as-of; or its
// absence with the partition's SCN), as r's caller. An answer that is
// neither is copied to w as it came (done).
func (s *Server) fetchOne(w http.ResponseWriter, r *http.Request, to *partition.NotAppliedError) (pr pointRead, done bool, err error) {
	req, err := http.NewRequestWithContext(r.Context(), http.MethodGet, s.peers.URL(to.Peer, r.URL.EscapedPath()), nil)
	if err != nil {
		return pr, true, err
	}
	req.Header.Set("Accept", mediaAvro)
	for _, h := range []string{headerStaleness, headerTimeout} {
		if v := r.Header.Get(h); v != "" {
			req.Header.Set(h, v)
		}
	}
	if deadline, ok := r.Context().Deadline(); ok {
		req.Header.Set(headerTimeout, (time.Until(deadline) - retryMargin(deadline)).String())
	}
	req.Header.Set(headerForwardedBy, s.cfg.NodeID)
	if s.catalog != nil {
		req.Header.Set(headerCatalogRevision, s.catalog.Revision().String())
	}
	peer.SetCaller(r.Context(), req)
	resp, err := s.peers.Do(req)
	if err != nil {
		return pr, false, forwardError(r, to, err)
	}
	defer resp.Body.Close()
	if err := refusedThere(r, resp, to); err != nil {
		return pr, false, err
	}
	rh := resp.Header
	scn, scnErr := partition.ParseSCN(rh.Get(headerSCN))
	ms, asOfErr := strconv.ParseInt(rh.Get(headerAsOf), 10, 64)
	known := scnErr == nil && asOfErr == nil
	switch {
	case resp.StatusCode == http.StatusNotFound && known:
		return pointRead{scn: scn, asOf: time.UnixMilli(ms)}, false, nil
	case resp.StatusCode == http.StatusOK && known && rh.Get("Content-Type") == mediaAvro:
		pr := pointRead{found: true, scn: scn, asOf: time.UnixMilli(ms)}
		pr.rec.SCN = scn
		v, err := strconv.ParseUint(rh.Get(headerSchemaVersion), 10, 32)
		if err != nil {
			return pr, false, fmt.Errorf("node %s answered %s %q", to.Node, headerSchemaVersion, rh.Get(headerSchemaVersion))
		}
		pr.rec.Version = uint32(v)
		// Last-Modified has whole seconds, all that the answer shows.
		mtime, err := http.ParseTime(rh.Get("Last-Modified"))
		if err != nil {
			return pr, false, fmt.Errorf("node %s answered Last-Modified %q", to.Node, rh.Get("Last-Modified"))
		}
		pr.rec.Mtime = mtime.UnixMilli()
		if pr.rec.Avro, err = io.ReadAll(io.LimitReader(resp.Body, int64(s.cfg.MaxDocumentBytes)+1)); err != nil {
			return pr, false, forwardError(r, to, err)
		}
		return pr, false, nil
	}
	// Any other answer (a 400, a 403, a 429, a missing table) is the
	// nodes' answer to the read as it is.
	return pr, true, copyAnswer(w, resp)
}
