package node

import (
	"context"
	"errors"
	"fmt"
	"github.com/doppio-db/doppio/internal/cache"
	"github.com/doppio-db/doppio/internal/cache/tier"
	"log/slog"
	"net"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/doppio-db/doppio/internal/api"
	"github.com/doppio-db/doppio/internal/auth"
	"github.com/doppio-db/doppio/internal/buildinfo"
	"github.com/doppio-db/doppio/internal/catalog"
	"github.com/doppio-db/doppio/internal/http1"
	"github.com/doppio-db/doppio/internal/membership"
	"github.com/doppio-db/doppio/internal/quota"
	"github.com/doppio-db/doppio/internal/replicas"
)

// RouterConfig configures a stateless router process.
type RouterConfig struct {
	// ID names the router in X-Doppio-Forwarded-By (default "router").
	ID string
	// HTTPAddr is the REST listen address (":0" picks a free port).
	HTTPAddr string
	// EtcdEndpoints of the cluster's etcd, where the routing table lives.
	EtcdEndpoints []string
	// API limits and request deadline, as on a node; API.Authenticate
	// makes the router authenticate and authorize requests itself, with
	// the cluster's users (Auth and Users as on a node).
	API    api.Config
	Auth   auth.Config
	Users  auth.StoreOptions
	Logger *slog.Logger
	// CertsDir and Insecure are as on a node (Config): in secure mode
	// the router serves TLS, reaches etcd over TLS and forwards to the
	// nodes over TLS with the node certificate.
	CertsDir string
	Insecure bool
	// NetHTTPOnly serves the REST API with net/http alone, as on a node
	// (Config.NetHTTPOnly).
	NetHTTPOnly bool
	// Cache is the cache tier's read side, as on a node (Config.Cache).
	Cache CacheConfig
}

// Router is a stateless `doppio router`: the REST API of the cluster with
// no storage. It watches the routing table in etcd (live nodes, published
// leaderships) and the catalog, sends each document request to its
// partition's leader, asks every partition's leader for a query over all
// partitions, and relays schema and cluster requests to any live node.
// /healthz, /readyz and /metrics are its own.
type Router struct {
	log      *slog.Logger
	sec      *transportSecurity
	stop     context.CancelFunc // ends the certificates' watch
	listener net.Listener
	http     *http1.Server
	client   *clientv3.Client
	catalog  *catalog.Catalog
	view     *membership.View
	registry *replicas.Registry
	api      *api.Server
	users    *auth.Store
	// quotas are followed only to forget the leaders' over-quota
	// refusals when a quota changes (api.Server.RefuseEarly).
	quotas *quota.Store
	wg     sync.WaitGroup
	// tier and tierStore are the cache tier's read side (nil: none).
	tier      *tier.Tier
	tierStore *cache.Store
}

// StartRouter starts a router; it answers /healthz at once and the rest
// once the catalog and the routing table are loaded.
func StartRouter(ctx context.Context, cfg RouterConfig) (*Router, error) {
	if len(cfg.EtcdEndpoints) == 0 {
		return nil, errors.New("a router needs the cluster's etcd endpoints")
	}
	if cfg.ID == "" {
		cfg.ID = "router"
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	cfg.API.NodeID = cfg.ID
	rt := &Router{log: cfg.Logger}
	sec, err := openSecurity(cfg.CertsDir, cfg.Insecure, rt.log, cfg.EtcdEndpoints, cfg.HTTPAddr)
	if err != nil {
		return nil, err
	}
	rt.sec = sec
	registry := prometheus.NewRegistry()
	registry.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}), buildinfo.Collector())
	sec.register(registry)
	rt.api = api.New(sec.apiConfig(cfg.API), nil, nil, registry, rt.log, nil)
	if rt.tier, rt.tierStore, err = openCacheTier(cfg.Cache, registry, rt.log); err != nil {
		return nil, err
	}
	if rt.tier != nil {
		rt.api.AttachCache(rt.tier)
	}
	cfg.Auth.Registerer = registry
	ln, err := net.Listen("tcp", cfg.HTTPAddr)
	if err != nil {
		return nil, fmt.Errorf("listen on %s: %w", cfg.HTTPAddr, err)
	}
	rt.listener = ln
	rt.http = rt.api.HTTPServer()
	rt.http.TLSConfig = sec.serverTLS()
	rt.http.FallbackOnly = cfg.NetHTTPOnly
	rt.wg.Add(1)
	go func() {
		defer rt.wg.Done()
		if err := rt.http.Serve(ln); err != nil && !errors.Is(err, http1.ErrServerClosed) {
			rt.log.Error("http server stopped", "err", err)
		}
	}()
	if err := rt.open(ctx, cfg); err != nil {
		rt.Close()
		return nil, err
	}
	rt.api.SetReady(true)
	if sec.secure() {
		var wctx context.Context
		wctx, rt.stop = context.WithCancel(context.Background())
		go sec.certs.Watch(wctx, 0)
	}
	rt.log.Info("doppio router ready", "id", cfg.ID, "http", rt.Addr(), "etcd", cfg.EtcdEndpoints, "secure", sec.secure())
	return rt, nil
}

