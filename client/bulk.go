package client

import (
	"context"
	"net/http"
	"net/url"

	"github.com/doppio-db/doppio/client/wire"
)

// LoadRequest asks the cluster to load a build: its Source (a directory
// every node can read, file:///dir or an http(s) URL), Mode ("merge", the
// default) and an optional Throttle in bytes per second per node.
type LoadRequest = wire.LoadRequest

// Load is a bulk load with its progress; LoadPartition one partition's.
type (
	Load          = wire.Load
	LoadPartition = wire.LoadPartition
)

// Load states (Load.State).
const (
	LoadVerifying = wire.LoadVerifying
	LoadLoading   = wire.LoadLoading
	LoadDone      = wire.LoadDone
	LoadCancelled = wire.LoadCancelled
	LoadFailed    = wire.LoadFailed
)

// StartLoad starts loading the build req names and returns the load and
// whether this call started it: false when the same build (the same
// manifest) is already loading or loaded, which is then returned as it
// is. A build that does not fit its table is an *Error naming the
// manifest's field.
func (c *Client) StartLoad(ctx context.Context, req LoadRequest) (Load, bool, error) {
	r := newRequest(http.MethodPost, "/_bulk/loads")
	if err := r.jsonBody(req); err != nil {
		return Load{}, false, err
	}
	var l Load
	res, err := c.call(ctx, r, &l)
	if err != nil {
		return Load{}, false, err
	}
	return l, res.status == http.StatusAccepted, nil
}

// GetLoad reads a load with each partition's progress.
func (c *Client) GetLoad(ctx context.Context, id string) (Load, error) {
	var l Load
	_, err := c.call(ctx, newRequest(http.MethodGet, "/_bulk/loads/"+url.PathEscape(id)), &l)
	return l, err
}

// ListLoads reads every load, oldest first, with its totals.
func (c *Client) ListLoads(ctx context.Context) ([]Load, error) {
	var out struct {
		Loads []Load `json:"loads"`
	}
	_, err := c.call(ctx, newRequest(http.MethodGet, "/_bulk/loads"), &out)
	return out.Loads, err
}

// CancelLoad cancels a load: partitions not started never start, those
// loading finish.
func (c *Client) CancelLoad(ctx context.Context, id string) (Load, error) {
	var l Load
	_, err := c.call(ctx, newRequest(http.MethodPost, "/_bulk/loads/"+url.PathEscape(id)+"/cancel"), &l)
	return l, err
}
