package node

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/doppio-db/doppio/internal/certs"
)

func quietLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// certsFor makes a CA, a node certificate for loopback and root's client
// certificate in a new directory.
func certsFor(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	if _, err := certs.EnsureDev(dir); err != nil {
		t.Fatal(err)
	}
	return dir
}

// httpsClient trusts dir's CA and presents root's certificate; h2 says
// whether it offers HTTP/2.
func httpsClient(t *testing.T, dir string, h2 bool) *http.Client {
	t.Helper()
	pool := x509.NewCertPool()
	b, err := os.ReadFile(filepath.Join(dir, certs.CAFile))
	if err != nil {
		t.Fatal(err)
	}
	pool.AppendCertsFromPEM(b)
	kp, err := tls.LoadX509KeyPair(filepath.Join(dir, certs.ClientCertFile("root")), filepath.Join(dir, certs.ClientKeyFile("root")))
	if err != nil {
		t.Fatal(err)
	}
	cfg := &tls.Config{RootCAs: pool, Certificates: []tls.Certificate{kp}}
	if !h2 {
		cfg.NextProtos = []string{"http/1.1"}
	}
	return &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: cfg, ForceAttemptHTTP2: h2}}
}

func call(t *testing.T, hc *http.Client, method, url, body string) (int, string, *http.Response) {
	t.Helper()
	req, _ := http.NewRequest(method, url, strings.NewReader(body))
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	return resp.StatusCode, string(b), resp
}

func TestSecureNodeServesTheAPIOverTLSAndReloadsItsCertificate(t *testing.T) {
	for _, netHTTP := range []bool{false, true} {
		t.Run(fmt.Sprintf("NetHTTPOnly=%t", netHTTP), func(t *testing.T) {
			dir := certsFor(t)
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			n, err := Start(ctx, Config{DataDir: t.TempDir(), HTTPAddr: "127.0.0.1:0", NetHTTPOnly: netHTTP, CertsDir: dir, Logger: quietLogger()})
			if err != nil {
				t.Fatal(err)
			}
			defer n.Close()
			if !n.Secure() || !strings.HasPrefix(n.etcdEndpoints()[0], "https://") {
				t.Fatalf("secure=%t etcd %v", n.Secure(), n.etcdEndpoints())
			}
			base := "https://" + n.Addr()
			for _, h2 := range []bool{false, true} {
				hc := httpsClient(t, dir, h2)
				db := fmt.Sprintf("db%t", h2)
				for _, s := range []struct{ method, path, body string }{
					{"PUT", "/_schemas/" + db, `{"partitions":1,"replicas":1}`},
					{"PUT", "/_schemas/" + db + "/T", `{"key":[{"name":"id","type":"string"}],"schema":{"type":"record","name":"T","fields":[{"name":"v","type":"long"}]}}`},
					{"PUT", "/" + db + "/T/a", `{"v":7}`},
				} {
					if code, b, _ := call(t, hc, s.method, base+s.path, s.body); code >= 300 {
						t.Fatalf("%s %s: %d %s", s.method, s.path, code, b)
					}
				}
				code, b, resp := call(t, hc, "GET", base+"/"+db+"/T/a", "")
				if code != 200 || !strings.Contains(b, `"v":7`) {
					t.Fatalf("GET: %d %s", code, b)
				}
				if want := map[bool]int{false: 1, true: 2}[h2]; resp.ProtoMajor != want {
					t.Errorf("answered over HTTP/%d, want HTTP/%d", resp.ProtoMajor, want)
				}
			}
			hc := httpsClient(t, dir, false)
			if !netHTTP {
				// A router in secure mode: TLS to its clients, to etcd and
				// to the node it forwards to.
				rt, err := StartRouter(ctx, RouterConfig{HTTPAddr: "127.0.0.1:0", EtcdEndpoints: n.etcdEndpoints(), CertsDir: dir, Logger: quietLogger()})
				if err != nil {
					t.Fatal(err)
				}
				defer rt.Close()
				code, b, _ := call(t, hc, "GET", "https://"+rt.Addr()+"/dbfalse/T/a", "")
				if code != 200 || !strings.Contains(b, `"v":7`) {
					t.Fatalf("GET through the router: %d %s", code, b)
				}
				if code, b, _ := call(t, hc, "GET", "https://"+rt.Addr()+"/_schemas/dbtrue", ""); code != 200 {
					t.Fatalf("schema relayed by the router: %d %s", code, b)
				}
			}
			if _, b, _ := call(t, hc, "GET", base+"/_cluster", ""); !strings.Contains(b, `"insecure":false`) {
				t.Errorf("/_cluster: %s", b)
			}
			if _, b, _ := call(t, hc, "GET", base+"/metrics", ""); !strings.Contains(b, "\ndoppio_insecure 0\n") {
				t.Error("/metrics lacks doppio_insecure 0")
			}

			// Plain HTTP to the port: a clear 400, not a hang.
			resp, err := (&http.Client{Timeout: 5 * time.Second}).Get("http://" + n.Addr() + "/_cluster")
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 400 || !strings.Contains(string(b), "HTTP request to an HTTPS server") {
				t.Errorf("plain HTTP: %d %q", resp.StatusCode, b)
			}

			// Rotation: a new node certificate, reloaded on demand, is
			// what the next handshake presents.
			if err := certs.CreateNode(dir, []string{"localhost", "127.0.0.1"}, certs.Options{Overwrite: true}); err != nil {
				t.Fatal(err)
			}
			if err := n.ReloadCertificates(); err != nil {
				t.Fatal(err)
			}
			want, err := certs.ReadCertificate(filepath.Join(dir, certs.NodeCertFile))
			if err != nil {
				t.Fatal(err)
			}
			_, _, resp = call(t, httpsClient(t, dir, false), "GET", base+"/healthz", "")
			if got := resp.TLS.PeerCertificates[0]; !got.Equal(want) {
				t.Errorf("after the reload the node presents serial %x, want %x", got.SerialNumber, want.SerialNumber)
			}
		})
	}
}

