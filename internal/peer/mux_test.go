package peer

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/doppio-db/doppio/internal/certs"
	"github.com/doppio-db/doppio/internal/http1"
)

// port is a Mux on a loopback port with a real gRPC server (the health
// service) on its GRPC side and an internal/http1 server on its HTTP side
// answering "peer http <path>".
type port struct {
	mux *Mux
}

func startPort(t *testing.T, cfg Config) *port {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	m := NewMux(ln, cfg)
	gs := grpc.NewServer()
	healthpb.RegisterHealthServer(gs, health.NewServer())
	go func() { _ = gs.Serve(m.GRPC()) }()
	hs := http1.New(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, "peer http "+r.URL.Path)
	}), slog.New(slog.DiscardHandler))
	go func() { _ = hs.Serve(m.HTTP()) }()
	t.Cleanup(func() {
		gs.Stop()
		_ = hs.Close()
		_ = m.Close()
	})
	return &port{mux: m}
}

func (p *port) addr() string { return p.mux.Addr().String() }

// checkGRPC makes one health call over a new connection.
func checkGRPC(t *testing.T, addr string, creds credentials.TransportCredentials) error {
	t.Helper()
	cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(creds))
	if err != nil {
		return err
	}
	defer cc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	resp, err := healthpb.NewHealthClient(cc).Check(ctx, &healthpb.HealthCheckRequest{})
	if err != nil {
		return err
	}
	if resp.Status != healthpb.HealthCheckResponse_SERVING {
		return errors.New("health: " + resp.Status.String())
	}
	return nil
}

// getHTTP fetches path from the peer HTTP server over a new connection.
func getHTTP(t *testing.T, c *Client, addr, path string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.URL(addr, path), nil)
	if err != nil {
		return "", err
	}
	resp, err := c.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if resp.ProtoMajor != 1 {
		return "", errors.New("answered over " + resp.Proto)
	}
	return string(b), err
}

func TestPlaintextDispatchesByPreface(t *testing.T) {
	p := startPort(t, Config{})
	if err := checkGRPC(t, p.addr(), insecure.NewCredentials()); err != nil {
		t.Fatalf("gRPC through the mux: %v", err)
	}
	got, err := getHTTP(t, NewClient(nil), p.addr(), "/_internal/replicas")
	if err != nil || got != "peer http /_internal/replicas" {
		t.Fatalf("HTTP through the mux: %q, %v", got, err)
	}
}

func TestGarbageGoesToHTTPAndIsRefused(t *testing.T) {
	p := startPort(t, Config{})
	for _, garbage := range []string{
		"\x00\x01\x02\xff garbage\r\n\r\n",
		"PRI *\x00HTTP/2.0\r\n\r\nSM\r\n\r\n", // the preface, spoiled
		"PRI",                                 // a prefix of it, then the client half-closes
	} {
		c, err := net.Dial("tcp", p.addr())
		if err != nil {
			t.Fatal(err)
		}
		_ = c.SetDeadline(time.Now().Add(5 * time.Second))
		if _, err := io.WriteString(c, garbage); err != nil {
			t.Fatal(err)
		}
		_ = c.(*net.TCPConn).CloseWrite()
		line, err := bufio.NewReader(c).ReadString('\n')
		c.Close()
		if !strings.HasPrefix(line, "HTTP/1.1 400 ") {
			t.Errorf("%q: answered %q (%v), want a 400", garbage, line, err)
		}
	}
	// The mux still serves.
	if err := checkGRPC(t, p.addr(), insecure.NewCredentials()); err != nil {
		t.Fatalf("gRPC after garbage: %v", err)
	}
}

func TestSilentConnectionDoesNotBlockOthers(t *testing.T) {
	p := startPort(t, Config{HandshakeTimeout: 300 * time.Millisecond})
	silent, err := net.Dial("tcp", p.addr())
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()
	partial, err := net.Dial("tcp", p.addr())
	if err != nil {
		t.Fatal(err)
	}
	defer partial.Close()
	if _, err := io.WriteString(partial, preface[:10]); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if err := checkGRPC(t, p.addr(), insecure.NewCredentials()); err != nil {
		t.Fatalf("gRPC beside a silent connection: %v", err)
	}
	if got, err := getHTTP(t, NewClient(nil), p.addr(), "/x"); err != nil || got != "peer http /x" {
		t.Fatalf("HTTP beside a silent connection: %q, %v", got, err)
	}
	if d := time.Since(start); d >= 300*time.Millisecond {
		t.Errorf("the other connections waited %v, as long as the silent one's timeout", d)
	}
	// The silent connection is closed once its time to speak is over.
	_ = silent.SetReadDeadline(time.Now().Add(5 * time.Second))
	if n, err := silent.Read(make([]byte, 1)); n != 0 || !errors.Is(err, io.EOF) {
		t.Errorf("silent connection: read %d, %v; want it closed by the mux", n, err)
	}
}

