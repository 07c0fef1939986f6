package main

import (
	"strings"
	"testing"
)

// TestHTTPServerFlagIsReadOnNodesAndRouters: start and router take
// --http-server fast-path|net-http, and refuse any other value before
// anything starts.
func TestHTTPServerFlagIsReadOnNodesAndRouters(t *testing.T) {
	for _, v := range []struct {
		in      string
		netHTTP bool
	}{{"fast-path", false}, {"net-http", true}} {
		got, err := netHTTPOnly(v.in)
		if err != nil || got != v.netHTTP {
			t.Fatalf("netHTTPOnly(%q) = %v, %v", v.in, got, err)
		}
	}
	for _, args := range [][]string{
		{"router", "--etcd", "http://127.0.0.1:1", "--http-server", "bogus"},
		{"start", "--id", "n1", "--data", t.TempDir(), "--http-server", "bogus"},
	} {
		out, err := execRoot(t, args...)
		if err == nil || !strings.Contains(err.Error(), `--http-server "bogus": want fast-path or net-http`) {
			t.Fatalf("%v: %v\n%s", args, err, out)
		}
	}
}
