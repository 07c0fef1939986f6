package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/doppio-db/doppio/internal/api"
	"github.com/doppio-db/doppio/internal/auth"
	"github.com/doppio-db/doppio/internal/bulkload"
	"github.com/doppio-db/doppio/internal/controller"
	"github.com/doppio-db/doppio/internal/embedetcd"
	"github.com/doppio-db/doppio/internal/node"
	"github.com/doppio-db/doppio/internal/partition"
	"github.com/doppio-db/doppio/internal/placement"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// nodeFlags are the flags of `doppio start` (and of a single-node
// `doppio dev`).
type nodeFlags struct {
	id, zone, dataDir, httpAddr, grpcAddr string
	etcd                                  []string
	embedEtcd                             bool
	etcdName, etcdPeer, etcdClient        string
	initialCluster                        string
	maxDoc, backfillRate                  int
	logEntries                            uint64
	logAge                                time.Duration
	idempotencyRetention                  time.Duration
	tick                                  time.Duration
	deadNodeDelay                         time.Duration
	placementMode                         string
	maxMoves, maxMovesPerNode             int
	standby                               bool
	pprofAddr                             string
	checkInterval                         time.Duration
	checkRate                             int64
	rowCache                              int64
	httpServer                            string
	insecure                              bool
	// common holds the persistent --certs-dir.
	common        *clientFlags
	auditLog      string
	tokenLifetime time.Duration
	bulkThrottle  byteSize
	bulkParallel  int
	log           logFlags
	cache         cacheFlags
}

func (f *nodeFlags) register(cmd *cobra.Command, dev bool) {
	fl := cmd.Flags()
	fl.StringVar(&f.dataDir, "data", "./doppio-data", "directory holding the node's data (Pebble store and, when embedded, etcd)")
	fl.StringVar(&f.httpAddr, "http", "127.0.0.1:8080", "REST listen address (port 0 picks a free port)")
	fl.StringVar(&f.grpcAddr, "grpc", "127.0.0.1:0", "node-to-node listen address: Raft and the nodes' own HTTP routes (port 0 picks a free port)")
	fl.IntVar(&f.maxDoc, "max-document-bytes", 1<<20, "largest accepted document")
	fl.IntVar(&f.backfillRate, "backfill-rate", partition.DefaultBackfillRate, "documents per second an index backfill indexes in one partition at most")
	fl.Uint64Var(&f.logEntries, "changelog-max-entries", 1_000_000, "change-log entries kept per partition (0 = unbounded)")
	fl.DurationVar(&f.logAge, "changelog-max-age", 7*24*time.Hour, "age after which change-log entries are trimmed (0 = never)")
	fl.DurationVar(&f.idempotencyRetention, "idempotency-retention", api.DefaultIdempotencyRetention, "how long the outcome of a request with an Idempotency-Key is remembered")
	fl.DurationVar(&f.tick, "raft-tick", 50*time.Millisecond, "Raft clock: elections take about 10 ticks, failure detection about 5")
	fl.DurationVar(&f.deadNodeDelay, "dead-node-delay", controller.DefaultDeadNodeDelay, "how long a node may stay dead before the controller recreates its replicas on other nodes")
	fl.StringVar(&f.placementMode, "placement-mode", "spread", "placement strategy: spread (leaders and replicas spread evenly) or sharded-mysql (a node leads all or none of its partitions; for failover benchmarks)")
	fl.IntVar(&f.maxMoves, "max-moves", placement.DefaultMaxMoves, "replica moves the controller keeps in flight at most, cluster-wide")
	fl.IntVar(&f.maxMovesPerNode, "max-moves-per-node", controller.DefaultMaxMovesPerNode, "replicas the controller adds to one node at once at most")
	fl.StringVar(&f.pprofAddr, "pprof", "", "serve net/http/pprof on this address (off when empty)")
	fl.DurationVar(&f.checkInterval, "check-interval", 6*time.Hour, "how long after a partition's last consistency check its leader checks it again (0 = only on demand: doppio check)")
	fl.Int64Var(&f.checkRate, "check-rate", 32<<20, "bytes per second a node reads for consistency checks")
	fl.Int64Var(&f.rowCache, "row-cache-bytes", node.DefaultRowCacheBytes, "memory for recently read documents, answered without reading Pebble (0 = no row cache)")
	registerHTTPServer(fl, &f.httpServer)
	fl.BoolVar(&f.insecure, "insecure", false, "run without TLS and authentication although listening off loopback (refused without --certs-dir otherwise)")
	fl.StringVar(&f.auditLog, "audit-log", "", "file the audit log (logins, user, grant and schema changes, restores) is appended to (default DATA/audit.log)")
	fl.DurationVar(&f.tokenLifetime, "token-lifetime", time.Hour, "how long a session token from POST /_auth/login is valid")
	fl.Var(&f.bulkThrottle, "bulk-throttle", "bytes per second of bulk-load files this node applies, all loads together, e.g. 50MB (0 = unbounded)")
	fl.IntVar(&f.bulkParallel, "bulk-partitions", bulkload.DefaultParallel, "partitions this node bulk-loads at once at most")
	f.log.register(fl)
	f.cache.register(fl)
	if dev {
		fl.StringSliceVar(&f.etcd, "etcd", nil, "external etcd endpoints (default: embedded etcd in the data directory)")
		return
	}
	fl.StringVar(&f.id, "id", "", "node id, unique in the cluster and kept across restarts (required)")
	fl.StringVar(&f.zone, "zone", "", "failure domain (rack, availability zone) for placement")
	fl.BoolVar(&f.standby, "standby", false, "join without taking replicas until doppio cluster add (add several nodes in one rebalance)")
	fl.StringSliceVar(&f.etcd, "etcd", nil, "etcd endpoints, comma-separated (or use --embed-etcd)")
	fl.BoolVar(&f.embedEtcd, "embed-etcd", false, "run an etcd member inside this node (see --etcd-name, --etcd-peer, --etcd-client, --initial-cluster)")
	fl.StringVar(&f.etcdName, "etcd-name", "", "name of the embedded etcd member (default: --id)")
	fl.StringVar(&f.etcdPeer, "etcd-peer", defaultEtcdPeer, "peer URL the embedded etcd member listens on and advertises (https by default with --certs-dir)")
	fl.StringVar(&f.etcdClient, "etcd-client", defaultEtcdClient, "client URL the embedded etcd member listens on and advertises (https by default with --certs-dir)")
	fl.StringVar(&f.initialCluster, "initial-cluster", "", "every initial embedded etcd member, name=peerURL,… (default: this member alone)")
}

