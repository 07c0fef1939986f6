package certs

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// secureDir makes a local cluster's directory: a CA, a node certificate
// for loopback and root's client certificate.
func secureDir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	if _, err := EnsureDev(dir); err != nil {
		t.Fatal(err)
	}
	return dir
}

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// serveTLS accepts connections on loopback with cfg, completes each
// handshake and closes the connection.
func serveTLS(t *testing.T, cfg *tls.Config) string {
	t.Helper()
	ln, err := tls.Listen("tcp", "127.0.0.1:0", cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				_ = c.(*tls.Conn).Handshake()
				// Let a client see a refusal sent after its own
				// handshake messages (TLS 1.3 client certificates).
				_, _ = c.Read(make([]byte, 1))
			}()
		}
	}()
	return ln.Addr().String()
}

// handshake dials addr with cfg and returns the server's certificate, or
// the error the connection ends with (a TLS 1.3 server refuses a client
// certificate after the client's handshake is done: the first read says).
func handshake(addr string, cfg *tls.Config) (*x509.Certificate, error) {
	d := &net.Dialer{Timeout: 2 * time.Second}
	c, err := tls.DialWithDialer(d, "tcp", addr, cfg)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	c.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
	if _, err := c.Read(make([]byte, 1)); err != nil && !isTimeout(err) && !errors.Is(err, io.EOF) {
		return nil, err
	}
	return c.ConnectionState().PeerCertificates[0], nil
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

func trusting(t *testing.T, dir string) *tls.Config {
	t.Helper()
	pool := x509.NewCertPool()
	b, err := os.ReadFile(filepath.Join(dir, CAFile))
	if err != nil {
		t.Fatal(err)
	}
	pool.AppendCertsFromPEM(b)
	return &tls.Config{RootCAs: pool, ServerName: "127.0.0.1"}
}

func TestRotatedNodeCertificateIsServedWithoutRestart(t *testing.T) {
	dir := secureDir(t)
	l, err := NewLoader(dir, quiet())
	if err != nil {
		t.Fatal(err)
	}
	addr := serveTLS(t, l.ServerConfig(tls.VerifyClientCertIfGiven))
	before, err := handshake(addr, trusting(t, dir))
	if err != nil {
		t.Fatal(err)
	}
	if !before.Equal(l.Leaf()) {
		t.Fatal("the server does not present the loaded certificate")
	}

	// On demand (SIGHUP).
	if err := CreateNode(dir, []string{"127.0.0.1"}, Options{Overwrite: true}); err != nil {
		t.Fatal(err)
	}
	if err := l.Reload(); err != nil {
		t.Fatal(err)
	}
	second, err := handshake(addr, trusting(t, dir))
	if err != nil {
		t.Fatal(err)
	}
	if second.Equal(before) || !second.Equal(mustRead(t, filepath.Join(dir, NodeCertFile))) {
		t.Fatal("after Reload the server still presents the old certificate")
	}

	// On change, seen by Watch.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go l.Watch(ctx, 20*time.Millisecond)
	if err := CreateNode(dir, []string{"127.0.0.1"}, Options{Overwrite: true}); err != nil {
		t.Fatal(err)
	}
	third := mustRead(t, filepath.Join(dir, NodeCertFile))
	deadline := time.Now().Add(5 * time.Second)
	for {
		got, err := handshake(addr, trusting(t, dir))
		if err != nil {
			t.Fatal(err)
		}
		if got.Equal(third) {
			break
		}
		if !got.Equal(second) {
			t.Fatalf("server presents a certificate that is neither the old nor the new one: serial %v", got.SerialNumber)
		}
		if time.Now().After(deadline) {
			t.Fatal("Watch did not pick up the rotated certificate within 5 s")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestFailedReloadKeepsTheCurrentCertificate(t *testing.T) {
	dir := secureDir(t)
	l, err := NewLoader(dir, quiet())
	if err != nil {
		t.Fatal(err)
	}
	before := l.Leaf()
	addr := serveTLS(t, l.ServerConfig(tls.NoClientCert))

	// A key that does not match the certificate, as a rotation caught
	// half way leaves it.
	other := t.TempDir()
	if err := CreateCA(other, Options{}); err != nil {
		t.Fatal(err)
	}
	if err := CreateNode(other, []string{"127.0.0.1"}, Options{}); err != nil {
		t.Fatal(err)
	}
	key, err := os.ReadFile(filepath.Join(other, NodeKeyFile))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, NodeKeyFile), key, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := l.Reload(); err == nil || !strings.Contains(err.Error(), "private key does not match") {
		t.Fatalf("Reload with a mismatched key: %v", err)
	}
	// A node certificate of another CA.
	for _, f := range []string{NodeCertFile, NodeKeyFile} {
		b, _ := os.ReadFile(filepath.Join(other, f))
		if err := os.WriteFile(filepath.Join(dir, f), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.Reload(); err == nil || !strings.Contains(err.Error(), "is not signed by") {
		t.Fatalf("Reload with a certificate of another CA: %v", err)
	}
	got, err := handshake(addr, trusting(t, dir))
	if err != nil {
		t.Fatal(err)
	}
	if !got.Equal(before) || !l.Leaf().Equal(before) {
		t.Fatal("a failed reload replaced the certificate in use")
	}
}

func TestPeerListenerRefusesAllButNodeCertificatesOfItsCA(t *testing.T) {
	dir := secureDir(t)
	l, err := NewLoader(dir, quiet())
	if err != nil {
		t.Fatal(err)
	}
	addr := serveTLS(t, l.PeerServerConfig())

	foreign := secureDir(t)
	fl, err := NewLoader(foreign, quiet())
	if err != nil {
		t.Fatal(err)
	}
	withCert := func(d, crt, key string) *tls.Config {
		cfg := trusting(t, dir)
		c, err := tls.LoadX509KeyPair(filepath.Join(d, crt), filepath.Join(d, key))
		if err != nil {
			t.Fatal(err)
		}
		cfg.Certificates = []tls.Certificate{c}
		return cfg
	}
	for _, tc := range []struct {
		name string
		cfg  *tls.Config
		ok   bool
	}{
		{"node certificate of the cluster's CA", l.ClientConfig(), true},
		{"no client certificate", trusting(t, dir), false},
		{"a user's client certificate", withCert(dir, ClientCertFile(DevUser), ClientKeyFile(DevUser)), false},
		{"node certificate of another CA", withCert(foreign, NodeCertFile, NodeKeyFile), false},
	} {
		cfg := tc.cfg.Clone()
		cfg.ServerName = "127.0.0.1"
		_, err := handshake(addr, cfg)
		if tc.ok != (err == nil) {
			t.Errorf("%s: handshake error %v, want ok=%t", tc.name, err, tc.ok)
		}
	}
	// And the client side: a node of another cluster's server is not
	// trusted by this node.
	other := serveTLS(t, fl.PeerServerConfig())
	cfg := l.ClientConfig()
	cfg.ServerName = "127.0.0.1"
	if _, err := handshake(other, cfg); err == nil || !strings.Contains(err.Error(), "unknown authority") {
		t.Errorf("dialling another cluster's node: %v, want an unknown authority", err)
	}
	cfg.ServerName = "db9.example.com"
	if _, err := handshake(addr, cfg); err == nil || !strings.Contains(err.Error(), "db9.example.com") {
		t.Errorf("dialling a name the certificate does not hold: %v", err)
	}
}
