package certs

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/x509"
	"errors"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"
)

func TestNodeAndClientCertificatesVerifyAgainstTheirCA(t *testing.T) {
	dir := t.TempDir()
	if err := CreateCA(dir, Options{}); err != nil {
		t.Fatal(err)
	}
	if err := CreateNode(dir, []string{"localhost", "127.0.0.1", "db1.example.com"}, Options{}); err != nil {
		t.Fatal(err)
	}
	if err := CreateClient(dir, "alice", Options{}); err != nil {
		t.Fatal(err)
	}
	ca := mustRead(t, filepath.Join(dir, CAFile))
	pool := x509.NewCertPool()
	pool.AddCert(ca)

	node := mustRead(t, filepath.Join(dir, NodeCertFile))
	if node.Subject.CommonName != NodeCommonName {
		t.Errorf("node CommonName = %q", node.Subject.CommonName)
	}
	for _, host := range []string{"localhost", "127.0.0.1", "db1.example.com"} {
		if _, err := node.Verify(x509.VerifyOptions{Roots: pool, DNSName: host}); err != nil {
			t.Errorf("node certificate for %s: %v", host, err)
		}
	}
	if _, err := node.Verify(x509.VerifyOptions{Roots: pool, DNSName: "other.example.com"}); err == nil {
		t.Error("node certificate verified for a host it does not name")
	}
	if _, err := node.Verify(x509.VerifyOptions{Roots: pool, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
		t.Errorf("node certificate as a client (peer mTLS): %v", err)
	}
	if !node.IPAddresses[0].Equal(net.ParseIP("127.0.0.1")) {
		t.Errorf("node IP SANs = %v", node.IPAddresses)
	}
	if _, ok := node.PublicKey.(*ecdsa.PublicKey); !ok || node.PublicKey.(*ecdsa.PublicKey).Curve != elliptic.P256() {
		t.Errorf("node key is not ECDSA P-256: %T", node.PublicKey)
	}

	client := mustRead(t, filepath.Join(dir, ClientCertFile("alice")))
	if client.Subject.CommonName != "alice" {
		t.Errorf("client CommonName = %q", client.Subject.CommonName)
	}
	if _, err := client.Verify(x509.VerifyOptions{Roots: pool, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
		t.Errorf("client certificate: %v", err)
	}
	if _, err := client.Verify(x509.VerifyOptions{Roots: pool, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}); err == nil {
		t.Error("client certificate verified as a server certificate")
	}
	for _, f := range []string{CAKeyFile, NodeKeyFile, ClientKeyFile("alice")} {
		fi, err := os.Stat(filepath.Join(dir, f))
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm() != 0o600 {
			t.Errorf("%s mode = %v, want 0600", f, fi.Mode().Perm())
		}
	}
}

func TestCreateRefusesToOverwriteUnlessAsked(t *testing.T) {
	dir := t.TempDir()
	if err := CreateCA(dir, Options{}); err != nil {
		t.Fatal(err)
	}
	before := mustRead(t, filepath.Join(dir, CAFile))
	if err := CreateCA(dir, Options{}); !errors.Is(err, ErrExists) {
		t.Fatalf("second CreateCA: %v, want ErrExists", err)
	}
	if err := CreateNode(dir, []string{"localhost"}, Options{}); err != nil {
		t.Fatal(err)
	}
	if err := CreateNode(dir, []string{"localhost"}, Options{}); !errors.Is(err, ErrExists) {
		t.Fatalf("second CreateNode: %v, want ErrExists", err)
	}
	if got := mustRead(t, filepath.Join(dir, CAFile)); !got.Equal(before) {
		t.Fatal("a refused CreateCA changed ca.crt")
	}
	if err := CreateCA(dir, Options{Overwrite: true}); err != nil {
		t.Fatal(err)
	}
	if got := mustRead(t, filepath.Join(dir, CAFile)); got.Equal(before) {
		t.Fatal("CreateCA with Overwrite kept the old CA")
	}
}

func TestCertificateFromAnotherCADoesNotVerify(t *testing.T) {
	a, b := t.TempDir(), t.TempDir()
	for _, d := range []string{a, b} {
		if err := CreateCA(d, Options{}); err != nil {
			t.Fatal(err)
		}
	}
	if err := CreateClient(b, "mallory", Options{}); err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(mustRead(t, filepath.Join(a, CAFile)))
	c := mustRead(t, filepath.Join(b, ClientCertFile("mallory")))
	if _, err := c.Verify(x509.VerifyOptions{Roots: pool, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err == nil {
		t.Fatal("a certificate of CA b verified against CA a")
	}
}

func TestLeafNeverOutlivesItsCA(t *testing.T) {
	dir := t.TempDir()
	if err := CreateCA(dir, Options{Lifetime: 48 * time.Hour}); err != nil {
		t.Fatal(err)
	}
	if err := CreateClient(dir, "bob", Options{}); err != nil {
		t.Fatal(err)
	}
	ca, c := mustRead(t, filepath.Join(dir, CAFile)), mustRead(t, filepath.Join(dir, ClientCertFile("bob")))
	if c.NotAfter.After(ca.NotAfter) {
		t.Fatalf("client expires %v, after its CA (%v)", c.NotAfter, ca.NotAfter)
	}
}

func TestUserNames(t *testing.T) {
	for name, ok := range map[string]bool{
		"alice": true, "svc_orders-2.prod": true, "_x": true,
		"": false, "node": false, "-x": false, ".x": false, "a/b": false, "a b": false, "../ca": false,
	} {
		if err := ValidUser(name); (err == nil) != ok {
			t.Errorf("ValidUser(%q) = %v, want ok=%v", name, err, ok)
		}
	}
	if err := CreateClient(t.TempDir(), "../ca", Options{}); err == nil {
		t.Fatal("CreateClient accepted a path as a user name")
	}
}

func mustRead(t *testing.T, path string) *x509.Certificate {
	t.Helper()
	c, err := ReadCertificate(path)
	if err != nil {
		t.Fatal(err)
	}
	return c
}