func TestInsecureOffLoopbackIsAnExplicitChoice(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, err := Start(ctx, Config{DataDir: t.TempDir(), HTTPAddr: "0.0.0.0:0", Logger: quietLogger()})
	if err == nil || !strings.Contains(err.Error(), "refusing to listen on 0.0.0.0:0 without TLS") {
		t.Fatalf("insecure on every interface: %v", err)
	}
	_, err = Start(ctx, Config{DataDir: t.TempDir(), HTTPAddr: "127.0.0.1:0", GRPCAddr: ":0", Logger: quietLogger()})
	if err == nil || !strings.Contains(err.Error(), "refusing to listen on :0 without TLS") {
		t.Fatalf("gRPC on every interface: %v", err)
	}
	_, err = StartRouter(ctx, RouterConfig{HTTPAddr: "0.0.0.0:0", EtcdEndpoints: []string{"127.0.0.1:1"}, Logger: quietLogger()})
	if err == nil || !strings.Contains(err.Error(), "refusing to listen") {
		t.Fatalf("router on every interface: %v", err)
	}
	_, err = Start(ctx, Config{DataDir: t.TempDir(), HTTPAddr: "127.0.0.1:0", CertsDir: certsFor(t), EtcdEndpoints: []string{"http://127.0.0.1:2379"}, Logger: quietLogger()})
	if err == nil || !strings.Contains(err.Error(), "is plaintext") {
		t.Fatalf("secure node with a plaintext etcd: %v", err)
	}

	logged := &syncBuilder{b: &strings.Builder{}}
	n, err := Start(ctx, Config{DataDir: t.TempDir(), HTTPAddr: "0.0.0.0:0", Insecure: true,
		Logger: slog.New(slog.NewTextHandler(logged, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	if !strings.Contains(logged.String(), "level=WARN msg=\"RUNNING INSECURE") {
		t.Errorf("no loud warning; log:\n%s", logged.String())
	}
	_, port, _ := net.SplitHostPort(n.Addr())
	base := "http://127.0.0.1:" + port
	var info struct{ Insecure bool }
	code, b, _ := call(t, http.DefaultClient, "GET", base+"/_cluster", "")
	if err := json.Unmarshal([]byte(b), &info); err != nil || code != 200 || !info.Insecure {
		t.Errorf("/_cluster: %d %s", code, b)
	}
	if _, b, _ := call(t, http.DefaultClient, "GET", base+"/metrics", ""); !strings.Contains(b, "\ndoppio_insecure 1\n") {
		t.Error("/metrics lacks doppio_insecure 1")
	}
	// A TLS client at the plaintext port fails at once, saying why.
	hc := httpsClient(t, certsFor(t), false)
	start := time.Now()
	_, err = hc.Get("https://127.0.0.1:" + port + "/_cluster")
	if err == nil || !strings.Contains(err.Error(), "server gave HTTP response to HTTPS client") || time.Since(start) > 5*time.Second {
		t.Errorf("TLS to the plaintext port: %v after %v", err, time.Since(start))
	}
}

// syncBuilder is a log destination safe for the node's goroutines.
type syncBuilder struct {
	mu sync.Mutex
	b  *strings.Builder
}

func (s *syncBuilder) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuilder) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