func (f *nodeFlags) config(logger *slog.Logger) (node.Config, error) {
	cfg := node.Config{
		ID: f.id, Zone: f.zone, DataDir: f.dataDir, HTTPAddr: f.httpAddr, GRPCAddr: f.grpcAddr,
		EtcdEndpoints: f.etcd, TickInterval: f.tick,
		CertsDir: f.common.certsDir, Insecure: f.insecure,
		API:          api.Config{MaxDocumentBytes: f.maxDoc, IdempotencyRetention: f.idempotencyRetention},
		Retention:    partition.Retention{MaxEntries: f.logEntries, MaxAge: f.logAge},
		BackfillRate: f.backfillRate,
		Logger:       logger,

		CheckInterval: f.checkInterval, CheckBytesPerSecond: f.checkRate, RowCacheBytes: f.rowCacheBytes(),
		AuditLog: f.auditLog, Auth: auth.Config{TokenLifetime: f.tokenLifetime},
		BulkThrottle: int64(f.bulkThrottle), BulkParallel: f.bulkParallel,
		Cache: f.cache.config(),
	}
	mode, err := controller.ParseMode(f.placementMode)
	if err != nil {
		return cfg, err
	}
	cfg.Controller = controller.Options{DeadNodeDelay: f.deadNodeDelay, MaxMoves: f.maxMoves, MaxMovesPerNode: f.maxMovesPerNode, Mode: mode}
	cfg.Standby = f.standby
	if cfg.NetHTTPOnly, err = netHTTPOnly(f.httpServer); err != nil {
		return cfg, err
	}
	if err := servePprof(f.pprofAddr, logger); err != nil {
		return cfg, err
	}
	if f.embedEtcd {
		if len(f.etcd) > 0 {
			return cfg, fmt.Errorf("--etcd and --embed-etcd exclude each other")
		}
		name := f.etcdName
		if name == "" {
			name = f.id
		}
		peer, client := f.etcdPeer, f.etcdClient
		if cfg.CertsDir != "" {
			// The defaults follow the mode; URLs given stay as given.
			peer, client = secureDefault(peer, defaultEtcdPeer), secureDefault(client, defaultEtcdClient)
		}
		cfg.EmbedEtcd = &embedetcd.MemberConfig{Name: name, PeerURL: peer, ClientURL: client, InitialCluster: f.initialCluster}
	}
	return cfg, nil
}

