package client_test

import (
	"os/exec"
	"slices"
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
	"go.etcd.io/etcd":                                "etcd",
	"github.com/hamba/avro":                          "Avro",
	"github.com/doppio-db/doppio/internal/partition": "the partition engine",
}

func checkLight(t *testing.T, deps []string) {
	t.Helper()
	for _, d := range deps {
		for prefix, what := range heavy {
			if strings.HasPrefix(d, prefix) {
				t.Errorf("links %s (%s)", d, what)
			}
		}
	}
}

// builderPackage builds bulk loads in the application: it links the
// builder and with it Avro and Parquet, on purpose, and is held apart.
const builderPackage = "github.com/doppio-db/doppio/client/bulkbuild"

// lightPackages is every client package but builderPackage.
func lightPackages(t *testing.T) []string {
	t.Helper()
	out, err := exec.Command("go", "list", "./...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	return slices.DeleteFunc(strings.Fields(string(out)), func(p string) bool { return p == builderPackage })
}

// An application using the Go client, change-stream consumer included,
// links HTTP, the key encoding and the checkpoint format, not the server:
// consumer groups speak to etcd through its JSON gateway.
func TestClientLinksNoneOfTheServersDependencies(t *testing.T) {
	checkLight(t, goListDeps(t, lightPackages(t)...))
}

// An application that builds loads links the documents' encoding (Avro)
// and the input formats, still none of the server's runtime.
func TestBulkBuildLinksNoneOfTheServersRuntime(t *testing.T) {
	for _, d := range goListDeps(t, "./bulkbuild") {
		for prefix, what := range heavy {
			if strings.HasPrefix(d, prefix) && what != "Avro" {
				t.Errorf("links %s (%s)", d, what)
			}
		}
	}
}

// clientDeps is every package outside the standard library that the
// client packages link, exactly: a new one is a decision to make here,
// in review, not a side effect of an import.
var clientDeps = []string{
	"github.com/cespare/xxhash/v2",
	"github.com/doppio-db/doppio/client",
	"github.com/doppio-db/doppio/client/changes",
	"github.com/doppio-db/doppio/client/changes/internal/etcdhttp",
	"github.com/doppio-db/doppio/client/export",
	"github.com/doppio-db/doppio/client/wire",
	"github.com/doppio-db/doppio/internal/backoff",
	"github.com/doppio-db/doppio/internal/changes/checkpoint",
	"github.com/doppio-db/doppio/internal/keys",
	"github.com/doppio-db/doppio/internal/scn",
}

func TestClientLinksExactlyItsListedPackages(t *testing.T) {
	out, err := exec.Command("go", append([]string{"list", "-deps", "-f", "{{if not .Standard}}{{.ImportPath}}{{end}}"}, lightPackages(t)...)...).Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	got := strings.Fields(string(out))
	slices.Sort(got)
	if !slices.Equal(got, clientDeps) {
		t.Fatalf("the client packages link\n%s\nwant exactly\n%s", strings.Join(got, "\n"), strings.Join(clientDeps, "\n"))
	}
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
