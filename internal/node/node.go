// Package node wires one Doppio process together and holds no decisions:
// it opens the REST listener, the peer listener, etcd (embedded or
// external), the schema catalog, the storage engine and the replica
// registry (replicas.Registry) with its partition replicas, and runs the
// node's background loops. Each decision belongs to another
// package: a replica's lifecycle to lifecycle.Next, consistency checks to
// consistency, operator intents and the graceful stop to operator,
// /_cluster and the node's metrics to clusterinfo, placement to
// controller. Node reads their inputs and carries out their steps.
package node

import (
	"context"
	"errors"
	"fmt"
	"github.com/doppio-db/doppio/internal/cache"
	"github.com/doppio-db/doppio/internal/cache/tier"
	"iter"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/doppio-db/doppio/internal/api"
	"github.com/doppio-db/doppio/internal/audit"
	"github.com/doppio-db/doppio/internal/auth"
	"github.com/doppio-db/doppio/internal/buildinfo"
	"github.com/doppio-db/doppio/internal/bulkload"
	"github.com/doppio-db/doppio/internal/catalog"
	"github.com/doppio-db/doppio/internal/clusterinfo"
	"github.com/doppio-db/doppio/internal/consistency"
	"github.com/doppio-db/doppio/internal/controller"
	"github.com/doppio-db/doppio/internal/datastream"
	"github.com/doppio-db/doppio/internal/derived"
	"github.com/doppio-db/doppio/internal/embedetcd"
	"github.com/doppio-db/doppio/internal/http1"
	"github.com/doppio-db/doppio/internal/keys"
	"github.com/doppio-db/doppio/internal/lifecycle"
	"github.com/doppio-db/doppio/internal/membership"
	"github.com/doppio-db/doppio/internal/operator"
	"github.com/doppio-db/doppio/internal/partition"
	"github.com/doppio-db/doppio/internal/peer"
	"github.com/doppio-db/doppio/internal/quota"
	"github.com/doppio-db/doppio/internal/replicas"
	"github.com/doppio-db/doppio/internal/replication"
	"github.com/doppio-db/doppio/internal/storage"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// Config configures a node.
type Config struct {
	// ID names the node in the cluster (default "dev"); its Raft member id
	// is derived from it, so a node keeps its id across restarts.
	ID string
	// Zone is the node's failure domain (rack, availability zone) for
	// placement.
	Zone string
	// DataDir holds the node's Pebble store and, when embedded, etcd.
	DataDir string
	// HTTPAddr is the REST listen address, e.g. 127.0.0.1:8080 (":0" picks
	// a free port; see Node.Addr).
	HTTPAddr string
	// NetHTTPOnly serves the REST API with net/http alone, without the
	// fast path of internal/http1 (http1.Server.FallbackOnly).
	NetHTTPOnly bool
	// GRPCAddr is the node-to-node listen address (default 127.0.0.1:0):
	// the peer listener, which carries the Raft transport (gRPC) and the
	// peer HTTP API (internal/peer).
	GRPCAddr string
	// CertsDir, when set, runs the node in secure mode with the
	// certificates of this directory (ca.crt, node.crt, node.key; see
	// internal/certs): TLS on the REST listener (client certificates
	// verified when given), mutual TLS between nodes, TLS to etcd
	// (embedded or external, whose endpoints must then be https) and to
	// other nodes' REST ports. The files are re-read when they change and
	// on ReloadCertificates.
	CertsDir string
	// Insecure is the operator's explicit choice to run without a certs
	// directory on addresses other than loopback; without it Start
	// refuses to. Loopback-only nodes may run insecure without it.
	Insecure bool
	// EtcdEndpoints of an external etcd. Empty: an embedded etcd, a
	// single-member one in DataDir/etcd unless EmbedEtcd says more.
	EtcdEndpoints []string
	// EmbedEtcd, when set, makes this node a member of a multi-member
	// embedded etcd cluster.
	EmbedEtcd *embedetcd.MemberConfig
	// TickInterval is the Raft clock (default 50ms).
	TickInterval time.Duration
	// API limits.
	API api.Config
	// Retention of each partition's change log.
	Retention partition.Retention
	// RowCacheBytes bounds the cache of recently read documents (default
	// DefaultRowCacheBytes; negative: none).
	RowCacheBytes int64
	// Cache is the cache tier's read side here: Redis and the hot-key
	// cache that answer staleness-bounded reads of cacheable tables.
	Cache CacheConfig
	// BackfillRate bounds the documents per second an index backfill
	// indexes in one partition (default partition.DefaultBackfillRate).
	BackfillRate int
	// Controller tunes the placement controller every node runs (one is
	// active at a time): dead-node delay, moves in flight, placement mode.
	// Prefix and Logger are the node's.
	Controller controller.Options
	// Standby registers the node without giving it replicas until the
	// operator adds it (`doppio cluster add`), unless it already has an
	// intent (it was added before and restarted).
	Standby bool
	// Opened, when set, is called once the node is open, before /readyz
	// answers 200: what a caller keeps of the node (the command's debug
	// listener) is there by the time the node says it is ready.
	Opened func(*Node)
	Logger *slog.Logger

	// CheckInterval is how long after a partition's last consistency
	// check its leader checks it again (0: never; POST /_cluster/check
	// runs one on demand). CheckBytesPerSecond throttles the checksum
	// reads (default replication.DefaultCheckBytesPerSecond).
	CheckInterval       time.Duration
	CheckBytesPerSecond int64

	// Authenticate requires every request but the public ones to
	// authenticate and to hold its route's privilege (secure mode turns
	// it on); off, anyone may do anything (insecure mode). The users API
	// and logins are served either way.
	Authenticate bool
	// Auth tunes authentication (token lifetime, login rate limits) and
	// Users the node's copy of the users (resync, password hashing); the
	// metrics registry is the node's.
	Auth  auth.Config
	Users auth.StoreOptions
	// AuditLog is the audit log's file (default DataDir/audit.log).
	AuditLog string
	// QuotaBurst is the unused capacity a quota's bucket keeps (default
	// quota.DefaultBurst).
	QuotaBurst time.Duration

	// BulkThrottle bounds the bytes per second of bulk-load files this
	// node applies, all loads together (0: unbounded); BulkParallel is
	// how many partitions it loads at once (default
	// bulkload.DefaultParallel).
	BulkThrottle int64
	BulkParallel int

	// CertsPollInterval is how often the certificate files are looked
	// at for a change (default certs.DefaultPollInterval).
	CertsPollInterval time.Duration
}

// Node is a running Doppio process.
type Node struct {
	cfg Config
	// tier and tierStore are the cache tier's read side (nil: none).
	tier      *tier.Tier
	tierStore *cache.Store
	log       *slog.Logger
	sec       *transportSecurity // nil: insecure
	listener  net.Listener
	http      *http1.Server
	// peerMux splits the gRPC port between the Raft transport and
	// peerHTTP, which serves other nodes' requests; peerDone is closed
	// when peerHTTP stops serving.
	peerMux  *peer.Mux
	peerHTTP *http1.Server
	peerDone chan struct{}
	peers    *peer.Client

	etcd     *embedetcd.Server
	client   *clientv3.Client
	catalog  *catalog.Catalog
	engine   *storage.Engine
	host     *replication.Host
	view     *membership.View
	reg      *membership.Registration
	registry *replicas.Registry
	api      *api.Server
	streams  *datastream.Manager
	loads    *bulkload.Manager
	derived  *derived.Manager
	quotas   *quota.Store
	self     uint64 // Raft id

	// parts maps a partition prefix to its (database, partition), for
	// leadership callbacks from the replication loop.
	parts sync.Map // string(prefix) -> partRef
	// controlling: this node runs the active controller (for metrics).
	controlling atomic.Bool
	// loop brings the replicas hosted here in line with the placement.
	loop *lifecycle.Loop

	stop chan struct{}
	// led signals followCatalog that this node became leader of some
	// partition: its index builds may need to start here.
	led chan struct{}
	wg  sync.WaitGroup

	// checks runs and records the consistency checks of the partitions
	// led here; rebuildingHere holds the replicas being restarted empty
	// for a rebuild (the reconcile pass leaves them alone).
	checks         *consistency.Checker
	rebuildingHere sync.Map // partRef -> struct{}
	// ops applies operator intents and stops the node gracefully; nil
	// until the node is open.
	ops *operator.Operator
	// info answers /_cluster; nil until the node has its membership view.
	info *clusterinfo.Reporter
	// users and audit: see Config.Authenticate and Config.AuditLog.
	users *auth.Store
	audit *audit.Log
}

// Start opens the node. The HTTP listener comes up first, so /healthz,
// /readyz (503 until ready) and /metrics answer while the rest starts.
func Start(ctx context.Context, cfg Config) (*Node, error) {
	if cfg.ID == "" {
		cfg.ID = "dev"
	}
	if cfg.GRPCAddr == "" {
		cfg.GRPCAddr = "127.0.0.1:0"
	}
	cfg.API.NodeID = cfg.ID
	cfg.API.Authenticate = cfg.Authenticate
	if cfg.AuditLog == "" {
		cfg.AuditLog = filepath.Join(cfg.DataDir, "audit.log")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	n := &Node{
		cfg: cfg, log: cfg.Logger, stop: make(chan struct{}), led: make(chan struct{}, 1), self: membership.RaftID(cfg.ID),
	}
	n.loop = lifecycle.NewLoop(lifecycleHost{n}, n.self, n.log)
	listens := []string{cfg.HTTPAddr, cfg.GRPCAddr}
	if cfg.EmbedEtcd != nil {
		listens = append(listens, cfg.EmbedEtcd.PeerURL, cfg.EmbedEtcd.ClientURL)
	}
	sec, err := openSecurity(cfg.CertsDir, cfg.Insecure, n.log, cfg.EtcdEndpoints, listens...)
	if err != nil {
		return nil, err
	}
	n.sec = sec
	n.peers = sec.peerClient()
	if err := os.MkdirAll(cfg.DataDir, 0o755); err != nil {
		return nil, err
	}

	registry := prometheus.NewRegistry()
	registry.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}), buildinfo.Collector())
	n.cfg.Controller.OnProgress = operator.RebalanceMetrics(registry)
	sec.register(registry)
	n.api = api.New(sec.apiConfig(cfg.API), nil, nil, registry, n.log, clusterView{n})
	if n.tier, n.tierStore, err = openCacheTier(cfg.Cache, registry, n.log); err != nil {
		return nil, err
	}
	if n.tier != nil {
		n.api.AttachCache(n.tier)
	}

	ln, err := net.Listen("tcp", cfg.HTTPAddr)
	if err != nil {
		return nil, fmt.Errorf("listen on %s: %w", cfg.HTTPAddr, err)
	}
	n.listener = ln
	n.http = n.api.HTTPServer()
	n.http.FallbackOnly = cfg.NetHTTPOnly
	n.http.TLSConfig = sec.serverTLS()
	n.wg.Add(1)
	go func() {
		defer n.wg.Done()
		if err := n.http.Serve(ln); err != nil && !errors.Is(err, http1.ErrServerClosed) {
			n.log.Error("http server stopped", "err", err)
		}
	}()

	if err := n.open(ctx, registry); err != nil {
		n.Close()
		return nil, err
	}
	// Open the replicas placed here before answering requests, so a
	// restarted node serves its partitions at once.
	n.reconcile(ctx)
	n.findOrphans()
	if cfg.Opened != nil {
		cfg.Opened(n)
	}
	n.api.SetReady(true)
	if sec.secure() {
		n.wg.Add(1)
		go n.watchCertificates()
	}
	n.wg.Add(7)
	go n.quotaLoop()
	go n.checkLoop()
	go n.trimLoop()
	go n.followCatalog()
	go n.reconcileLoop()
	go n.reportLoop()
	go n.runController()
	n.log.Info("doppio node ready", "id", cfg.ID, "http", n.Addr(), "peer", n.PeerAddr(), "zone", cfg.Zone, "data", cfg.DataDir, "etcd", n.etcdEndpoints(), "secure", sec.secure())
	return n, nil
}

