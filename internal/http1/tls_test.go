package http1

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/doppio-db/doppio/internal/certs"
)

// tlsSetup makes a CA, a node certificate for loopback and root's
// client certificate; it returns the server's configuration (ALPN h2 and
// http/1.1, client certificates verified if given) and a client's that
// trusts the CA and presents root's certificate.
func tlsSetup(t *testing.T) (server, client *tls.Config) {
	t.Helper()
	dir := t.TempDir()
	if _, err := certs.EnsureDev(dir); err != nil {
		t.Fatal(err)
	}
	l, err := certs.NewLoader(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	b, _ := os.ReadFile(filepath.Join(dir, certs.CAFile))
	pool.AppendCertsFromPEM(b)
	root, err := tls.LoadX509KeyPair(filepath.Join(dir, certs.ClientCertFile(certs.DevUser)), filepath.Join(dir, certs.ClientKeyFile(certs.DevUser)))
	if err != nil {
		t.Fatal(err)
	}
	return l.ServerConfig(tls.VerifyClientCertIfGiven, "h2", "http/1.1"), &tls.Config{RootCAs: pool, Certificates: []tls.Certificate{root}}
}

// whoTLS answers "<server> <proto> <remote> <user>", the user being the
// verified client certificate's CommonName ("-" when there is none and
// "plain" when the request did not come over TLS).
var whoTLS = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
	io.Copy(io.Discard, r.Body)
	user := "plain"
	if r.TLS != nil {
		user = "-"
		if len(r.TLS.VerifiedChains) > 0 {
			user = r.TLS.VerifiedChains[0][0].Subject.CommonName
		}
	}
	fmt.Fprintf(w, "%s %s %s %s", via(r), r.Proto, r.RemoteAddr, user)
})

func tlsClient(cfg *tls.Config, h2 bool) *http.Client {
	tr := &http.Transport{TLSClientConfig: cfg.Clone(), ForceAttemptHTTP2: h2}
	if !h2 {
		tr.TLSClientConfig.NextProtos = []string{"http/1.1"}
	}
	return &http.Client{Transport: tr, Timeout: 5 * time.Second}
}

// get sends n requests and returns their answers' fields.
func get(t *testing.T, hc *http.Client, u string, n int) [][]string {
	t.Helper()
	var out [][]string
	for range n {
		resp, err := hc.Get(u)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("GET %s: %d %s", u, resp.StatusCode, b)
		}
		out = append(out, strings.Fields(string(b)))
	}
	return out
}

func TestTLSServesHTTP11HereHTTP2ByNetHTTPBothWithTheClientCertificate(t *testing.T) {
	for _, only := range []bool{false, true} {
		t.Run(fmt.Sprintf("FallbackOnly=%t", only), func(t *testing.T) {
			srv, cli := tlsSetup(t)
			addr, _ := start(t, whoTLS, func(s *Server) {
				s.TLSConfig, s.FallbackOnly = srv, only
				s.FallbackFor = func(target []byte) bool { return bytes.HasPrefix(target, []byte("/stream")) }
			})
			h1Via := "http1"
			if only {
				h1Via = "net/http"
			}
			for _, tc := range []struct {
				name, path string
				h2         bool
				want       []string // server, proto
			}{
				{"http/1.1", "/db/a", false, []string{h1Via, "HTTP/1.1"}},
				{"http/1.1 falling back", "/stream/a", false, []string{"net/http", "HTTP/1.1"}},
				{"h2", "/db/a", true, []string{"net/http", "HTTP/2.0"}},
			} {
				got := get(t, tlsClient(cli, tc.h2), "https://"+addr+tc.path, 3)
				for i, g := range got {
					if g[0] != tc.want[0] || g[1] != tc.want[1] || g[3] != certs.DevUser {
						t.Errorf("%s: answer %d = %v, want %v by root", tc.name, i, g, tc.want)
					}
				}
				// One connection: keep-alive (HTTP/1.1 here) or multiplexed (h2).
				if tc.path != "/stream/a" || only {
					if got[0][2] != got[2][2] {
						t.Errorf("%s: requests came from %s then %s, want one connection", tc.name, got[0][2], got[2][2])
					}
				}
			}
			// Without a client certificate: served, no user.
			anon := cli.Clone()
			anon.Certificates = nil
			if g := get(t, tlsClient(anon, false), "https://"+addr+"/db/a", 1)[0]; g[3] != "-" {
				t.Errorf("without a client certificate: %v", g)
			}
		})
	}
}

func TestPlainHTTPToTheTLSPortIsAnswered400(t *testing.T) {
	for _, only := range []bool{false, true} {
		srv, _ := tlsSetup(t)
		addr, _ := start(t, whoTLS, func(s *Server) { s.TLSConfig, s.FallbackOnly = srv, only })
		for _, method := range []string{"GET", "PUT", "DELETE", "PATCH"} {
			c, err := net.DialTimeout("tcp", addr, time.Second)
			if err != nil {
				t.Fatal(err)
			}
			c.SetDeadline(time.Now().Add(5 * time.Second))
			fmt.Fprintf(c, "%s /db/t/k HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n", method)
			b, err := io.ReadAll(c)
			c.Close()
			if err != nil {
				t.Fatalf("FallbackOnly=%t %s: %v after %q", only, method, err, b)
			}
			want := "HTTP/1.0 400 Bad Request\r\n"
			if !strings.HasPrefix(string(b), want) || !strings.Contains(string(b), "Client sent an HTTP request to an HTTPS server.") {
				t.Errorf("FallbackOnly=%t %s: got %q", only, method, b)
			}
		}
	}
}

func TestTLSClientAtThePlainPortFailsAtOnceSayingWhy(t *testing.T) {
	for _, only := range []bool{false, true} {
		_, cli := tlsSetup(t)
		addr, _ := start(t, whoTLS, func(s *Server) { s.FallbackOnly = only })
		begin := time.Now()
		_, err := tlsClient(cli, false).Get("https://" + addr + "/db/a")
		if err == nil || !strings.Contains(err.Error(), "server gave HTTP response to HTTPS client") || time.Since(begin) > 3*time.Second {
			t.Errorf("FallbackOnly=%t: %v after %v", only, err, time.Since(begin))
		}
		// Plain clients are still served.
		if g := get(t, &http.Client{Timeout: 5 * time.Second}, "http://"+addr+"/db/a", 2); g[1][3] != "plain" {
			t.Errorf("FallbackOnly=%t: plain request: %v", only, g)
		}
	}
}
