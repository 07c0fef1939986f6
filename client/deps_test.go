package client_test

import (
	"os/exec"
	"strings"
	"testing"
)

// goListDeps returns every package the packages named link, per go list.
func goListDeps(t *testing.T, pkgs ...string) []string {
	t.Helper()
	out, err := exec.Command("go", append([]string{"list", "-deps"}, pkgs...)...).Output()
	if err != nil {
		if ee, ok := err.(*exec.ExitError); ok {
			t.Fatalf("go list -deps %v: %v\n%s", pkgs, err, ee.Stderr)
		}
		t.Fatalf("go list -deps %v: %v", pkgs, err)
	}
	return strings.Fields(string(out))
}

// heavy names the server's dependencies by import-path prefix.
var heavy = map[string]string{
	"github.com/cockroachdb/pebble":                  "Pebble",
	"go.etcd.io/raft":                                "Raft",
	"google.golang.org/grpc":                         "gRPC",
	"github.com/prometheus/":                         "Prometheus",
	"go.etcd.io/etcd/server":                         "the etcd server",
	"go.etcd.io/etcd/client":                         "the etcd client",
	"github.com/hamba/avro":                          "Avro",
	"github.com/doppio-db/doppio/internal/partition": "the partition engine",
}

func checkLight(t *testing.T, deps []string, allowed ...string) {
	t.Helper()
	for _, d := range deps {
		for prefix, what := range heavy {
			if strings.HasPrefix(d, prefix) && !hasPrefix(d, allowed) {
				t.Errorf("links %s (%s)", d, what)
			}
		}
	}
}

func hasPrefix(s string, prefixes []string) bool {
	for _, p := range prefixes {
		if strings.HasPrefix(s, p) {
			return true
		}
	}
	return false
}

// An application using the Go client links HTTP and the key encoding,
// not the server.
func TestClientLinksNoneOfTheServersDependencies(t *testing.T) {
	checkLight(t, goListDeps(t, "."))
}

// The change-stream consumer's groups and checkpoint stores live in etcd,
// so it links the etcd client and gRPC under it, but never the etcd
// server or Raft. It still links Pebble, Prometheus and Avro through
// internal/changes' checkpoint codec (its positions hold partition.SCN);
// moving that codec and the SCN to a leaf package lifts this allowance.
func TestChangeConsumerLinksNeitherRaftNorTheEtcdServer(t *testing.T) {
	checkLight(t, goListDeps(t, "./changes"),
		"go.etcd.io/etcd/client", "google.golang.org/grpc",
		"github.com/cockroachdb/pebble", "github.com/prometheus/", "github.com/hamba/avro",
		"github.com/doppio-db/doppio/internal/partition")
}

// The server speaks to clients over HTTP; it does not link the public
// client (the wire types in client/wire are a stdlib-only package).
func TestServerDoesNotLinkThePublicClient(t *testing.T) {
	for _, d := range goListDeps(t, "../internal/node", "../internal/api") {
		if d == "github.com/doppio-db/doppio/client" || strings.HasPrefix(d, "github.com/doppio-db/doppio/client/changes") {
			t.Errorf("the server links %s", d)
		}
	}
}