func (n *Node) open(ctx context.Context, registry *prometheus.Registry) error {
	endpoints := n.cfg.EtcdEndpoints
	switch {
	case len(endpoints) > 0:
	case n.cfg.EmbedEtcd != nil:
		mc := *n.cfg.EmbedEtcd
		if mc.Dir == "" {
			mc.Dir = filepath.Join(n.cfg.DataDir, "etcd")
		}
		mc.CertsDir = n.sec.certsDir()
		srv, err := embedetcd.StartMember(ctx, mc, n.log)
		if err != nil {
			return fmt.Errorf("embedded etcd: %w", err)
		}
		n.etcd = srv
		endpoints = srv.Endpoints()
	default:
		srv, err := embedetcd.StartSecure(ctx, filepath.Join(n.cfg.DataDir, "etcd"), n.sec.certsDir(), n.log)
		if err != nil {
			return fmt.Errorf("embedded etcd: %w", err)
		}
		n.etcd = srv
		endpoints = srv.Endpoints()
	}
	cli, err := clientv3.New(clientv3.Config{Endpoints: endpoints, DialTimeout: 5 * time.Second, Logger: quietZap(), TLS: n.sec.etcdTLS()})
	if err != nil {
		return fmt.Errorf("etcd client: %w", err)
	}
	n.client = cli
	if n.catalog, err = catalog.Open(ctx, cli, etcdPrefix); err != nil {
		return fmt.Errorf("catalog: %w", err)
	}
	if n.audit, err = audit.Open(n.cfg.AuditLog); err != nil {
		return err
	}
	n.api.AttachAudit(n.audit)
	uo := n.cfg.Users
	uo.Logger = n.log
	if n.users, err = auth.OpenStore(ctx, cli, etcdPrefix, uo); err != nil {
		return err
	}
	ac := n.cfg.Auth
	ac.Registerer = registry
	n.api.AttachAuth(auth.New(n.users, ac))
	if n.engine, err = storage.Open(filepath.Join(n.cfg.DataDir, "pebble"), storage.Options{
		RowCacheBytes: n.cfg.rowCacheBytes(), RowCacheKeys: keys.IsDocument, RowCacheSpans: keys.MayHoldDocuments, Logger: n.log,
	}); err != nil {
		return err
	}
	if err := checkStoreFormat(n.engine, n.cfg.DataDir); err != nil {
		return err
	}
	if n.view, err = membership.Open(ctx, cli, etcdPrefix, n.log); err != nil {
		return err
	}
	n.info = clusterinfo.New(clusterinfo.Config{
		Node: n.cfg.ID, Client: cli, Prefix: etcdPrefix, Cluster: n.view, Controller: n.ActiveController, Local: n.local, Peers: n.peers,
	})
	commits := prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "doppio_replication_commit_seconds",
		Help:    "Time from a write's proposal to its application on the leader that proposed it: the log syncs of a quorum of replicas, the messages between them and the apply.",
		Buckets: prometheus.ExponentialBuckets(50e-6, 2, 16),
	})
	applies := prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "doppio_replication_apply_seconds",
		Help:    "Time a Raft group's committed entries took to apply on this node, from building their batch to committing it to the store.",
		Buckets: prometheus.ExponentialBuckets(10e-6, 2, 16),
	})
	registry.MustRegister(commits, applies)
	pl, err := net.Listen("tcp", n.cfg.GRPCAddr)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", n.cfg.GRPCAddr, err)
	}
	n.peerMux = peer.NewMux(pl, peer.Config{TLS: n.sec.peerServerTLS(), Logger: n.log})
	n.peerHTTP, n.peerDone = n.api.PeerHTTPServer(), make(chan struct{})
	go func() {
		defer close(n.peerDone)
		if err := n.peerHTTP.Serve(n.peerMux.HTTP()); err != nil && !errors.Is(err, http1.ErrServerClosed) {
			n.log.Error("peer http server stopped", "err", err)
		}
	}()
	n.host, err = replication.NewHost(replication.Config{
		NodeID:       n.self,
		Engine:       n.engine,
		Resolve:      n.resolve,
		Listener:     n.peerMux.GRPC(),
		TLS:          n.sec.replicationTLS(),
		TickInterval: n.cfg.TickInterval,
		OnLeadership: n.onLeadership,
		OnCommit:     func(d time.Duration) { commits.Observe(d.Seconds()) },
		OnApply:      func(d time.Duration) { applies.Observe(d.Seconds()) },
		Logger:       n.log,

		CheckBytesPerSecond: n.cfg.CheckBytesPerSecond,
		OnRebuild:           n.rebuildReplica,
	})
	if err != nil {
		return fmt.Errorf("replication: %w", err)
	}
	if n.cfg.Standby {
		// Before registering: the controller must never see the node
		// alive without its intent.
		if err := membership.DeclareStandby(ctx, cli, etcdPrefix, n.cfg.ID); err != nil {
			return fmt.Errorf("declare standby: %w", err)
		}
	}
	n.reg, err = membership.Register(ctx, cli, etcdPrefix, membership.Node{
		ID: n.cfg.ID, HTTP: advertised(n.Addr()), GRPC: advertised(n.PeerAddr()), Zone: n.cfg.Zone, Started: time.Now().UTC(),
		Version: buildinfo.Get().Version,
	}, membership.DefaultTTL, n.log)
	if err != nil {
		return fmt.Errorf("register node: %w", err)
	}
	n.registry = replicas.New(replicas.Config{
		Engine:    n.engine,
		Limits:    partition.Limits{MaxDocumentBytes: n.cfg.API.MaxDocumentBytes, BackfillRate: n.cfg.BackfillRate},
		Tables:    n.partitionTables,
		Self:      n.self,
		Directory: directory{n.view},
		Logger:    n.log,
	})
	n.api.Attach(n.catalog, n.registry)
	n.ops = operator.New(operator.Config{
		Self: n.self, Client: cli, Prefix: etcdPrefix, Cluster: n.view, Databases: n.catalog,
		Registration: n.reg, Hosted: n.hostedReplicas, Server: n.api, Logger: n.log,
	})
	registry.MustRegister(clusterinfo.NewCollector(n.registry, n.engine, n.host), clusterinfo.NewHealthCollector(clusterinfo.HealthSources{
		Host: n.host, Database: n.databaseOf, Databases: n.catalog.Databases, Cluster: n.view,
		Controlling: n.controlling.Load, DataDir: n.cfg.DataDir,
	}))
	n.checks = consistency.New(consistency.Config{
		NodeID: n.cfg.ID, Interval: n.cfg.CheckInterval, KV: cli, Prefix: etcdPrefix, Cluster: checkCluster{n}, Peers: n.peers, Logger: n.log,
	})
	registry.MustRegister(consistency.NewCollector(func() (replication.CheckCounters, bool) {
		if n.host == nil {
			return replication.CheckCounters{}, false
		}
		return n.host.CheckCounters(), true
	}))
	n.streams, err = datastream.Open(ctx, datastream.Config{
		Client: cli, Prefix: etcdPrefix, Node: n.cfg.ID, Schemas: n.catalog,
		Cluster: streamCluster{n.view}, Replicas: streamReplicas{n.registry, n.self}, Registry: registry, Logger: n.log,
	})
	if err != nil {
		return fmt.Errorf("datastreams: %w", err)
	}
	n.api.AttachDatastreams(n.streams)
	n.loads = bulkload.Open(bulkload.Config{
		Client: cli, Prefix: etcdPrefix, Node: n.cfg.ID, Catalog: n.catalog,
		Replicas: loadReplicas{n.registry, n.self}, Staging: filepath.Join(n.cfg.DataDir, "bulk"),
		Throttle: n.cfg.BulkThrottle, Parallel: n.cfg.BulkParallel, Registry: registry, Audit: n.audit, Logger: n.log,
	})
	n.api.AttachLoads(n.loads)
	n.derived, err = derived.Open(ctx, derived.Config{
		Client: cli, Prefix: etcdPrefix, Node: n.cfg.ID, Catalog: n.catalog, Loads: n.loads,
		Hosted: n.derivedHosted, Placement: n.derivedPlacement, Live: n.liveNodes, Registry: registry, Logger: n.log,
		ReadGrace: n.api.RequestTimeout() + time.Second,
	})
	if err != nil {
		return err
	}
	n.api.AttachDerived(n.derived)
	return n.openQuotas(ctx, cli, registry)
}

