package main

import (
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/doppio-db/doppio/internal/api"
	"github.com/doppio-db/doppio/internal/node"
	"github.com/doppio-db/doppio/internal/partition"
	"github.com/spf13/cobra"
)

func devCommand() *cobra.Command {
	var (
		dataDir      string
		httpAddr     string
		maxDoc       int
		logEntries   uint64
		logAge       time.Duration
		etcdEndpoint []string
	)
	cmd := &cobra.Command{
		Use:   "dev",
		Short: "Run a single Doppio node with an embedded etcd, data under one directory",
		RunE: func(cmd *cobra.Command, _ []string) error {
			logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			n, err := node.Start(ctx, node.Config{
				DataDir:       dataDir,
				HTTPAddr:      httpAddr,
				EtcdEndpoints: etcdEndpoint,
				API:           api.Config{MaxDocumentBytes: maxDoc},
				Retention:     partition.Retention{MaxEntries: logEntries, MaxAge: logAge},
				Logger:        logger,
			})
			if err != nil {
				return err
			}
			<-ctx.Done()
			logger.Info("shutting down")
			return n.Close()
		},
	}
	f := cmd.Flags()
	f.StringVar(&dataDir, "data", "./doppio-data", "directory holding the node's data (Pebble store and embedded etcd)")
	f.StringVar(&httpAddr, "http", "127.0.0.1:8080", "REST listen address (port 0 picks a free port)")
	f.IntVar(&maxDoc, "max-document-bytes", 1<<20, "largest accepted document")
	f.Uint64Var(&logEntries, "changelog-max-entries", 1_000_000, "change-log entries kept per partition (0 = unbounded)")
	f.DurationVar(&logAge, "changelog-max-age", 7*24*time.Hour, "age after which change-log entries are trimmed (0 = never)")
	f.StringSliceVar(&etcdEndpoint, "etcd", nil, "external etcd endpoints (default: embedded etcd in the data directory)")
	return cmd
}
