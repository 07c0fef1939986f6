package replication

import (
	"context"
	"crypto/tls"
	"io"
	"log/slog"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/doppio-db/doppio/internal/certs"
)

// certsDir makes a CA, a node certificate for loopback and root's client
// certificate in a new directory.
func certsDir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	if _, err := certs.EnsureDev(dir); err != nil {
		t.Fatal(err)
	}
	return dir
}

func peerTLS(t *testing.T, dir string) *TLS {
	t.Helper()
	l, err := certs.NewLoader(dir, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	return &TLS{Server: l.PeerServerConfig("h2"), Client: l.ClientConfig}
}

func TestMutualTLSReplicatesAndRefusesPeersWithoutANodeCertificateOfTheCA(t *testing.T) {
	dir := certsDir(t)
	pt := peerTLS(t, dir)
	c := newConfiguredCluster(t, func(cfg *Config) { cfg.TLS = pt }, 1, 2, 3)
	p := testPartition(0)
	c.startRaftGroup(p, []uint64{1, 2, 3})
	leader := c.leader(p, 10*time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	scn, err := c.write(ctx, leader, p, 1)
	if err != nil {
		t.Fatal(err)
	}
	c.waitApplied(p, scn.Sequence, 10*time.Second, 1, 2, 3)
	if !hasDoc(c.sameState(p, 1, 2, 3), p, 1) {
		t.Fatal("the write is missing from the replicas")
	}

	addr := c.host(leader).Addr()
	foreign := certsDir(t)
	fromFile := func(d, crt, key string) func() *tls.Config {
		return func() *tls.Config {
			cfg := pt.Client()
			kp, err := tls.LoadX509KeyPair(filepath.Join(d, crt), filepath.Join(d, key))
			if err != nil {
				t.Fatal(err)
			}
			cfg.GetClientCertificate = nil
			cfg.Certificates = []tls.Certificate{kp}
			return cfg
		}
	}
	// The cluster's own node certificate reaches the service: the call
	// is answered (about a partition not hosted there).
	cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(peerCredentials{TransportCredentials: credentials.NewTLS(&tls.Config{}), client: pt.Client}))
	if err != nil {
		t.Fatal(err)
	}
	callCtx, callCancel := context.WithTimeout(ctx, 5*time.Second)
	err = cc.Invoke(callCtx, methodSuspect, wrapperspb.Bytes([]byte(`{}`)), &wrapperspb.BytesValue{})
	callCancel()
	cc.Close()
	if err == nil || status.Code(err) == codes.Unavailable {
		t.Fatalf("a node's call: %v, want an answer of the service", err)
	}

	for _, tc := range []struct {
		name   string
		client func() *tls.Config
		alert  string
	}{
		{"a node certificate of another CA", fromFile(foreign, certs.NodeCertFile, certs.NodeKeyFile), "unknown certificate authority"},
		{"a user's client certificate of the cluster's CA", fromFile(dir, certs.ClientCertFile(certs.DevUser), certs.ClientKeyFile(certs.DevUser)), "bad certificate"},
		{"no client certificate", func() *tls.Config { cfg := pt.Client(); cfg.GetClientCertificate = nil; return cfg }, "certificate required"},
	} {
		// At the TLS level: the server's verdict arrives with the first
		// read after the client's handshake (TLS 1.3).
		cfg := tc.client()
		cfg.ServerName, cfg.NextProtos = "127.0.0.1", []string{"h2"}
		conn, err := tls.DialWithDialer(&net.Dialer{Timeout: 2 * time.Second}, "tcp", addr, cfg)
		if err == nil {
			conn.SetReadDeadline(time.Now().Add(2 * time.Second))
			_, err = conn.Read(make([]byte, 1))
			conn.Close()
		}
		if err == nil || !strings.Contains(err.Error(), "remote error: tls: "+tc.alert) {
			t.Errorf("%s: TLS read ended with %v, want the server's alert %q", tc.name, err, tc.alert)
		}
		// At the gRPC level: the call fails, the host is untouched.
		cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(peerCredentials{TransportCredentials: credentials.NewTLS(&tls.Config{}), client: tc.client}))
		if err != nil {
			t.Fatal(err)
		}
		callCtx, callCancel := context.WithTimeout(ctx, 2*time.Second)
		err = cc.Invoke(callCtx, methodSuspect, wrapperspb.Bytes([]byte(`{}`)), &wrapperspb.BytesValue{})
		callCancel()
		cc.Close()
		if status.Code(err) != codes.Unavailable {
			t.Errorf("%s: gRPC call: %v, want Unavailable", tc.name, err)
		}
	}

	// A node of the cluster dialling a server of another CA refuses it.
	other := newConfiguredCluster(t, func(cfg *Config) { cfg.TLS = peerTLS(t, foreign) }, 9)
	cc, err = grpc.NewClient(other.host(9).Addr(), grpc.WithTransportCredentials(peerCredentials{TransportCredentials: credentials.NewTLS(&tls.Config{}), client: pt.Client}))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	callCtx, callCancel = context.WithTimeout(ctx, 2*time.Second)
	defer callCancel()
	err = cc.Invoke(callCtx, methodSuspect, wrapperspb.Bytes([]byte(`{}`)), &wrapperspb.BytesValue{})
	if status.Code(err) != codes.Unavailable || !strings.Contains(err.Error(), "certificate signed by unknown authority") {
		t.Errorf("calling a node of another CA: %v", err)
	}
}