// etcdPrefix is where the catalog and the cluster state live in etcd.
const etcdPrefix = "/doppio"

// advertised turns a listen address into one peers can dial: an
// unspecified host (":8080", "0.0.0.0:8080") becomes this machine's name.
func advertised(addr string) string {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return addr
	}
	if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
		if h, err := os.Hostname(); err == nil {
			return net.JoinHostPort(h, port)
		}
	}
	return addr
}

// databaseOf names the database of a partition hosted here.
func (n *Node) databaseOf(p keys.Partition) (string, bool) {
	v, ok := n.parts.Load(string(p))
	if !ok {
		return "", false
	}
	return v.(partRef).db, true
}

// resolve is the replication transport's address book: a node's gRPC
// address from its registration.
func (n *Node) resolve(id uint64) (string, error) {
	if nd, ok := n.view.NodeByRaft(id); ok {
		return nd.GRPC, nil
	}
	return "", fmt.Errorf("node with raft id %d is not registered (down?)", id)
}

// onLeadership publishes this node's leaderships; called from the
// replication loop, so it only records (the registration writes batches).
func (n *Node) onLeadership(p keys.Partition, leader, term uint64) {
	v, ok := n.parts.Load(string(p))
	if !ok || n.reg == nil {
		return
	}
	ref := v.(partRef)
	if leader == n.self {
		n.reg.SetLeader(ref.db, ref.p, term)
		select { // never block the Raft loop
		case n.led <- struct{}{}:
		default:
		}
	} else {
		n.reg.SetLeader(ref.db, ref.p, 0)
	}
}

