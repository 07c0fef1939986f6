package e2e

import (
	"context"
	"crypto/tls"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/doppio-db/doppio/client"
	"github.com/doppio-db/doppio/internal/certs"
	"github.com/doppio-db/doppio/internal/embedetcd"
)

// secureEnv switches the suite to secure mode when set to 1; `make test`
// runs the cluster tests a second time so (see the Makefile).
const secureEnv = "DOPPIO_E2E_SECURE"

// harnessMode is how the harness reaches what it starts: plain HTTP, or
// in secure mode TLS and authentication on every link, with one certs
// directory for the whole run. The tests ask it for URLs, process flags,
// clients and etcd, so none of them needs to know which mode it runs in.
type harnessMode struct {
	// certsDir holds the run's CA, a node certificate for every address
	// the harness listens on and root's client certificate; "" when
	// insecure.
	certsDir string
	// tls trusts the CA and presents root's client certificate, so every
	// request runs as root; nil when insecure.
	tls *tls.Config
	// http is the client of every request the tests make themselves.
	http *http.Client
	// peer is the client of the nodes' peer listeners (the gRPC port),
	// as a node is: in secure mode it presents the node certificate, and
	// it never offers HTTP/2, which on a peer port is the Raft transport.
	peer *http.Client
}

// mode is the run's mode, set once by TestMain before any test runs.
var mode = insecureMode()

func insecureMode() harnessMode {
	return harnessMode{http: http.DefaultClient, peer: &http.Client{Timeout: 30 * time.Second}}
}

// secureMode makes a certs directory under dir: a CA, one node
// certificate naming every address a process of the harness listens on
// (every node and router shares it), and root's client certificate.
func secureMode(dir string) (harnessMode, error) {
	dir = filepath.Join(dir, "certs")
	hosts := append([]string(nil), certs.DevHosts...)
	for i := 1; i <= maxNodeNumber; i++ {
		hosts = append(hosts, nodeHost(fmt.Sprintf("n%d", i)))
	}
	if err := certs.CreateCA(dir, certs.Options{}); err != nil {
		return harnessMode{}, err
	}
	if err := certs.CreateNode(dir, hosts, certs.Options{}); err != nil {
		return harnessMode{}, err
	}
	if err := certs.CreateClient(dir, certs.DevUser, certs.Options{}); err != nil {
		return harnessMode{}, err
	}
	cfg, err := certs.ClientTLS(dir, certs.DevUser)
	if err != nil {
		return harnessMode{}, err
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.TLSClientConfig = cfg.Clone()
	node, err := tls.LoadX509KeyPair(filepath.Join(dir, certs.NodeCertFile), filepath.Join(dir, certs.NodeKeyFile))
	if err != nil {
		return harnessMode{}, err
	}
	ptr := http.DefaultTransport.(*http.Transport).Clone()
	ptr.ForceAttemptHTTP2 = false
	ptr.TLSNextProto = map[string]func(string, *tls.Conn) http.RoundTripper{}
	ptr.TLSClientConfig = &tls.Config{MinVersion: certs.MinVersion, RootCAs: cfg.RootCAs,
		Certificates: []tls.Certificate{node}, NextProtos: []string{"http/1.1"}}
	return harnessMode{certsDir: dir, tls: cfg, http: &http.Client{Transport: tr},
		peer: &http.Client{Transport: ptr, Timeout: 30 * time.Second}}, nil
}

// modeFromEnv is secure mode (certificates under dir) when secureEnv is
// 1, insecure mode when it is unset or empty.
func modeFromEnv(dir string) (harnessMode, error) {
	switch v := os.Getenv(secureEnv); v {
	case "":
		return insecureMode(), nil
	case "1":
		return secureMode(dir)
	default:
		return harnessMode{}, fmt.Errorf("%s=%q: want 1 or nothing", secureEnv, v)
	}
}

func (m harnessMode) secure() bool { return m.certsDir != "" }

// url is the base URL of a process listening at addr (host:port).
func (m harnessMode) url(addr string) string {
	if m.secure() {
		return "https://" + addr
	}
	return "http://" + addr
}

// args are the binary's arguments in this mode: in secure mode every
// process (dev, start, router) serves with the run's certificates and
// every client command speaks TLS as root.
func (m harnessMode) args(args []string) []string {
	if !m.secure() {
		return args
	}
	return append(append([]string(nil), args...), "--certs-dir", m.certsDir)
}

// clientOptions make a Go client speak this mode (give an m.url base).
func (m harnessMode) clientOptions() []client.Option {
	if !m.secure() {
		return nil
	}
	return []client.Option{client.WithTLS(m.tls)}
}

// transport carries the tests' requests; a test wrapping it (to watch
// requests) keeps the mode's TLS.
func (m harnessMode) transport() http.RoundTripper {
	if m.http.Transport == nil {
		return http.DefaultTransport
	}
	return m.http.Transport
}

// startEtcd starts an etcd member in the test process under dir, serving
// TLS with the node certificate in secure mode; it is closed when the
// test ends.
func (m harnessMode) startEtcd(t *testing.T, dir string) *embedetcd.Server {
	t.Helper()
	etcd, err := embedetcd.StartSecure(context.Background(), dir, m.certsDir, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { etcd.Close() })
	return etcd
}

// etcdClient is a client of the etcd at endpoint, with the node
// certificate in secure mode (etcd's client port admits nodes only).
func (m harnessMode) etcdClient(t *testing.T, endpoint string) *clientv3.Client {
	t.Helper()
	var nodeTLS *tls.Config
	if m.certsDir != "" {
		l, err := certs.NewLoader(m.certsDir, slog.New(slog.DiscardHandler))
		if err != nil {
			t.Fatal(err)
		}
		nodeTLS = l.ClientConfig()
	}
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{endpoint}, DialTimeout: 5 * time.Second, TLS: nodeTLS})
	if err != nil {
		t.Fatal(err)
	}
	return cli
}

// hostPort is the host:port of a base URL made by url.
func hostPort(base string) string {
	if rest, ok := strings.CutPrefix(base, "https://"); ok {
		return rest
	}
	return strings.TrimPrefix(base, "http://")
}
