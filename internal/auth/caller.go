package auth

import "context"

// Caller is who sent a request, as the API authenticated it.
type Caller struct {
	// User names the authenticated user; "" when the node runs insecure,
	// where nobody is authenticated and everyone may do everything.
	User string
	// Node: the request came from a peer node or a router of the cluster
	// (its node certificate in secure mode), not from a user.
	Node bool
}

type callerKey struct{}

// WithCaller returns ctx carrying c.
func WithCaller(ctx context.Context, c Caller) context.Context {
	return context.WithValue(ctx, callerKey{}, c)
}

// CallerFrom returns the caller ctx carries, if any.
func CallerFrom(ctx context.Context) (Caller, bool) {
	c, ok := ctx.Value(callerKey{}).(Caller)
	return c, ok
}