// Addr is the HTTP address the node listens on.
func (n *Node) Addr() string { return n.listener.Addr().String() }

// Secure reports whether the node runs in secure mode (Config.CertsDir).
func (n *Node) Secure() bool { return n.sec.secure() }

// ReloadCertificates re-reads the certs directory (on SIGHUP): new
// handshakes on every link use what it holds. On error the certificates
// in use stay, and the error says why. Insecure: nothing to do.
func (n *Node) ReloadCertificates() error { return n.sec.reload() }

// watchCertificates reloads the certificates when their files change.
func (n *Node) watchCertificates() {
	defer n.wg.Done()
	ctx, cancel := n.stopContext()
	defer cancel()
	n.sec.certs.Watch(ctx, n.cfg.CertsPollInterval)
}

// Users is the node's store of users: what bootstraps root's first
// password (`doppio dev --secure`) and tests write through.
func (n *Node) Users() *auth.Store { return n.users }

// PeerAddr is the address of the node's peer listener: the Raft transport
// and the peer HTTP API, published as membership.Node.GRPC.
func (n *Node) PeerAddr() string { return n.peerMux.Addr().String() }

func (n *Node) etcdEndpoints() []string {
	if n.etcd != nil {
		return n.etcd.Endpoints()
	}
	return n.cfg.EtcdEndpoints
}

