package e2e

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/doppio-db/doppio/client"
	"github.com/doppio-db/doppio/internal/certs"
)

// secureDev is a running `doppio dev --secure --nodes 3` (or, started by
// startDevCluster without --secure, an insecure one).
type secureDev struct {
	cmd      *exec.Cmd
	data     string // its --data directory
	certsDir string
	mu       sync.Mutex
	logs     strings.Builder
	nodes    map[string]string // node id -> host:port of its REST port
	etcd     string            // client URL of its etcd
}

// startSecureDev runs `doppio dev --secure --nodes 3` and waits until its
// three nodes are ready; it is stopped when the test ends.
func startSecureDev(t *testing.T) *secureDev {
	t.Helper()
	return startDevCluster(t, "--secure")
}

// startDevCluster runs `doppio dev --nodes 3` with args and waits until
// its three nodes are ready; it is stopped when the test ends.
func startDevCluster(t *testing.T, args ...string) *secureDev {
	t.Helper()
	data := t.TempDir()
	cmd := exec.Command(binary, append([]string{"dev", "--nodes", "3", "--data", data, "--http", freePort(t)}, args...)...)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = cmd.Stdout
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(20 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
	})
	d := &secureDev{cmd: cmd, data: data, certsDir: filepath.Join(data, "certs"), nodes: map[string]string{}}
	ready := map[string]bool{}
	nodeLine := regexp.MustCompile(`^node (n\d): https?://(\S+)`)
	etcdLine := regexp.MustCompile(`^etcd: (https?://\S+)`)
	readyRe := regexp.MustCompile(`^\[(n\d)\] .*doppio node ready`)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			l := sc.Text()
			d.mu.Lock()
			d.logs.WriteString(l + "\n")
			if m := nodeLine.FindStringSubmatch(l); m != nil {
				d.nodes[m[1]] = m[2]
			}
			if m := etcdLine.FindStringSubmatch(l); m != nil {
				d.etcd = m[1]
			}
			if m := readyRe.FindStringSubmatch(l); m != nil {
				ready[m[1]] = true
			}
			d.mu.Unlock()
		}
	}()
	waitFor(t, 45*time.Second, "three nodes ready", func() (bool, string) {
		d.mu.Lock()
		defer d.mu.Unlock()
		return len(ready) == 3 && len(d.nodes) == 3 && d.etcd != "", d.logs.String()
	})
	return d
}

// log is everything the cluster printed so far.
func (d *secureDev) log() string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.logs.String()
}

