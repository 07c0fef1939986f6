package client

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/doppio-db/doppio/internal/keys"
)

// WithSmartRouting makes the client send each request that names a
// partition key straight to the partition's leader, as Voldemort's smart
// clients do, instead of letting the server it was given forward it. The
// routing table comes from the cluster view (GET /_cluster), refreshed every
// refresh (and at once after a request its leader could not serve, which
// then goes through the seed server). Schema calls and queries without a
// partition key always use the seed server.
func WithSmartRouting(refresh time.Duration) Option {
	return func(c *Client) { c.routes = &routing{refresh: refresh} }
}

// routing is the client's copy of the cluster's routing table.
type routing struct {
	refresh time.Duration

	mu      sync.Mutex
	fetched time.Time
	stale   bool
	dbs     map[string][]string // database -> leader base URL per partition ("" unknown)
}

// routeKey names the document group a request addresses.
type routeKey struct {
	db string
	pk any
}

// routed sets the request's document group, when smart routing may use it.
func (r *request) routed(db string, key Key) *request {
	if len(key) > 0 {
		r.route = &routeKey{db: db, pk: key[0]}
	}
	return r
}

// baseFor returns the base URL to send r to.
func (c *Client) baseFor(ctx context.Context, r *request) string {
	if c.routes == nil || r.route == nil || r.unrouted {
		return c.base
	}
	leaders := c.routes.table(ctx, c, r.route.db)
	if len(leaders) == 0 {
		return c.base
	}
	var part keys.Tuple
	switch v := r.route.pk.(type) {
	case string:
		part = keys.Tuple{v}
	case int:
		part = keys.Tuple{int64(v)}
	case int64:
		part = keys.Tuple{v}
	case int32:
		part = keys.Tuple{int64(v)}
	default:
		return c.base
	}
	enc, err := keys.EncodeTuple(part)
	if err != nil {
		return c.base
	}
	if b := leaders[keys.PartitionOf(enc, len(leaders))]; b != "" {
		return b
	}
	return c.base
}

// missed records that a leader from the table failed a request: the next
// attempt goes through the seed server and the table is fetched again.
func (c *Client) missed(r *request) {
	if c.routes == nil || r.route == nil || r.unrouted {
		return
	}
	r.unrouted = true
	c.routes.mu.Lock()
	c.routes.stale = true
	c.routes.mu.Unlock()
}

// table returns the leaders of db's partitions, refreshing the view when
// it is old or stale.
func (t *routing) table(ctx context.Context, c *Client, db string) []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.dbs == nil || t.stale || time.Since(t.fetched) > t.refresh {
		if dbs, err := fetchRoutes(ctx, c); err == nil {
			t.dbs, t.stale = dbs, false
		}
		t.fetched = time.Now() // a failed fetch is not retried on every request
	}
	return t.dbs[db]
}

func fetchRoutes(ctx context.Context, c *Client) (map[string][]string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.base+"/_cluster", nil)
	if err != nil {
		return nil, err
	}
	c.authorize(req)
	res, err := c.hc.Do(req)
	if err != nil {
		return nil, err
	}
	defer res.Body.Close()
	var view struct {
		Nodes []struct {
			ID, HTTP, State string
		}
		Partitions []struct {
			Database  string
			Partition int
			Leader    string
		}
	}
	if err := json.NewDecoder(res.Body).Decode(&view); err != nil {
		return nil, err
	}
	scheme := "http://"
	if strings.HasPrefix(c.base, "https://") {
		scheme = "https://"
	}
	addr := map[string]string{}
	for _, n := range view.Nodes {
		if n.State == "alive" && n.HTTP != "" {
			addr[n.ID] = scheme + n.HTTP
		}
	}
	dbs := map[string][]string{}
	for _, p := range view.Partitions {
		ls := dbs[p.Database]
		for len(ls) <= p.Partition {
			ls = append(ls, "")
		}
		ls[p.Partition] = addr[p.Leader]
		dbs[p.Database] = ls
	}
	return dbs, nil
}
