package client

import (
	"context"
	"net/http"
	"net/url"
	"time"
)

// NodeIntent is what the operator wants of a node, as the cluster
// recorded it.
type NodeIntent struct {
	Node string `json:"node"`
	// Alive: the node's process runs and is registered.
	Alive bool `json:"alive"`
	// State is active, standby, draining or removed.
	State string    `json:"state"`
	Since time.Time `json:"since"`
	// Replicas is how many partitions still place a replica on the node or
	// list it as a Raft member.
	Replicas int `json:"replicas"`
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