// TestSecureDevClusterServesOverTLSAndRefusesStrangers runs `doppio dev
// --secure --nodes 3`: documents written and read with the Go client over
// TLS through every node (the forwards between nodes are TLS too), plain
// HTTP to a node's port answered 400, and a peer with a certificate of
// another CA refused at the handshake by the nodes' gRPC and by etcd.
func TestSecureDevClusterServesOverTLSAndRefusesStrangers(t *testing.T) {
	d := startSecureDev(t)
	cmd, nodes, etcd, certsDir := d.cmd, d.nodes, d.etcd, d.certsDir
	tlsCfg, err := certs.ClientTLS(certsDir, "root")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 40*time.Second)
	defer cancel()

	// Smart routing: the client reads /_cluster and goes to each key's
	// leader, over TLS as well.
	c := client.New("https://"+nodes["n1"], client.WithTLS(tlsCfg), client.WithRetry(20*time.Second), client.WithSmartRouting(time.Second))
	if _, _, err := c.PutDatabase(ctx, "sec", client.DatabaseSpec{Partitions: 3, Replicas: 3}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := c.PutTable(ctx, "sec", "T", client.TableSpec{
		Key:    []client.KeyPart{{Name: "id", Type: "string"}},
		Schema: json.RawMessage(`{"type":"record","name":"T","fields":[{"name":"v","type":"long"}]}`),
	}); err != nil {
		t.Fatal(err)
	}
	// Through every node, whichever leads the key's partition: the
	// others forward over TLS.
	for i, id := range []string{"n1", "n2", "n3"} {
		nc := client.New("https://"+nodes[id], client.WithTLS(tlsCfg), client.WithRetry(20*time.Second))
		for k := range 6 {
			key := client.Key{fmt.Sprintf("%s-%d", id, k)}
			if _, err := nc.Put(ctx, "sec", "T", key, map[string]any{"v": i*10 + k}); err != nil {
				t.Fatalf("put %v through %s: %v", key, id, err)
			}
			doc, err := c.Get(ctx, "sec", "T", key)
			if err != nil {
				t.Fatalf("get %v: %v", key, err)
			}
			if want := fmt.Sprintf(`{"v":%d}`, i*10+k); string(doc.Body) != want {
				t.Fatalf("get %v = %s, want %s", key, doc.Body, want)
			}
		}
	}
	info, err := c.Cluster(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if info.Insecure || len(info.Nodes) != 3 {
		t.Fatalf("/_cluster: insecure=%t, %d nodes", info.Insecure, len(info.Nodes))
	}

	// Plain HTTP to a node's TLS port: a clear 400.
	resp, err := (&http.Client{Timeout: 5 * time.Second}).Get("http://" + nodes["n2"] + "/_cluster")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 400 || !strings.Contains(string(b), "Client sent an HTTP request to an HTTPS server.") {
		t.Errorf("plain HTTP to a node: %d %q", resp.StatusCode, b)
	}

	// Rotation without a restart: a new node certificate, SIGHUP to dev
	// (which passes it on to its nodes); every node presents the new one.
	rotate := exec.Command(binary, "cert", "create-node", "localhost", "127.0.0.1", "::1", "--overwrite", "--certs-dir", certsDir)
	if b, err := rotate.CombinedOutput(); err != nil {
		t.Fatalf("doppio cert create-node: %v\n%s", err, b)
	}
	if err := cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	rotated, err := certs.ReadCertificate(filepath.Join(certsDir, certs.NodeCertFile))
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"n1", "n2", "n3"} {
		waitFor(t, 15*time.Second, id+" presents the rotated certificate", func() (bool, string) {
			conn, err := tls.Dial("tcp", nodes[id], tlsCfg)
			if err != nil {
				return false, err.Error()
			}
			defer conn.Close()
			got := conn.ConnectionState().PeerCertificates[0]
			return got.Equal(rotated), fmt.Sprintf("serial %x, want %x", got.SerialNumber, rotated.SerialNumber)
		})
	}
	if _, err := c.Get(ctx, "sec", "T", client.Key{"n1-0"}); err != nil {
		t.Fatalf("a read after the rotation: %v", err)
	}
	waitFor(t, 5*time.Second, "dev and its three nodes took the SIGHUP", func() (bool, string) {
		logs := d.log()
		took := 0
		for _, l := range strings.Split(logs, "\n") {
			if strings.Contains(l, "SIGHUP: reloading certificates") && (strings.HasPrefix(l, "time=") || strings.HasPrefix(l, "[n")) {
				took++
			}
		}
		return took == 4, logs
	})

	// A peer holding a node certificate of another CA.
	foreign := t.TempDir()
	if err := certs.CreateCA(foreign, certs.Options{}); err != nil {
		t.Fatal(err)
	}
	if err := certs.CreateNode(foreign, []string{"127.0.0.1"}, certs.Options{}); err != nil {
		t.Fatal(err)
	}
	kp, err := tls.LoadX509KeyPair(filepath.Join(foreign, certs.NodeCertFile), filepath.Join(foreign, certs.NodeKeyFile))
	if err != nil {
		t.Fatal(err)
	}
	stranger := tlsCfg.Clone()
	stranger.Certificates = []tls.Certificate{kp}
	etcdAddr := strings.TrimPrefix(etcd, "https://")
	for _, target := range []struct{ what, addr, proto string }{
		{"gRPC of n1", info.Nodes[0].GRPC, "h2"},
		{"etcd", etcdAddr, "h2"},
	} {
		cfg := stranger.Clone()
		cfg.ServerName, cfg.NextProtos = "127.0.0.1", []string{target.proto}
		conn, err := tls.DialWithDialer(&net.Dialer{Timeout: 3 * time.Second}, "tcp", target.addr, cfg)
		if err == nil {
			conn.SetReadDeadline(time.Now().Add(3 * time.Second))
			_, err = conn.Read(make([]byte, 1))
			conn.Close()
		}
		if err == nil || !strings.Contains(err.Error(), "remote error: tls: unknown certificate authority") {
			t.Errorf("%s with a certificate of another CA: %v", target.what, err)
		}
	}
}

