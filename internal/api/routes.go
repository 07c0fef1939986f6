package api

import (
	"bytes"
	"net/http"
	"net/url"
	"slices"
	"strings"

	"github.com/doppio-db/doppio/internal/auth"
	"github.com/doppio-db/doppio/internal/problem"
)

// route is one served (method, path pattern). A pattern's segments are
// literals, {name} (one segment) or a final {key} that takes one or more
// segments: the key parts of a document or collection. The OpenAPI document
// lists exactly these patterns (see TestOpenAPIMatchesRoutes).
type route struct {
	method  string
	pattern string
	handle  func(s *Server, w http.ResponseWriter, r *http.Request, p params) error
	// priv is what the caller must hold; on a per-database privilege, on
	// the route's {db}. Unset (auth.Closed), no user may call the route.
	priv auth.Privilege
	// audit, when set, names the action the audit log records for each
	// request of this route, refused ones included.
	audit string
	segs  []string
	// stream routes answer for as long as the client reads: no request
	// deadline.
	stream bool
	// nodeOnly routes are for other nodes of the cluster: served on the
	// peer listener alone, never on the REST listener.
	nodeOnly bool
	// series are the route's metric series (see Server.record).
	series routeSeries
}

// params are the values of a matched route's path parameters.
type params struct {
	db, table, version string
	partition          string
	name               string   // a datastream, a node, a user or a bulk load
	role               string   // a role to revoke
	key                []string // percent-decoded key segments
	lastRaw            string   // the last key segment, still escaped
}

