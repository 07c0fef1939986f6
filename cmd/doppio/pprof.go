package main

import (
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"sync/atomic"

	"github.com/doppio-db/doppio/internal/node"
)

// running is the node once it runs, for /debug/pebble.
var running atomic.Pointer[node.Node]

// servePprof serves net/http/pprof on addr (for profiling under load, e.g.
// the YCSB benchmark), and /debug/pebble: the storage engine's report of
// its levels, flushes, compactions, blob files and caches (Pebble's
// Metrics), to see what the LSM does under a load. It is off unless
// --pprof is given, and never on the REST listener.
func servePprof(addr string, logger *slog.Logger) error {
	if addr == "" {
		return nil
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	mux.HandleFunc("/debug/pebble", servePebble)
	logger.Info("pprof listening", "addr", ln.Addr().String())
	go func() { _ = http.Serve(ln, mux) }()
	return nil
}

func servePebble(w http.ResponseWriter, _ *http.Request) {
	n := running.Load()
	if n == nil {
		http.Error(w, "the node has not started yet", http.StatusServiceUnavailable)
		return
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	io.WriteString(w, n.StorageReport())
}
