package api

import (
	"errors"
	"strings"
	"testing"

	"github.com/doppio-db/doppio/internal/problem"
)

// TestRESTListenerServesNoNodeOnlyRoute: the REST listener's table holds
// every public route and no node-only one; the peer listener's holds all.
func TestRESTListenerServesNoNodeOnlyRoute(t *testing.T) {
	rs := routes()
	rest, peer := newListener(rs, false), newListener(rs, true)
	if len(peer.routes.all) != len(rs) {
		t.Fatalf("the peer listener serves %d routes of %d", len(peer.routes.all), len(rs))
	}
	fill := strings.NewReplacer("{db}", "mail", "{table}", "Message", "{key}", "box1/7", "{version}", "2",
		"{partition}", "3", "{name}", "ds1")
	nodeOnly := 0
	for _, r := range rs {
		path := fill.Replace(r.pattern)
		got, _, err := rest.match(r.method, path)
		if r.nodeOnly {
			nodeOnly++
			if !strings.HasPrefix(r.pattern, "/_internal/") {
				t.Errorf("node-only route %s is not under /_internal/", r.pattern)
			}
			if pe, ok := problem.As(err); !ok || pe.Kind != problem.NotFound {
				t.Errorf("REST %s %s: %v, %v; want NotFound", r.method, path, pattern(got), err)
			}
		} else if got != r || err != nil {
			t.Errorf("REST %s %s: %v, %v; want %s", r.method, path, pattern(got), err, r.pattern)
		}
		if got, _, err := peer.match(r.method, path); got != r || err != nil {
			t.Errorf("peer %s %s: %v, %v; want %s", r.method, path, pattern(got), err, r.pattern)
		}
	}
	if nodeOnly != 4 {
		t.Errorf("%d node-only routes, want 4 (/_internal/replicas, check, query, drop)", nodeOnly)
	}
}

// TestRouteTableMatchesAsTheFullScanDid: for every route's pattern filled
// with sample values, and for paths where a literal route and a database
// named like it meet, every method resolves to the same route (or the same
// refusal) through the first-segment index as through trying every route
// in order.
func TestRouteTableMatchesAsTheFullScanDid(t *testing.T) {
	rs := routes()
	s := newListener(rs, true) // every route
	fill := strings.NewReplacer("{db}", "mail", "{table}", "Message", "{key}", "box1/7", "{version}", "2",
		"{partition}", "3", "{name}", "ds1")
	paths := []string{"/healthz", "/healthz/Message/k", "/metrics/t", "/readyz/t/k/2", "/_cluster/x",
		"/_unknown", "/_unknown/t/k", "/mail/_txn", "/mail/_batch", "/mail/_txn/x", "/mail", "/mail/Message",
		"/_schemas/mail/Message/versions", "/_datastreams/ds1/other", "/x/y/z/w/v"}
	for _, r := range rs {
		paths = append(paths, fill.Replace(r.pattern))
	}
	for _, path := range paths {
		for _, method := range []string{"GET", "PUT", "POST", "PATCH", "DELETE"} {
			got, gotP, gotErr := s.match(method, path)
			want, wantP, wantErr := fullScan(rs, method, path)
			if got != want || gotP.db != wantP.db || gotP.table != wantP.table || len(gotP.key) != len(wantP.key) {
				t.Errorf("%s %s: route %v %+v, the full scan gives %v %+v", method, path, pattern(got), gotP, pattern(want), wantP)
			}
			var ge, we *problem.Error
			if errors.As(gotErr, &ge) != errors.As(wantErr, &we) || (ge != nil && (ge.Kind != we.Kind || ge.Detail != we.Detail)) {
				t.Errorf("%s %s: error %v, the full scan gives %v", method, path, gotErr, wantErr)
			}
		}
	}
	if _, _, err := s.match("GET", "/mail/Message/box1/7"); err != nil {
		t.Fatalf("a document path does not match: %v", err)
	}
}

func pattern(r *route) string {
	if r == nil {
		return "<none>"
	}
	return r.method + " " + r.pattern
}

// fullScan is match as it was before the route table: every route in order.
func fullScan(rs []*route, method, escaped string) (*route, params, error) {
	return matchAmong(func(string) []*route { return rs }, method, escaped)
}