// StorageReport is the storage engine's report of its LSM: levels,
// flushes, compactions, blob files, caches (Pebble's Metrics, as text).
func (n *Node) StorageReport() string { return n.engine.Metrics().String() }

// FlushStorage writes the storage engine's memtables to sstables and
// returns once they are written (compactions they start go on). It is a
// checkpoint for an embedding program (a benchmark settling a node after
// its load, as PostgreSQL's CHECKPOINT does); a node never needs it.
func (n *Node) FlushStorage() error { return n.engine.Flush() }

// Close stops serving and closes everything, in reverse order of opening.
func (n *Node) Close() error {
	if n.ops != nil {
		n.ops.HandOff(3 * time.Second)
		n.ops.Drain(operator.DrainPeriod)
	}
	n.api.EndStreams()
	close(n.stop)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var errs []error
	if n.http != nil {
		errs = append(errs, n.http.Shutdown(ctx))
	}
	n.wg.Wait()
	if n.derived != nil {
		n.derived.Close()
	}
	if n.loads != nil {
		// A chunk in flight lands or not; the next leader resumes.
		n.loads.Close()
	}
	if n.streams != nil {
		// Tasks write their checkpoints and give their ownerships up.
		n.streams.Close()
	}
	if n.quotas != nil {
		n.quotas.Close()
	}
	if n.reg != nil {
		// Leave at once: routers stop sending here, peers elect.
		errs = append(errs, n.reg.Close())
	}
	if n.host != nil {
		errs = append(errs, n.host.Close())
	}
	if n.peerHTTP != nil {
		// Last of the listeners: a straggler's forward meets an answer
		// (not applied, routed again) rather than a dropped connection,
		// which would leave its write's outcome unknown.
		errs = append(errs, n.peerHTTP.Shutdown(ctx))
		<-n.peerDone
	}
	if n.peerMux != nil {
		errs = append(errs, n.peerMux.Close())
	}
	if n.registry != nil {
		n.registry.Close()
	}
	if n.view != nil {
		n.view.Close()
	}
	if n.catalog != nil {
		n.catalog.Close()
	}
	closeCacheTier(n.tier, n.tierStore)
	if n.users != nil {
		n.users.Close()
	}
	errs = append(errs, n.audit.Close())
	if n.client != nil {
		errs = append(errs, n.client.Close())
	}
	if n.engine != nil {
		errs = append(errs, n.engine.Close())
	}
	if n.etcd != nil {
		errs = append(errs, n.etcd.Close())
	}
	return errors.Join(errs...)
}

