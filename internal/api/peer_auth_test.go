package api_test

import (
	"encoding/json"
	"testing"

	"github.com/doppio-db/doppio/client/wire"
	"github.com/doppio-db/doppio/internal/auth"
)

// TestPeerListenerAuthorizesTheForwardedCaller runs a node with
// authentication on and sends, as another node would, requests to its
// peer listener: one without X-Doppio-Caller runs as the node (the
// node-only routes answer), one naming a user has exactly that user's
// rights (a forward never widens them); on the REST listener the header
// authenticates nobody.
func TestPeerListenerAuthorizesTheForwardedCaller(t *testing.T) {
	host, _ := secureNode(t, auth.Config{LoginBurst: 1 << 20})
	for _, db := range []string{"A", "B"} {
		expect(t, sendTo(t, host, "PUT", "/_schemas/"+db, `{"partitions":1}`, asRoot...), 201, "create "+db)
		expect(t, sendTo(t, host, "PUT", "/_schemas/"+db+"/T", authTable, asRoot...), 201, "create "+db+".T")
		expect(t, sendTo(t, host, "PUT", "/"+db+"/T/k1", `{"v":1}`, asRoot...), 201, "put "+db+"/T/k1")
	}
	expect(t, sendTo(t, host, "PUT", "/_users/reader", `{"password":"reader password"}`, asRoot...), 201, "create reader")
	expect(t, sendTo(t, host, "POST", "/_users/reader/grants", `{"role":"read","db":"A"}`, asRoot...), 201, "grant read on A")
	var info wire.ClusterInfo
	if err := json.Unmarshal(sendTo(t, host, "GET", "/_cluster", nil, asRoot...).body, &info); err != nil || len(info.Nodes) != 1 {
		t.Fatalf("/_cluster: %v %+v", err, info)
	}
	peer := info.Nodes[0].GRPC

	asReader := []string{"X-Doppio-Caller", "reader"}
	for _, c := range []struct {
		method, path string
		hdr          []string
		want         int
	}{
		{"GET", "/_internal/replicas", nil, 200},
		{"GET", "/A/T/k1", nil, 200},
		{"GET", "/A/T/k1", asReader, 200},
		{"GET", "/_internal/query/A/T/0?query=*", asReader, 200},
		{"GET", "/B/T/k1", asReader, 403},
		{"GET", "/_internal/query/B/T/0?query=*", asReader, 403},
		{"PUT", "/A/T/k2", asReader, 403},
		{"GET", "/_internal/replicas", asReader, 403},
		{"GET", "/A/T/k1", []string{"X-Doppio-Caller", "mallory"}, 403}, // no such user: no grants
	} {
		var body any
		if c.method == "PUT" {
			body = `{"v":2}`
		}
		expect(t, sendTo(t, peer, c.method, c.path, body, c.hdr...), c.want, "peer "+c.method+" "+c.path+" with "+headerText(c.hdr))
	}
	expect(t, sendTo(t, host, "GET", "/A/T/k2", nil, asRoot...), 404, "the refused write changed nothing")
	// On the REST listener the header proves nothing.
	expect(t, sendTo(t, host, "GET", "/A/T/k1", nil, asReader...), 401, "REST with X-Doppio-Caller and no credentials")
}

func headerText(h []string) string {
	if len(h) == 0 {
		return "no caller"
	}
	return h[0] + ": " + h[1]
}
