package api

import "github.com/doppio-db/doppio/internal/auth"

// RouteInfo is one row of the route table, for the tests of api_test.
type RouteInfo struct {
	Method, Pattern string
	Priv            auth.Privilege
	Stream          bool
	Audit           string
	// NodeOnly routes are served on the peer listener alone.
	NodeOnly bool
}

// RouteTable lists the served routes and their privileges.
func RouteTable() []RouteInfo {
	var out []RouteInfo
	for _, r := range routes() {
		out = append(out, RouteInfo{Method: r.method, Pattern: r.pattern, Priv: r.priv, Stream: r.stream, Audit: r.audit, NodeOnly: r.nodeOnly})
	}
	return out
}