// etcdProbeTimeout bounds a router's first exchange with etcd.
const etcdProbeTimeout = 5 * time.Second

func (rt *Router) open(ctx context.Context, cfg RouterConfig) error {
	cli, err := clientv3.New(clientv3.Config{Endpoints: cfg.EtcdEndpoints, DialTimeout: 5 * time.Second, Logger: quietZap(), TLS: rt.sec.etcdTLS()})
	if err != nil {
		return fmt.Errorf("etcd client: %w", err)
	}
	rt.client = cli
	// The client dials lazily and the watches below retry forever: a
	// wrong endpoint must fail here, with the endpoint named.
	probe, cancel := context.WithTimeout(ctx, etcdProbeTimeout)
	_, err = cli.Get(probe, etcdPrefix+"probe", clientv3.WithCountOnly())
	cancel()
	if err != nil && ctx.Err() == nil {
		return fmt.Errorf("cannot reach etcd at %s within %s (doppio dev prints its endpoint on its first line, \"etcd: …\"): %w",
			strings.Join(cfg.EtcdEndpoints, ","), etcdProbeTimeout, err)
	}
	if rt.catalog, err = catalog.Open(ctx, cli, etcdPrefix); err != nil {
		return err
	}
	if rt.view, err = membership.Open(ctx, cli, etcdPrefix, rt.log); err != nil {
		return err
	}
	uo := cfg.Users
	uo.Logger = rt.log
	if rt.users, err = auth.OpenStore(ctx, cli, etcdPrefix, uo); err != nil {
		return err
	}
	rt.api.AttachAuth(auth.New(rt.users, cfg.Auth))
	lim := quota.NewLimiter(quota.LimiterConfig{})
	if rt.quotas, err = quota.Open(ctx, quota.StoreConfig{Client: cli, Prefix: etcdPrefix, Limiter: lim, Logger: rt.log}); err != nil {
		return fmt.Errorf("quotas: %w", err)
	}
	rt.api.RefuseEarly(lim.Version)
	// No replica is ever opened here, so every request is routed
	// elsewhere: to the leader the routing table names.
	rt.registry = replicas.New(replicas.Config{
		Tables:    rt.catalog.Tables,
		Directory: directory{rt.view},
		Logger:    rt.log,
	})
	rt.api.Attach(rt.catalog, rt.registry)
	rt.api.Relay(func() []api.Peer {
		nodes := rt.view.Nodes()
		out := make([]api.Peer, len(nodes))
		for i, n := range nodes {
			out[i] = api.Peer{ID: n.ID, Addr: n.GRPC}
		}
		return out
	})
	return nil
}

// Addr is the HTTP address the router listens on.
func (rt *Router) Addr() string { return rt.listener.Addr().String() }

// ReloadCertificates re-reads the certs directory (on SIGHUP), as
// Node.ReloadCertificates.
func (rt *Router) ReloadCertificates() error { return rt.sec.reload() }

// Close stops serving and closes the watches.
func (rt *Router) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var errs []error
	if rt.stop != nil {
		rt.stop()
	}
	if rt.http != nil {
		errs = append(errs, rt.http.Shutdown(ctx))
	}
	rt.wg.Wait()
	if rt.registry != nil {
		rt.registry.Close()
	}
	if rt.users != nil {
		rt.users.Close()
	}
	if rt.quotas != nil {
		rt.quotas.Close()
	}
	closeCacheTier(rt.tier, rt.tierStore)
	if rt.view != nil {
		rt.view.Close()
	}
	if rt.catalog != nil {
		rt.catalog.Close()
	}
	if rt.client != nil {
		errs = append(errs, rt.client.Close())
	}
	return errors.Join(errs...)
}