// clusterTLS makes a CA and a node certificate in a temporary directory
// and returns the node's server and client configurations (mutual TLS:
// the server requires a certificate of the CA).
func clusterTLS(t *testing.T, dir string) (server, client *tls.Config) {
	t.Helper()
	if err := certs.CreateCA(dir, certs.Options{}); err != nil {
		t.Fatal(err)
	}
	if err := certs.CreateNode(dir, []string{"127.0.0.1", "localhost"}, certs.Options{}); err != nil {
		t.Fatal(err)
	}
	return tlsConfigs(t, dir, filepath.Join(dir, certs.NodeCertFile), filepath.Join(dir, certs.NodeKeyFile))
}

func tlsConfigs(t *testing.T, dir, certFile, keyFile string) (server, client *tls.Config) {
	t.Helper()
	pair, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		t.Fatal(err)
	}
	pem, err := os.ReadFile(filepath.Join(dir, certs.CAFile))
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(pem)
	server = &tls.Config{Certificates: []tls.Certificate{pair}, ClientCAs: pool, ClientAuth: tls.RequireAndVerifyClientCert, MinVersion: tls.VersionTLS13}
	client = &tls.Config{Certificates: []tls.Certificate{pair}, RootCAs: pool, MinVersion: tls.VersionTLS13}
	return server, client
}

// dialer dials with cfg and no ALPN, as certs.Loader.DialTLS does.
func dialer(cfg *tls.Config) func(ctx context.Context, network, addr string) (net.Conn, error) {
	return (&tls.Dialer{Config: cfg}).DialContext
}

func TestTLSDispatchesByALPN(t *testing.T) {
	dir := t.TempDir()
	serverTLS, clientTLS := clusterTLS(t, dir)
	p := startPort(t, Config{TLS: serverTLS, HandshakeTimeout: 2 * time.Second})

	// A silent TCP connection, mid-handshake for ever, blocks nobody.
	silent, err := net.Dial("tcp", p.addr())
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()

	if err := checkGRPC(t, p.addr(), credentials.NewTLS(clientTLS)); err != nil {
		t.Fatalf("gRPC over TLS (ALPN h2): %v", err)
	}
	got, err := getHTTP(t, NewClient(dialer(clientTLS)), p.addr(), "/_internal/check")
	if err != nil || got != "peer http /_internal/check" {
		t.Fatalf("HTTP over TLS (ALPN http/1.1): %q, %v", got, err)
	}

	// No ALPN at all is HTTP too.
	noALPN := clientTLS.Clone()
	noALPN.ServerName = "127.0.0.1"
	c, err := tls.Dial("tcp", p.addr(), noALPN)
	if err != nil {
		t.Fatal(err)
	}
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.WriteString(c, "GET /plain HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(c)
	c.Close()
	if !strings.HasPrefix(string(b), "HTTP/1.1 200 ") || !strings.HasSuffix(string(b), "peer http /plain") {
		t.Errorf("TLS without ALPN: %q, want the HTTP server's 200", b)
	}

	// Plaintext to the TLS port: a clear failure, not a hang.
	if _, err := getHTTP(t, NewClient(nil), p.addr(), "/x"); err == nil {
		t.Error("plaintext HTTP to the TLS port was answered")
	}

	// A client certificate of another CA is refused at the handshake.
	other := t.TempDir()
	_, otherTLS := clusterTLS(t, other)
	otherTLS.RootCAs = clientTLS.RootCAs // it trusts our CA, we do not trust its
	if _, err := getHTTP(t, NewClient(dialer(otherTLS)), p.addr(), "/x"); err == nil {
		t.Error("a certificate of another CA was accepted")
	}
}
