// Package embedetcd runs a single-member etcd inside the process, for
// `doppio dev` and for tests. Its data lives under one directory and survives
// restarts (clean or kill -9); it listens on loopback ports chosen by the OS,
// so several instances can run side by side on one machine. In secure mode
// (a certs directory) it serves TLS and admits only node certificates.
package embedetcd

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync/atomic"
	"syscall"
	"time"

	"go.etcd.io/etcd/client/pkg/v3/transport"
	"go.etcd.io/etcd/server/v3/embed"
	"go.etcd.io/etcd/server/v3/etcdserver/api/membership"
	"go.uber.org/zap"

	"github.com/doppio-db/doppio/internal/certs"
)

const (
	// portsFile remembers the ports of the last start, so that clients
	// configured with the old endpoints keep working across restarts.
	portsFile = "ports.json"
	// dataSubdir holds etcd's own files; etcd wants a directory it owns.
	dataSubdir = "etcd"
	// startAttempts bounds retries when a port picked as free was taken by
	// someone else before etcd bound it.
	startAttempts = 5
	// readyTimeout bounds the wait for the member to become ready when ctx
	// has no earlier deadline.
	readyTimeout = 30 * time.Second
)

// Server is a running embedded etcd member.
type Server struct {
	etcd      *embed.Etcd
	endpoints []string
	closing   *atomic.Bool
}

type ports struct {
	Client int `json:"client"`
	Peer   int `json:"peer"`
}

// Start starts (or restarts) the member whose data is under dir and waits
// until it serves requests. Ports of a previous start are reused when they
// are still free; otherwise new ones are picked and the member's peer URL is
// updated in its membership. etcd's own logs go to logger at warn level and
// above.
func Start(ctx context.Context, dir string, logger *slog.Logger) (*Server, error) {
	return StartSecure(ctx, dir, "", logger)
}

// StartSecure is Start serving client and peer traffic over TLS with the
// node certificate of certsDir (plaintext when certsDir is empty); see
// TLSInfo.
func StartSecure(ctx context.Context, dir, certsDir string, logger *slog.Logger) (*Server, error) {
	if logger == nil {
		logger = slog.Default()
	}
	dataDir := filepath.Join(dir, dataSubdir)
	if err := os.MkdirAll(dataDir, 0o700); err != nil {
		return nil, fmt.Errorf("embedetcd: %w", err)
	}
	want := readPorts(dir)

	var lastErr error
	for attempt := 0; attempt < startAttempts; attempt++ {
		p, err := choosePorts(want)
		if err != nil {
			return nil, fmt.Errorf("embedetcd: choose ports: %w", err)
		}
		closing := new(atomic.Bool)
		scheme := "http"
		if certsDir != "" {
			scheme = "https"
		}
		cfg := newConfig(dataDir, p, scheme, logger, closing)
		secure(cfg, certsDir)
		e, err := embed.StartEtcd(cfg)
		if err != nil {
			if isAddrInUse(err) {
				// Lost the race for a port between probing and binding:
				// pick fresh ones.
				lastErr = err
				want = ports{}
				continue
			}
			return nil, fmt.Errorf("embedetcd: start: %w", err)
		}
		cu := clientURL(p, scheme)
		s := &Server{etcd: e, endpoints: []string{cu.String()}, closing: closing}
		if err := s.waitReady(ctx); err != nil {
			s.Close()
			return nil, err
		}
		if err := s.fixPeerURL(ctx, peerURL(p, scheme)); err != nil {
			s.Close()
			return nil, err
		}
		if err := writePorts(dir, p); err != nil {
			s.Close()
			return nil, fmt.Errorf("embedetcd: %w", err)
		}
		return s, nil
	}
	return nil, fmt.Errorf("embedetcd: start: no free ports after %d attempts: %w", startAttempts, lastErr)
}

// Endpoints are the client URLs to give to clientv3.
func (s *Server) Endpoints() []string { return slices.Clone(s.endpoints) }

// Close stops the member gracefully; its data stays in the directory. etcd
// waits up to its request timeout (about 7 s) for open client streams such as
// watches to end, so close clients of this member first.
func (s *Server) Close() error {
	s.closing.Store(true)
	s.etcd.Close()
	return nil
}

func newConfig(dataDir string, p ports, scheme string, logger *slog.Logger, closing *atomic.Bool) *embed.Config {
	cfg := embed.NewConfig()
	cfg.Name = "doppio"
	cfg.Dir = dataDir
	cu, pu := clientURL(p, scheme), peerURL(p, scheme)
	cfg.ListenClientUrls = []url.URL{cu}
	cfg.AdvertiseClientUrls = []url.URL{cu}
	cfg.ListenPeerUrls = []url.URL{pu}
	cfg.AdvertisePeerUrls = []url.URL{pu}
	// Only read when the member is first created; a restart takes the
	// membership from the WAL and ignores it.
	cfg.InitialCluster = cfg.Name + "=" + pu.String()
	cfg.InitialClusterToken = "doppio-dev"
	// The metadata the catalog and placement keep is small but rewritten
	// often (leases, placement); drop history older than an hour.
	cfg.AutoCompactionMode = embed.CompactorModePeriodic
	cfg.AutoCompactionRetention = "1h"
	cfg.Logger = "zap"
	cfg.ZapLoggerBuilder = embed.NewZapLoggerBuilder(zap.New(newSlogCore(logger.With("component", "etcd"), zap.WarnLevel, closing)))
	return cfg
}

