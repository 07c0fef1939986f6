package peer

import (
	"context"
	"fmt"
	"net/http"

	"github.com/doppio-db/doppio/internal/auth"
	"github.com/doppio-db/doppio/internal/certs"
)

// HeaderCaller names, on a request one node forwards to another's peer
// listener, the user the request runs as: the user the forwarding node
// authenticated. The REST listener never honours it.
const HeaderCaller = "X-Doppio-Caller"

// SetCaller makes req, which a node sends on behalf of the request whose
// context is ctx, carry that request's caller: its user, or no header
// (the receiving node then runs it as a node) when ctx carries no user.
func SetCaller(ctx context.Context, req *http.Request) {
	if c, ok := auth.CallerFrom(ctx); ok && !c.Node && c.User != "" {
		req.Header.Set(HeaderCaller, c.User)
		return
	}
	req.Header.Del(HeaderCaller)
}

// CallerOf returns the caller of a request the peer listener received:
// the user HeaderCaller names, or, without the header, the sending node
// itself. A header that names no valid user is an error.
func CallerOf(h http.Header) (auth.Caller, error) {
	vs := h.Values(HeaderCaller)
	switch {
	case len(vs) == 0:
		return auth.Caller{Node: true}, nil
	case len(vs) > 1:
		return auth.Caller{}, fmt.Errorf("%s appears %d times", HeaderCaller, len(vs))
	}
	if err := certs.ValidUser(vs[0]); err != nil {
		return auth.Caller{}, err
	}
	return auth.Caller{User: vs[0]}, nil
}