func routes() []*route {
	// Every route needs exactly one privilege (see internal/auth); the
	// OpenAPI document states the same as x-doppio-privilege
	// (TestPrivilegesMatchOpenAPI). audit names the action recorded in the
	// audit log, for the routes that change security-relevant state.
	const (
		public        = auth.Public
		authenticated = auth.Authenticated
		read          = auth.Read
		readWrite     = auth.ReadWrite
		dbAdmin       = auth.DBAdmin
		clusterAdmin  = auth.ClusterAdmin
		userAdmin     = auth.UserAdmin
		node          = auth.NodeOnly
	)
	rs := []*route{
		{method: "GET", pattern: "/healthz", priv: public, handle: (*Server).healthz},
		{method: "GET", pattern: "/readyz", priv: public, handle: (*Server).readyz},
		{method: "GET", pattern: "/metrics", priv: authenticated, handle: (*Server).metrics},
		{method: "GET", pattern: "/_openapi", priv: public, handle: (*Server).openapi},
		// The web console's files hold no data: its pages call the REST
		// API with the user's own credentials.
		{method: "GET", pattern: "/_console", priv: public, handle: (*Server).console},
		{method: "GET", pattern: "/_console/{name}", priv: public, handle: (*Server).console},
		{method: "GET", pattern: "/_cluster", priv: authenticated, handle: (*Server).cluster},
		{method: "POST", pattern: "/_cluster/nodes/{name}/add", priv: clusterAdmin, audit: "node.add", handle: (*Server).nodeIntent},
		{method: "POST", pattern: "/_cluster/nodes/{name}/drain", priv: clusterAdmin, audit: "node.drain", handle: (*Server).nodeIntent},
		{method: "POST", pattern: "/_cluster/nodes/{name}/remove", priv: clusterAdmin, audit: "node.remove", handle: (*Server).nodeIntent},
		{method: "GET", pattern: "/_internal/replicas", priv: node, handle: (*Server).internalReplicas, nodeOnly: true},
		// Consistency checks read whole partitions, throttled: no request
		// deadline (stream), the client's disconnect ends them.
		{method: "POST", pattern: "/_cluster/check/{db}", priv: clusterAdmin, handle: (*Server).checkDatabase, stream: true},
		{method: "POST", pattern: "/_cluster/check/{db}/{partition}", priv: clusterAdmin, handle: (*Server).checkOnePartition, stream: true},
		{method: "POST", pattern: "/_internal/check/{db}/{partition}", priv: node, handle: (*Server).checkLocalPartition, stream: true, nodeOnly: true},
		{method: "GET", pattern: "/_internal/query/{db}/{table}/{partition}", priv: read, handle: (*Server).queryPartition, nodeOnly: true},
		// A drop's step for one partition, sent by the node serving the
		// drop (authorized there) to the partition's leader.
		{method: "POST", pattern: "/_internal/drop/{db}/{partition}", priv: node, handle: (*Server).internalDrop, nodeOnly: true},
		// The CLI drives backups and restores through these.
		{method: "GET", pattern: "/_cluster/backup/{db}/{partition}", priv: clusterAdmin, audit: "backup", handle: (*Server).backupPartition, stream: true},
		{method: "GET", pattern: "/_cluster/restore/{db}/{partition}", priv: clusterAdmin, handle: (*Server).restoreState},
		{method: "POST", pattern: "/_cluster/restore/{db}/{partition}", priv: clusterAdmin, audit: "restore", handle: (*Server).restorePartition, stream: true},
		{method: "GET", pattern: "/_changes/{db}", priv: read, handle: (*Server).changes, stream: true},
		{method: "GET", pattern: "/_datastreams", priv: clusterAdmin, handle: (*Server).listDatastreams},
		{method: "GET", pattern: "/_datastreams/{name}", priv: clusterAdmin, handle: (*Server).getDatastream},
		{method: "PUT", pattern: "/_datastreams/{name}", priv: clusterAdmin, audit: "datastream.put", handle: (*Server).putDatastream},
		{method: "DELETE", pattern: "/_datastreams/{name}", priv: clusterAdmin, audit: "datastream.delete", handle: (*Server).deleteDatastream},
		{method: "POST", pattern: "/_datastreams/{name}/pause", priv: clusterAdmin, audit: "datastream.pause", handle: (*Server).pauseDatastream},
		{method: "POST", pattern: "/_datastreams/{name}/resume", priv: clusterAdmin, audit: "datastream.resume", handle: (*Server).resumeDatastream},
		{method: "GET", pattern: "/_datastreams/{name}/status", priv: clusterAdmin, handle: (*Server).datastreamStatus},
		{method: "GET", pattern: "/_bulk/loads", priv: clusterAdmin, handle: (*Server).listLoads},
		{method: "POST", pattern: "/_bulk/loads", priv: clusterAdmin, audit: "bulk.load", handle: (*Server).startLoad},
		{method: "GET", pattern: "/_bulk/loads/{name}", priv: clusterAdmin, handle: (*Server).getLoad},
		{method: "POST", pattern: "/_bulk/loads/{name}/cancel", priv: clusterAdmin, audit: "bulk.cancel", handle: (*Server).cancelLoad},
		{method: "GET", pattern: "/_derived/{db}/{table}", priv: read, handle: (*Server).derivedStatus},
		{method: "POST", pattern: "/_derived/{db}/{table}/versions", priv: dbAdmin, audit: "derived.push", handle: (*Server).pushVersion},
		{method: "POST", pattern: "/_derived/{db}/{table}/swap", priv: dbAdmin, audit: "derived.swap", handle: (*Server).swapVersion},
		{method: "POST", pattern: "/_derived/{db}/{table}/rollback", priv: dbAdmin, audit: "derived.rollback", handle: (*Server).rollbackVersion},
		{method: "POST", pattern: "/_derived/{db}/{table}/roll-forward", priv: dbAdmin, audit: "derived.roll-forward", handle: (*Server).rollForwardVersion},
		{method: "POST", pattern: "/_derived/{db}/{table}/discard", priv: dbAdmin, audit: "derived.discard", handle: (*Server).discardVersion},
		{method: "GET", pattern: "/_quotas", priv: clusterAdmin, handle: (*Server).listQuotas},
		{method: "GET", pattern: "/_quotas/databases/{db}", priv: clusterAdmin, handle: (*Server).getQuota},
		{method: "PUT", pattern: "/_quotas/databases/{db}", priv: clusterAdmin, audit: "quota.put", handle: (*Server).putQuota},
		{method: "DELETE", pattern: "/_quotas/databases/{db}", priv: clusterAdmin, audit: "quota.delete", handle: (*Server).deleteQuota},
		{method: "GET", pattern: "/_quotas/users/{name}", priv: clusterAdmin, handle: (*Server).getQuota},
		{method: "PUT", pattern: "/_quotas/users/{name}", priv: clusterAdmin, audit: "quota.put", handle: (*Server).putQuota},
		{method: "DELETE", pattern: "/_quotas/users/{name}", priv: clusterAdmin, audit: "quota.delete", handle: (*Server).deleteQuota},
		{method: "POST", pattern: "/_auth/login", priv: public, handle: (*Server).login},
		{method: "GET", pattern: "/_users", priv: userAdmin, handle: (*Server).listUsers},
		{method: "GET", pattern: "/_users/{name}", priv: userAdmin, handle: (*Server).getUser},
		{method: "PUT", pattern: "/_users/{name}", priv: userAdmin, audit: "user.put", handle: (*Server).putUser},
		{method: "DELETE", pattern: "/_users/{name}", priv: userAdmin, audit: "user.delete", handle: (*Server).deleteUser},
		{method: "POST", pattern: "/_users/{name}/grants", priv: userAdmin, audit: "grant.add", handle: (*Server).addGrant},
		{method: "DELETE", pattern: "/_users/{name}/grants/{role}", priv: userAdmin, audit: "grant.remove", handle: (*Server).removeGrant},
		{method: "DELETE", pattern: "/_users/{name}/grants/{role}/{db}", priv: userAdmin, audit: "grant.remove", handle: (*Server).removeGrant},
		// Listing databases shows only those the caller may read.
		{method: "GET", pattern: "/_schemas", priv: authenticated, handle: (*Server).listDatabases},
		{method: "GET", pattern: "/_schemas/{db}", priv: read, handle: (*Server).getDatabase},
		{method: "PUT", pattern: "/_schemas/{db}", priv: dbAdmin, audit: "schema.put", handle: (*Server).putDatabase},
		{method: "DELETE", pattern: "/_schemas/{db}", priv: clusterAdmin, audit: "schema.drop", handle: (*Server).dropDatabase},
		{method: "GET", pattern: "/_schemas/{db}/{table}", priv: read, handle: (*Server).getTable},
		{method: "PUT", pattern: "/_schemas/{db}/{table}", priv: dbAdmin, audit: "schema.put", handle: (*Server).putTable},
		{method: "DELETE", pattern: "/_schemas/{db}/{table}", priv: dbAdmin, audit: "schema.drop", handle: (*Server).dropTable},
		{method: "GET", pattern: "/_schemas/{db}/{table}/versions/{version}", priv: read, handle: (*Server).getVersion},
		{method: "POST", pattern: "/{db}/_txn", priv: readWrite, handle: (*Server).txn},
		{method: "POST", pattern: "/{db}/_batch", priv: readWrite, handle: (*Server).batch},
		{method: "GET", pattern: "/{db}/{table}", priv: read, handle: (*Server).queryAll},
		{method: "GET", pattern: "/{db}/{table}/{key}", priv: read, handle: (*Server).read},
		{method: "PUT", pattern: "/{db}/{table}/{key}", priv: readWrite, handle: (*Server).put},
		{method: "PATCH", pattern: "/{db}/{table}/{key}", priv: readWrite, handle: (*Server).patch},
		{method: "POST", pattern: "/{db}/{table}/{key}", priv: readWrite, handle: (*Server).insert},
		{method: "DELETE", pattern: "/{db}/{table}/{key}", priv: readWrite, handle: (*Server).delete},
	}
	for _, r := range rs {
		r.segs = strings.Split(strings.TrimPrefix(r.pattern, "/"), "/")
	}
	return rs
}

