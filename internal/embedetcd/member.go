package embedetcd

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"

	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"
)

// MemberConfig describes this process's member of a multi-member embedded
// etcd cluster (e.g. three `doppio start --embed-etcd` nodes that need no
// external etcd).
type MemberConfig struct {
	// Dir holds the member's data; it survives restarts.
	Dir string
	// Name is the member's name in InitialCluster.
	Name string
	// PeerURL and ClientURL are where the member listens and what it
	// advertises, e.g. http://10.0.0.1:2380 and http://10.0.0.1:2379.
	PeerURL, ClientURL string
	// InitialCluster lists every initial member, "name=peerURL,…"
	// (including this one). Read only when the member is first created;
	// a restart takes the membership from its data.
	InitialCluster string
	// Token separates clusters that share a network (default
	// "doppio-cluster").
	Token string
	// CertsDir, when set, makes the member serve client and peer traffic
	// over TLS (TLSInfo): its URLs must then be https.
	CertsDir string
}

// StartMember starts (or restarts) a member of a multi-member cluster and
// waits until it serves requests, which needs a quorum of the members: start
// them all concurrently.
func StartMember(ctx context.Context, mc MemberConfig, logger *slog.Logger) (*Server, error) {
	if logger == nil {
		logger = slog.Default()
	}
	if mc.Name == "" || mc.PeerURL == "" || mc.ClientURL == "" {
		return nil, errors.New("embedetcd: a member needs a name, a peer URL and a client URL")
	}
	pu, err := url.Parse(mc.PeerURL)
	if err != nil {
		return nil, fmt.Errorf("embedetcd: peer URL: %w", err)
	}
	cu, err := url.Parse(mc.ClientURL)
	if err != nil {
		return nil, fmt.Errorf("embedetcd: client URL: %w", err)
	}
	if mc.CertsDir != "" && (pu.Scheme != "https" || cu.Scheme != "https") {
		return nil, fmt.Errorf("embedetcd: a secure member's peer and client URLs must be https (%s, %s)", mc.PeerURL, mc.ClientURL)
	}
	initial := mc.InitialCluster
	if initial == "" {
		initial = mc.Name + "=" + pu.String()
	}
	if !strings.Contains(initial, mc.Name+"=") {
		return nil, fmt.Errorf("embedetcd: the initial cluster %q does not list member %s", initial, mc.Name)
	}
	dataDir := filepath.Join(mc.Dir, dataSubdir)
	if err := os.MkdirAll(dataDir, 0o700); err != nil {
		return nil, fmt.Errorf("embedetcd: %w", err)
	}
	closing := new(atomic.Bool)
	cfg := embed.NewConfig()
	cfg.Name = mc.Name
	cfg.Dir = dataDir
	cfg.ListenClientUrls = []url.URL{*cu}
	cfg.AdvertiseClientUrls = []url.URL{*cu}
	cfg.ListenPeerUrls = []url.URL{*pu}
	cfg.AdvertisePeerUrls = []url.URL{*pu}
	cfg.InitialCluster = initial
	cfg.ClusterState = embed.ClusterStateFlagNew
	cfg.InitialClusterToken = mc.Token
	if cfg.InitialClusterToken == "" {
		cfg.InitialClusterToken = "doppio-cluster"
	}
	cfg.AutoCompactionMode = embed.CompactorModePeriodic
	cfg.AutoCompactionRetention = "1h"
	cfg.Logger = "zap"
	cfg.ZapLoggerBuilder = embed.NewZapLoggerBuilder(zap.New(newSlogCore(logger.With("component", "etcd"), zap.WarnLevel, closing)))
	secure(cfg, mc.CertsDir)
	e, err := embed.StartEtcd(cfg)
	if err != nil {
		return nil, fmt.Errorf("embedetcd: start member %s: %w", mc.Name, err)
	}
	s := &Server{etcd: e, endpoints: []string{cu.String()}, closing: closing}
	if err := s.waitReady(ctx); err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}