func (s *Server) waitReady(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, readyTimeout)
	defer cancel()
	select {
	case <-s.etcd.Server.ReadyNotify():
		return nil
	case err := <-s.etcd.Err():
		return fmt.Errorf("embedetcd: start: %w", err)
	case <-s.etcd.Server.StopNotify():
		return errors.New("embedetcd: start: server stopped before it was ready")
	case <-ctx.Done():
		return fmt.Errorf("embedetcd: not ready: %w", ctx.Err())
	}
}

// fixPeerURL records the current peer URL in the membership when the member
// restarted on a different peer port. A single member never dials its own
// peer URL, so etcd runs fine without this; it keeps `member list` truthful
// and avoids surprising anyone who later adds a member.
func (s *Server) fixPeerURL(ctx context.Context, pu url.URL) error {
	srv := s.etcd.Server
	m := srv.Cluster().Member(srv.MemberID())
	want := []string{pu.String()}
	if m == nil || slices.Equal(m.PeerURLs, want) {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, readyTimeout)
	defer cancel()
	upd := membership.Member{ID: m.ID, RaftAttributes: membership.RaftAttributes{PeerURLs: want}}
	if _, err := srv.UpdateMember(ctx, upd); err != nil {
		return fmt.Errorf("embedetcd: update peer URL: %w", err)
	}
	return nil
}

func clientURL(p ports, scheme string) url.URL {
	return url.URL{Scheme: scheme, Host: net.JoinHostPort("127.0.0.1", strconv.Itoa(p.Client))}
}

func peerURL(p ports, scheme string) url.URL {
	return url.URL{Scheme: scheme, Host: net.JoinHostPort("127.0.0.1", strconv.Itoa(p.Peer))}
}

// TLSInfo is how a member serves TLS with the files of a certs directory:
// the node certificate, and client certificates required and verified
// against the cluster's CA. Both ports admit node certificates only
// (CommonName certs.NodeCommonName): a user's certificate, signed by the
// same CA, must not reach the store that holds the users and their grants.
// etcd reads the certificate files again at each handshake, so a rotated
// node certificate needs no restart.
func TLSInfo(certsDir string) transport.TLSInfo {
	return transport.TLSInfo{
		CertFile:       filepath.Join(certsDir, certs.NodeCertFile),
		KeyFile:        filepath.Join(certsDir, certs.NodeKeyFile),
		ClientCertFile: filepath.Join(certsDir, certs.NodeCertFile),
		ClientKeyFile:  filepath.Join(certsDir, certs.NodeKeyFile),
		TrustedCAFile:  filepath.Join(certsDir, certs.CAFile),
		ClientCertAuth: true,
		AllowedCNs:     []string{certs.NodeCommonName},
	}
}

// secure makes cfg serve client and peer traffic with TLSInfo(certsDir),
// unless certsDir is empty. It turns off etcd's JSON gateway: the gateway
// dials the member's own gRPC port without verifying it, which the
// CommonName check refuses, and nodes speak gRPC.
func secure(cfg *embed.Config, certsDir string) {
	if certsDir == "" {
		return
	}
	cfg.ClientTLSInfo = TLSInfo(certsDir)
	cfg.PeerTLSInfo = TLSInfo(certsDir)
	cfg.EnableGRPCGateway = false
}

// choosePorts keeps each wanted port that is free now and asks the OS for a
// free one otherwise. Between this probe and etcd binding the port another
// process may take it; Start retries in that case.
func choosePorts(want ports) (ports, error) {
	var got ports
	var held []net.Listener
	defer func() {
		for _, l := range held {
			l.Close()
		}
	}()
	// Hold every probe listener until both ports are chosen, so the OS does
	// not hand out the same port twice.
	pick := func(port int) (int, error) {
		if port != 0 {
			if l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port))); err == nil {
				held = append(held, l)
				return port, nil
			}
		}
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return 0, err
		}
		held = append(held, l)
		return l.Addr().(*net.TCPAddr).Port, nil
	}
	var err error
	if got.Client, err = pick(want.Client); err != nil {
		return ports{}, err
	}
	if got.Peer, err = pick(want.Peer); err != nil {
		return ports{}, err
	}
	return got, nil
}

func isAddrInUse(err error) bool {
	return errors.Is(err, syscall.EADDRINUSE)
}

func readPorts(dir string) ports {
	var p ports
	b, err := os.ReadFile(filepath.Join(dir, portsFile))
	if err != nil || json.Unmarshal(b, &p) != nil {
		// No file or a damaged one: fresh ports are always acceptable.
		return ports{}
	}
	return p
}

// writePorts replaces the ports file atomically, so a crash never leaves a
// half-written file behind.
func writePorts(dir string, p ports) error {
	b, err := json.Marshal(p)
	if err != nil {
		return err
	}
	tmp := filepath.Join(dir, portsFile+".tmp")
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, filepath.Join(dir, portsFile))
}