// splitPath percent-decodes the segments of an escaped request path,
// rejecting empty, "." and ".." segments: a key part can hold any byte only
// when percent-encoded, and no path trick can address another resource.
func splitPath(escaped string) ([]string, error) {
	segs, _, err := splitPathRaw(escaped)
	return segs, err
}

// splitPathRaw is splitPath that also returns the segments as they came,
// still escaped.
func splitPathRaw(escaped string) (segs, raw []string, err error) {
	if !strings.HasPrefix(escaped, "/") {
		return nil, nil, problem.New(problem.Malformed, "path must start with /")
	}
	raw = strings.Split(escaped[1:], "/")
	segs = make([]string, len(raw))
	for i, s := range raw {
		if s == "" || s == "." || s == ".." {
			if i == len(raw)-1 && s == "" && i > 0 {
				return nil, nil, problem.New(problem.Malformed, "path ends with a slash")
			}
			return nil, nil, problem.New(problem.Malformed, "path segment %d is %q", i+1, s)
		}
		v, err := url.PathUnescape(s)
		if err != nil {
			return nil, nil, problem.New(problem.Malformed, "path segment %d is not percent-encoded correctly", i+1)
		}
		segs[i] = v
	}
	return segs, raw, nil
}

// match finds the route the REST listener serves for method and the
// escaped path; a known path with another method is NotAllowed, an
// unknown one NotFound.
func (s *Server) match(method, escaped string) (*route, params, error) {
	return s.rest.match(method, escaped)
}

// listener is what one of a server's listeners serves: the REST listener
// the public routes, the peer listener (other nodes, routers) every route.
type listener struct {
	routes routeTable
	// streamPrefixes: see streaming.
	streamPrefixes [][]byte
	// peer: requests come from nodes, their caller in peer.HeaderCaller.
	peer bool
}

