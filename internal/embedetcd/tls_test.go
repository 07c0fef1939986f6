package embedetcd

import (
	"context"
	"crypto/tls"
	"io"
	"log/slog"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/doppio-db/doppio/internal/certs"
)

func certsDir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	if _, err := certs.EnsureDev(dir); err != nil {
		t.Fatal(err)
	}
	return dir
}

// withCert is the cluster's client configuration presenting the
// certificate in files crt and key of dir instead of the node's.
func withCert(t *testing.T, base *tls.Config, dir, crt, key string) *tls.Config {
	t.Helper()
	kp, err := tls.LoadX509KeyPair(filepath.Join(dir, crt), filepath.Join(dir, key))
	if err != nil {
		t.Fatal(err)
	}
	cfg := base.Clone()
	cfg.GetClientCertificate = nil
	cfg.Certificates = []tls.Certificate{kp}
	return cfg
}

func TestSecureMemberServesCertificatesOfItsCAOnly(t *testing.T) {
	dir := certsDir(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := StartSecure(ctx, t.TempDir(), dir, testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ep := s.Endpoints()[0]
	if !strings.HasPrefix(ep, "https://") {
		t.Fatalf("endpoint %s is not https", ep)
	}
	l, err := certs.NewLoader(dir, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	node := l.ClientConfig()
	cli, err := clientv3.New(clientv3.Config{Endpoints: s.Endpoints(), DialTimeout: 5 * time.Second, TLS: node})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	if _, err := cli.Put(ctx, "k", "v"); err != nil {
		t.Fatalf("a node's put: %v", err)
	}

	// The client port admits node certificates alone: a user's, though
	// signed by the cluster's CA, would reach the users and their grants.
	foreign := certsDir(t)
	for _, tc := range []struct {
		name string
		cfg  *tls.Config
		ok   bool
	}{
		{"node certificate", node, true},
		{"a user's client certificate", withCert(t, node, dir, certs.ClientCertFile(certs.DevUser), certs.ClientKeyFile(certs.DevUser)), false},
		{"a node certificate of another CA", withCert(t, node, foreign, certs.NodeCertFile, certs.NodeKeyFile), false},
	} {
		c, err := clientv3.New(clientv3.Config{Endpoints: s.Endpoints(), DialTimeout: 2 * time.Second, TLS: tc.cfg})
		if err == nil {
			gctx, gcancel := context.WithTimeout(ctx, 2*time.Second)
			_, err = c.Get(gctx, "k")
			gcancel()
			c.Close()
		}
		if tc.ok != (err == nil) {
			t.Errorf("client port, %s: %v", tc.name, err)
		}
	}
	// Nor does any other certificate reach the port over HTTP, where
	// etcd's JSON gateway would be: the handshake refuses it.
	for _, tc := range []struct {
		name string
		cfg  *tls.Config
	}{
		{"a user's client certificate", withCert(t, node, dir, certs.ClientCertFile(certs.DevUser), certs.ClientKeyFile(certs.DevUser))},
		{"no client certificate", withCert(t, node, dir, certs.NodeCertFile, certs.NodeKeyFile).Clone()},
	} {
		if tc.name == "no client certificate" {
			tc.cfg.Certificates = nil
		}
		hc := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: tc.cfg}}
		resp, err := hc.Post(ep+"/v3/kv/range", "application/json", strings.NewReader(`{"key":"aw=="}`))
		if err == nil {
			resp.Body.Close()
			t.Errorf("JSON gateway, %s: %s", tc.name, resp.Status)
		}
	}
	// The peer port admits nodes alone.
	peer := s.etcd.Config().AdvertisePeerUrls[0].String()
	for _, tc := range []struct {
		name string
		cfg  *tls.Config
		ok   bool
	}{
		{"node certificate", node, true},
		{"a user's client certificate", withCert(t, node, dir, certs.ClientCertFile(certs.DevUser), certs.ClientKeyFile(certs.DevUser)), false},
	} {
		hc := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: tc.cfg}}
		resp, err := hc.Get(peer + "/version")
		if err == nil {
			resp.Body.Close()
		}
		if tc.ok != (err == nil) {
			t.Errorf("peer port, %s: %v", tc.name, err)
		}
	}
	// Plaintext to the TLS port fails, quickly.
	plain, err := clientv3.New(clientv3.Config{Endpoints: []string{strings.Replace(ep, "https://", "http://", 1)}, DialTimeout: 2 * time.Second})
	if err == nil {
		pctx, pcancel := context.WithTimeout(ctx, 2*time.Second)
		_, err = plain.Get(pctx, "k")
		pcancel()
		plain.Close()
	}
	if err == nil {
		t.Fatal("a plaintext client read from the TLS member")
	}
}
