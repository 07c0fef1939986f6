// Package node wires one Doppio process: the HTTP listener, etcd (embedded or
// external), the schema catalog, the storage engine, the router with its
// partition replicas, and the background work of the node.
package node

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/doppio-db/doppio/internal/api"
	"github.com/doppio-db/doppio/internal/catalog"
	"github.com/doppio-db/doppio/internal/embedetcd"
	"github.com/doppio-db/doppio/internal/partition"
	"github.com/doppio-db/doppio/internal/router"
	"github.com/doppio-db/doppio/internal/storage"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// Config configures a node.
type Config struct {
	// ID names the node in /_cluster (default "dev").
	ID string
	// DataDir holds the node's Pebble store and, when embedded, etcd.
	DataDir string
	// HTTPAddr is the REST listen address, e.g. 127.0.0.1:8080 (":0" picks
	// a free port; see Node.Addr).
	HTTPAddr string
	// EtcdEndpoints of an external etcd; empty starts an embedded one in
	// DataDir/etcd.
	EtcdEndpoints []string
	// API limits.
	API api.Config
	// Retention of each partition's change log.
	Retention partition.Retention
	Logger    *slog.Logger
}

// Node is a running Doppio process.
type Node struct {
	cfg      Config
	log      *slog.Logger
	listener net.Listener
	http     *http.Server

	etcd    *embedetcd.Server
	client  *clientv3.Client
	catalog *catalog.Catalog
	engine  *storage.Engine
	router  *router.Router
	api     *api.Server

	stop chan struct{}
	wg   sync.WaitGroup
}

// Start opens the node. The HTTP listener comes up first, so /healthz,
// /readyz (503 until ready) and /metrics answer while the rest starts.
func Start(ctx context.Context, cfg Config) (*Node, error) {
	if cfg.ID == "" {
		cfg.ID = "dev"
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	n := &Node{cfg: cfg, log: cfg.Logger, stop: make(chan struct{})}
	if err := os.MkdirAll(cfg.DataDir, 0o755); err != nil {
		return nil, err
	}

	registry := prometheus.NewRegistry()
	registry.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	n.api = api.New(cfg.API, nil, nil, registry, n.log, n.clusterInfo)

	ln, err := net.Listen("tcp", cfg.HTTPAddr)
	if err != nil {
		return nil, fmt.Errorf("listen on %s: %w", cfg.HTTPAddr, err)
	}
	n.listener = ln
	n.http = &http.Server{Handler: n.api, ReadHeaderTimeout: 10 * time.Second}
	n.wg.Add(1)
	go func() {
		defer n.wg.Done()
		if err := n.http.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			n.log.Error("http server stopped", "err", err)
		}
	}()

	if err := n.open(ctx, registry); err != nil {
		n.Close()
		return nil, err
	}
	n.api.SetReady(true)
	n.wg.Add(2)
	go n.trimLoop()
	go n.followCatalog()
	n.log.Info("doppio node ready", "id", cfg.ID, "http", n.Addr(), "data", cfg.DataDir, "etcd", n.etcdEndpoints())
	return n, nil
}

func (n *Node) open(ctx context.Context, registry *prometheus.Registry) error {
	endpoints := n.cfg.EtcdEndpoints
	if len(endpoints) == 0 {
		srv, err := embedetcd.Start(ctx, filepath.Join(n.cfg.DataDir, "etcd"), n.log)
		if err != nil {
			return fmt.Errorf("embedded etcd: %w", err)
		}
		n.etcd = srv
		endpoints = srv.Endpoints()
	}
	cli, err := clientv3.New(clientv3.Config{Endpoints: endpoints, DialTimeout: 5 * time.Second, Logger: quietZap()})
	if err != nil {
		return fmt.Errorf("etcd client: %w", err)
	}
	n.client = cli
	if n.catalog, err = catalog.Open(ctx, cli, "/doppio"); err != nil {
		return fmt.Errorf("catalog: %w", err)
	}
	if n.engine, err = storage.Open(filepath.Join(n.cfg.DataDir, "pebble"), storage.Options{Logger: n.log}); err != nil {
		return err
	}
	n.router = router.New(n.engine, partition.Limits{MaxDocumentBytes: n.cfg.API.MaxDocumentBytes}, n.catalog.Tables, n.log)
	n.api.Attach(n.catalog, n.router)
	registry.MustRegister(newCollector(n))
	return nil
}

// Addr is the HTTP address the node listens on.
func (n *Node) Addr() string { return n.listener.Addr().String() }

func (n *Node) etcdEndpoints() []string {
	if n.etcd != nil {
		return n.etcd.Endpoints()
	}
	return n.cfg.EtcdEndpoints
}

// Close stops serving and closes everything, in reverse order of opening.
func (n *Node) Close() error {
	close(n.stop)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var errs []error
	if n.http != nil {
		errs = append(errs, n.http.Shutdown(ctx))
	}
	n.wg.Wait()
	if n.router != nil {
		n.router.Close()
	}
	if n.catalog != nil {
		n.catalog.Close()
	}
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
			for _, ps := range n.router.All() {
				for _, p := range ps {
					if _, err := p.TrimLog(n.cfg.Retention, now); err != nil {
						n.log.Error("trim change log", "db", p.DB, "partition", p.ID, "err", err)
					}
				}
			}
		}
	}
}

// followCatalog brings every open partition's indexes in line with schema
// changes made through any node.
func (n *Node) followCatalog() {
	defer n.wg.Done()
	changes, cancel := n.catalog.Subscribe()
	defer cancel()
	for {
		select {
		case <-n.stop:
			return
		case <-changes:
			for db := range n.router.All() {
				if err := n.router.SyncIndexes(db); err != nil {
					n.log.Error("sync indexes", "db", db, "err", err)
				}
			}
		}
	}
}
