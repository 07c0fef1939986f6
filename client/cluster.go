package client

import (
	"context"
	"net/http"
	"net/url"

	"github.com/doppio-db/doppio/client/wire"
)

// NodeIntent is what the operator wants of a node, as the cluster
// recorded it.
type NodeIntent = wire.NodeIntent

// ClusterInfo is the cluster's state as GET /_cluster reports it: nodes,
// partitions with their replicas, the rebalance's progress and running
// transfers.
type ClusterInfo = wire.ClusterInfo

// Cluster returns the cluster's state as the server sees it: every live
// node's report of its replicas joined with the placement (a node that
// does not answer is left out of the members).
func (c *Client) Cluster(ctx context.Context) (ClusterInfo, error) {
	var out ClusterInfo
	_, err := c.call(ctx, newRequest(http.MethodGet, "/_cluster"), &out)
	return out, err
}

// AddNode makes node an active member: the controller moves replicas to
// it (a node started with --standby, or one drained or removed before).
func (c *Client) AddNode(ctx context.Context, node string) (NodeIntent, error) {
	return c.nodeIntent(ctx, node, "add")
}

// DrainNode moves every replica and leadership off node. It is refused
// (IsConflict) when a database would be left with fewer active nodes than
// its replicas.
func (c *Client) DrainNode(ctx context.Context, node string) (NodeIntent, error) {
	return c.nodeIntent(ctx, node, "drain")
}

// RemoveNode takes a node that holds no replica out of the cluster; it is
// refused (IsConflict) while the node holds replicas.
func (c *Client) RemoveNode(ctx context.Context, node string) (NodeIntent, error) {
	return c.nodeIntent(ctx, node, "remove")
}

func (c *Client) nodeIntent(ctx context.Context, node, verb string) (NodeIntent, error) {
	var out NodeIntent
	_, err := c.call(ctx, newRequest(http.MethodPost, "/_cluster/nodes/"+url.PathEscape(node)+"/"+verb), &out)
	return out, err
}
