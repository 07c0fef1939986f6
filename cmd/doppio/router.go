package main

import (
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/doppio-db/doppio/internal/api"
	"github.com/doppio-db/doppio/internal/node"
)

func routerCommand(common *clientFlags) *cobra.Command {
	var (
		id, httpAddr string
		etcd         []string
		maxDoc       int
		timeout      time.Duration
		insecure     bool
		httpServer   string
		log          logFlags
		cache        cacheFlags
	)
	cmd := &cobra.Command{
		Use:         "router",
		Annotations: map[string]string{serverCommand: "router"},
		Short:       "Run a stateless router in front of a Doppio cluster",
		Long: `Run a stateless router: the cluster's REST API with no storage.

It watches the routing table in the cluster's etcd and sends each document
request to its partition's leader, asks every partition's leader for a
query without a partition key, and relays schema and /_cluster requests to
any live node. Run as many as you like, e.g.

  doppio router --etcd http://127.0.0.1:2379 --http 127.0.0.1:8080

With --certs-dir (ca.crt, node.crt, node.key) it serves TLS, reaches etcd
(https endpoints) and the nodes over TLS with the node certificate, and
reloads the certificates on SIGHUP or when they change. Without it, it
refuses to listen anywhere but loopback unless --insecure is given.`,
		RunE: func(cmd *cobra.Command, _ []string) error {
			logger, err := log.logger()
			if err != nil {
				return err
			}
			netHTTP, err := netHTTPOnly(httpServer)
			if err != nil {
				return err
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			rt, err := node.StartRouter(ctx, node.RouterConfig{
				ID: id, HTTPAddr: httpAddr, EtcdEndpoints: etcd, Logger: logger,
				API:      api.Config{MaxDocumentBytes: maxDoc, RequestTimeout: timeout},
				CertsDir: common.certsDir, Insecure: insecure, NetHTTPOnly: netHTTP,
				Cache: cache.config(),
			})
			if err != nil {
				return err
			}
			reloadOnHangup(ctx, logger, rt.ReloadCertificates)
			<-ctx.Done()
			logger.Info("shutting down")
			return rt.Close()
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&id, "id", "router", "name of this router in X-Doppio-Forwarded-By")
	fl.StringVar(&httpAddr, "http", "127.0.0.1:8080", "REST listen address (port 0 picks a free port)")
	fl.StringSliceVar(&etcd, "etcd", nil, "the cluster's etcd endpoints, comma-separated (required)")
	fl.IntVar(&maxDoc, "max-document-bytes", 1<<20, "largest accepted document")
	fl.DurationVar(&timeout, "request-timeout", 5*time.Second, "longest a request waits for a leader (X-Doppio-Timeout shortens it)")
	fl.BoolVar(&insecure, "insecure", false, "run without TLS although listening off loopback (refused without --certs-dir otherwise)")
	registerHTTPServer(fl, &httpServer)
	log.register(fl)
	cache.register(fl)
	_ = cmd.MarkFlagRequired("etcd")
	return cmd
}