// stopContext returns a context cancelled when the node stops, or by the
// returned cancel, which the caller must call to end the watcher.
func (n *Node) stopContext() (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		select {
		case <-n.stop:
			cancel()
		case <-ctx.Done():
		}
	}()
	return ctx, cancel
}

// runController takes part in the placement controller's election until
// the node closes (resigning then, so another node takes over at once).
func (n *Node) runController() {
	defer n.wg.Done()
	ctx, cancel := n.stopContext()
	defer cancel()
	opts := n.cfg.Controller
	opts.Prefix, opts.Logger = etcdPrefix, n.log
	opts.OnActive = n.controlling.Store
	_ = controller.Run(ctx, n.client, n.cfg.ID, opts)
}

// ActiveController returns the node id of the active placement
// controller ("" while none is elected).
func (n *Node) ActiveController(ctx context.Context) (string, error) {
	return controller.Active(ctx, n.client, etcdPrefix)
}

// trimLoop applies the change-log retention to every partition.
func (n *Node) trimLoop() {
	defer n.wg.Done()
	t := time.NewTicker(30 * time.Second)
	defer t.Stop()
	for {
		select {
		case <-n.stop:
			return
		case now := <-t.C:
			for _, ps := range n.registry.All() {
				for _, p := range ps {
					if _, err := p.TrimLog(n.cfg.Retention, now); err != nil {
						n.log.Error("trim change log", "db", p.DB, "partition", p.ID, "err", err)
					}
					n.forgetOutcomes(p, now)
				}
			}
		}
	}
}

