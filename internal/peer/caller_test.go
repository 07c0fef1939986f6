package peer

import (
	"context"
	"net/http"
	"testing"

	"github.com/doppio-db/doppio/internal/auth"
)

func TestCallerOfHeader(t *testing.T) {
	for _, tc := range []struct {
		values []string
		want   auth.Caller
		bad    bool
	}{
		{values: nil, want: auth.Caller{Node: true}},
		{values: []string{"alice"}, want: auth.Caller{User: "alice"}},
		{values: []string{"node"}, bad: true}, // reserved for node certificates
		{values: []string{""}, bad: true},
		{values: []string{"a b"}, bad: true},
		{values: []string{"alice", "root"}, bad: true},
	} {
		h := http.Header{}
		for _, v := range tc.values {
			h.Add(HeaderCaller, v)
		}
		got, err := CallerOf(h)
		if tc.bad != (err != nil) || got != tc.want {
			t.Errorf("%q: got %+v, %v; want %+v (refused: %v)", tc.values, got, err, tc.want, tc.bad)
		}
	}
}

func TestSetCallerCarriesOnlyAUser(t *testing.T) {
	for _, tc := range []struct {
		name string
		ctx  context.Context
		want string
	}{
		{"user", auth.WithCaller(context.Background(), auth.Caller{User: "bob"}), "bob"},
		{"node", auth.WithCaller(context.Background(), auth.Caller{Node: true}), ""},
		{"insecure", auth.WithCaller(context.Background(), auth.Caller{}), ""},
		{"none", context.Background(), ""},
	} {
		req, _ := http.NewRequest(http.MethodGet, "http://x/", nil)
		req.Header.Set(HeaderCaller, "root") // copied from the incoming request
		SetCaller(tc.ctx, req)
		if got := req.Header.Get(HeaderCaller); got != tc.want || len(req.Header.Values(HeaderCaller)) > 1 {
			t.Errorf("%s: header %q, want %q", tc.name, req.Header.Values(HeaderCaller), tc.want)
		}
	}
}