func newListener(rs []*route, peer bool) *listener {
	if !peer {
		rs = slices.DeleteFunc(slices.Clone(rs), func(r *route) bool { return r.nodeOnly })
	}
	return &listener{routes: newRouteTable(rs), streamPrefixes: streamPrefixes(rs), peer: peer}
}

func (l *listener) match(method, escaped string) (*route, params, error) {
	return matchAmong(l.routes.candidates, method, escaped)
}

// matchAmong is match over the routes candidates gives for the path's
// first segment.
func matchAmong(candidates func(first string) []*route, method, escaped string) (*route, params, error) {
	if escaped == "/" {
		return nil, params{}, problem.New(problem.NotFound, "no resource at /")
	}
	segs, raw, err := splitPathRaw(escaped)
	if err != nil {
		return nil, params{}, err
	}
	pathKnown := false
	for _, rt := range candidates(segs[0]) {
		p, ok := rt.bind(segs, raw)
		if !ok {
			continue
		}
		if rt.method == method {
			return rt, p, nil
		}
		pathKnown = true
	}
	if pathKnown {
		return nil, params{}, problem.New(problem.NotAllowed, "%s is not allowed on %s", method, escaped)
	}
	return nil, params{}, problem.New(problem.NotFound, "no resource at %s", escaped)
}

// routeTable is the routes in their order of precedence, with the subset
// that can match a path indexed by the path's first segment: the routes
// whose pattern starts with that literal, and those that start with a
// parameter, still in order. A document request (the last patterns of the
// table) no longer tries to bind every route before it.
type routeTable struct {
	all     []*route
	byFirst map[string][]*route // literal first segment → candidates
	params  []*route            // candidates for any other first segment
}

func newRouteTable(rs []*route) routeTable {
	t := routeTable{all: rs, byFirst: map[string][]*route{}}
	for _, r := range rs {
		if first := r.segs[0]; !strings.HasPrefix(first, "{") {
			t.byFirst[first] = nil
		}
	}
	for _, r := range rs {
		first := r.segs[0]
		if strings.HasPrefix(first, "{") {
			t.params = append(t.params, r)
			for lit := range t.byFirst {
				t.byFirst[lit] = append(t.byFirst[lit], r)
			}
			continue
		}
		t.byFirst[first] = append(t.byFirst[first], r)
	}
	return t
}

// streaming reports whether a request for target (a request's raw target,
// query included) may be for a streaming route: its path starts with the
// literal part of a streaming route's pattern (as written: an escaped
// spelling of it is not recognized, and is then served like any other
// request, its disconnect noticed at the next write).
func (l *listener) streaming(target []byte) bool {
	for _, p := range l.streamPrefixes {
		if bytes.HasPrefix(target, p) {
			return true
		}
	}
	return false
}

// streamPrefixes lists the literal beginnings of the streaming routes'
// patterns, up to their first parameter.
func streamPrefixes(rs []*route) [][]byte {
	var out [][]byte
	for _, r := range rs {
		if r.stream {
			lit, _, _ := strings.Cut(r.pattern, "{")
			out = append(out, []byte(lit))
		}
	}
	return out
}

func (t routeTable) candidates(first string) []*route {
	if rs, ok := t.byFirst[first]; ok {
		return rs
	}
	return t.params
}

func (rt *route) bind(segs, raw []string) (params, bool) {
	var p params
	for i, pat := range rt.segs {
		if pat == "{key}" {
			if len(segs) <= i {
				return p, false
			}
			p.key = segs[i:]
			p.rawKey(raw[i:])
			return p, true
		}
		if i >= len(segs) {
			return p, false
		}
		switch pat {
		case "{db}":
			if strings.HasPrefix(segs[i], "_") {
				return p, false // reserved names are routes, never databases
			}
			p.db = segs[i]
		case "{table}":
			if strings.HasPrefix(segs[i], "_") {
				return p, false
			}
			p.table = segs[i]
		case "{version}":
			p.version = segs[i]
		case "{partition}":
			p.partition = segs[i]
		case "{name}":
			p.name = segs[i]
		case "{role}":
			p.role = segs[i]
		default:
			if segs[i] != pat {
				return p, false
			}
		}
	}
	return p, len(segs) == len(rt.segs)
}

// rawKey keeps the still-escaped last key segment so a multi-get list
// "(a,b,c)" splits on unescaped commas only.
func (p *params) rawKey(raw []string) { p.lastRaw = raw[len(raw)-1] }