// TestSecureClusterRefusesMissingCredentialsAndUngrantedUsers runs a
// secure three-node cluster and sends every request to a node that does
// not lead the document's partition (so a granted request is forwarded
// to the leader): without credentials 401 with a challenge, a user
// holding a grant on another database only 403, a reader 200 on reads
// and 403 on writes; no refused write changes the document.
func TestSecureClusterRefusesMissingCredentialsAndUngrantedUsers(t *testing.T) {
	d := startSecureDev(t)
	rootTLS, err := certs.ClientTLS(d.certsDir, "root")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	root := client.New("https://"+d.nodes["n1"], client.WithTLS(rootTLS), client.WithRetry(20*time.Second))
	const partitions = 3
	for _, db := range []string{"sec", "other"} {
		if _, _, err := root.PutDatabase(ctx, db, client.DatabaseSpec{Partitions: partitions, Replicas: 3}); err != nil {
			t.Fatal(err)
		}
		if _, _, err := root.PutTable(ctx, db, "T", client.TableSpec{
			Key:    []client.KeyPart{{Name: "id", Type: "string"}},
			Schema: json.RawMessage(`{"type":"record","name":"T","fields":[{"name":"v","type":"long"}]}`),
		}); err != nil {
			t.Fatal(err)
		}
	}
	groups := groupsByPartition(partitions) // groups[p] is a key of partition p
	for p, g := range groups {
		if _, err := root.Put(ctx, "sec", "T", client.Key{g}, map[string]any{"v": p}); err != nil {
			t.Fatalf("put %s: %v", g, err)
		}
	}
	users := map[string]client.Grant{
		"alice": {Role: "readWrite", DB: "other"}, // a grant, on another database
		"bob":   {Role: "read", DB: "sec"},
	}
	for name, g := range users {
		if _, created, err := root.PutUser(ctx, name, name+"-secret"); err != nil || !created {
			t.Fatalf("create %s: created=%t %v", name, created, err)
		}
		if _, added, err := root.GrantRole(ctx, name, g); err != nil || !added {
			t.Fatalf("grant %+v to %s: added=%t %v", g, name, added, err)
		}
	}

	// For each partition, a node that does not lead it.
	leaderOf := map[int]string{}
	waitFor(t, 20*time.Second, "a leader per partition of sec", func() (bool, string) {
		info, err := root.Cluster(ctx)
		if err != nil {
			return false, err.Error()
		}
		clear(leaderOf)
		for _, p := range info.Partitions {
			if p.Database == "sec" && p.Leader != "" {
				leaderOf[p.Partition] = p.Leader
			}
		}
		return len(leaderOf) == partitions, fmt.Sprint(leaderOf)
	})
	via := func(p int) string {
		for _, id := range []string{"n1", "n2", "n3"} {
			if id != leaderOf[p] {
				return id
			}
		}
		t.Fatalf("partition %d has no leader", p)
		return ""
	}

	noCert, err := certs.ClientTLS(d.certsDir, "")
	if err != nil {
		t.Fatal(err)
	}
	hc := &http.Client{Transport: &http.Transport{TLSClientConfig: noCert}, Timeout: 20 * time.Second}
	send := func(id, method, path, body, user string) (int, http.Header, string) {
		t.Helper()
		var rd io.Reader
		if body != "" {
			rd = strings.NewReader(body)
		}
		req, err := http.NewRequestWithContext(ctx, method, "https://"+d.nodes[id]+path, rd)
		if err != nil {
			t.Fatal(err)
		}
		if body != "" {
			req.Header.Set("Content-Type", "application/json")
		}
		if user != "" {
			req.SetBasicAuth(user, user+"-secret")
		}
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatalf("%s %s through %s: %v", method, path, id, err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, resp.Header, string(b)
	}
	for p, g := range groups {
		id, path := via(p), "/sec/T/"+g
		for _, c := range []struct {
			user, method, body string
			want               int
		}{
			{"", "GET", "", 401},
			{"", "PUT", `{"v":100}`, 401},
			{"alice", "GET", "", 403},
			{"alice", "PUT", `{"v":100}`, 403},
			{"bob", "PUT", `{"v":100}`, 403},
			{"bob", "GET", "", 200},
		} {
			st, h, b := send(id, c.method, path, c.body, c.user)
			who := c.user
			if who == "" {
				who = "no credentials"
			}
			if st != c.want {
				t.Errorf("%s %s through %s (leader %s) with %s: %d %s, want %d", c.method, path, id, leaderOf[p], who, st, b, c.want)
				continue
			}
			switch st {
			case 200:
				if want := fmt.Sprintf(`{"v":%d}`, p); strings.TrimSpace(b) != want {
					t.Errorf("%s read %s through %s: %s, want %s", who, path, id, b, want)
				}
			case 401:
				if h.Get("WWW-Authenticate") == "" || h.Get("Content-Type") != "application/problem+json" {
					t.Errorf("%s %s with no credentials: WWW-Authenticate %q, Content-Type %q", c.method, path, h.Get("WWW-Authenticate"), h.Get("Content-Type"))
				}
			case 403:
				if h.Get("Content-Type") != "application/problem+json" {
					t.Errorf("%s %s by %s: Content-Type %q", c.method, path, who, h.Get("Content-Type"))
				}
			}
		}
		doc, err := root.Get(ctx, "sec", "T", client.Key{g})
		if err != nil {
			t.Fatal(err)
		}
		if want := fmt.Sprintf(`{"v":%d}`, p); string(doc.Body) != want {
			t.Errorf("%s after the refused writes: %s, want %s", path, doc.Body, want)
		}
	}
}