// forgetOutcomes purges the expired idempotency outcomes of p where this
// node leads it; followers apply the leader's purge.
func (n *Node) forgetOutcomes(p *partition.Replica, now time.Time) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := p.ForgetOutcomes(ctx, now); err != nil && !partition.IsNotApplied(err) {
		n.log.Warn("forget expired idempotency outcomes", "db", p.DB, "partition", p.ID, "err", err)
	}
}

// followCatalog brings every open partition's indexes in line with schema
// changes made through any node, and starts index builds on partitions this
// node has just come to lead.
func (n *Node) followCatalog() {
	defer n.wg.Done()
	changes, cancel := n.catalog.Subscribe()
	defer cancel()
	versions, cancelVersions := n.derived.Subscribe()
	defer cancelVersions()
	for {
		select {
		case <-n.stop:
			return
		case <-changes:
		case <-versions:
		case <-n.led:
		}
		for db := range n.registry.All() {
			if err := n.registry.SyncIndexes(db); err != nil {
				n.log.Error("sync indexes", "db", db, "err", err)
			}
		}
	}
}

// hosted yields every partition hosted here with its Raft group.
func (n *Node) hosted() iter.Seq2[partRef, *replication.Member] {
	return func(yield func(partRef, *replication.Member) bool) {
		for db, ps := range n.registry.All() {
			for _, rep := range ps {
				if _, g, ok := n.registry.Hosted(db, rep.ID); ok && !yield(partRef{db, rep.ID}, g) {
					return
				}
			}
		}
	}
}

// DefaultRowCacheBytes is the default size of a node's row cache.
const DefaultRowCacheBytes = 128 << 20

func (c Config) rowCacheBytes() int64 {
	switch {
	case c.RowCacheBytes < 0:
		return 0
	case c.RowCacheBytes == 0:
		return DefaultRowCacheBytes
	}
	return c.RowCacheBytes
}