const (
	defaultEtcdPeer   = "http://127.0.0.1:2380"
	defaultEtcdClient = "http://127.0.0.1:2379"
)

// secureDefault is url, made https when it is the plaintext default def.
func secureDefault(url, def string) string {
	if url == def {
		return "https://" + strings.TrimPrefix(def, "http://")
	}
	return url
}

// runNode runs a node until SIGINT or SIGTERM, reloading its
// certificates on SIGHUP.
func runNode(cmd *cobra.Command, cfg node.Config) error {
	ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	opened := cfg.Opened
	cfg.Opened = func(n *node.Node) {
		running.Store(n)
		if opened != nil {
			opened(n)
		}
	}
	n, err := node.Start(ctx, cfg)
	if err != nil {
		return err
	}
	reloadOnHangup(ctx, cfg.Logger, n.ReloadCertificates)
	<-ctx.Done()
	cfg.Logger.Info("shutting down")
	return n.Close()
}

// reloadOnHangup calls reload at each SIGHUP until ctx ends; a failed
// reload has logged why and keeps the certificates in use.
func reloadOnHangup(ctx context.Context, logger *slog.Logger, reload func() error) {
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	go func() {
		defer signal.Stop(hup)
		for {
			select {
			case <-ctx.Done():
				return
			case <-hup:
				logger.Info("SIGHUP: reloading certificates")
				_ = reload()
			}
		}
	}()
}

func startCommand(common *clientFlags) *cobra.Command {
	f := &nodeFlags{common: common}
	cmd := &cobra.Command{
		Use:         "start",
		Annotations: map[string]string{serverCommand: "start"},
		Short:       "Run one node of a Doppio cluster",
		Long: `Run one storage node (REST API, partition replicas, Raft) of a cluster.

Every node needs a unique --id and reachable --http and --grpc addresses.
The cluster's metadata lives in etcd: give --etcd endpoints, or run an etcd
member inside each node with --embed-etcd, e.g. for three nodes on one host:

  doppio start --id n1 --data d/n1 --http 127.0.0.1:8081 --grpc 127.0.0.1:9081 \
    --embed-etcd --etcd-peer http://127.0.0.1:2381 --etcd-client http://127.0.0.1:2391 \
    --initial-cluster n1=http://127.0.0.1:2381,n2=http://127.0.0.1:2382,n3=http://127.0.0.1:2383

(and the same for n2, n3 with their own ports). Start the members together:
etcd serves once a majority is up.

Secure mode: --certs-dir names a directory with ca.crt, node.crt and node.key
(see doppio cert); every link then speaks TLS: REST, node to node (mutual),
etcd (the embedded member's URLs default to https; external endpoints must be
https). SIGHUP, or a change of the files, reloads them. Without --certs-dir a
node refuses to listen anywhere but loopback unless --insecure is given.`,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if f.id == "" {
				return fmt.Errorf("--id is required")
			}
			logger, err := f.log.logger()
			if err != nil {
				return err
			}
			cfg, err := f.config(logger)
			if err != nil {
				return err
			}
			return runNode(cmd, cfg)
		},
	}
	f.register(cmd, false)
	return cmd
}

// rowCacheBytes maps the flag's 0 (no cache) to node.Config's negative.
func (f *nodeFlags) rowCacheBytes() int64 {
	if f.rowCache <= 0 {
		return -1
	}
	return f.rowCache
}

// registerHTTPServer adds --http-server, shared by start, dev and router.
func registerHTTPServer(fl *pflag.FlagSet, v *string) {
	fl.StringVar(v, "http-server", "fast-path", "how HTTP/1.1 is served: fast-path (plain requests by internal/http1, the rest by net/http) or net-http (net/http alone)")
}

// netHTTPOnly reads --http-server.
func netHTTPOnly(v string) (bool, error) {
	switch v {
	case "fast-path":
		return false, nil
	case "net-http":
		return true, nil
	}
	return false, fmt.Errorf("--http-server %q: want fast-path or net-http", v)
}
