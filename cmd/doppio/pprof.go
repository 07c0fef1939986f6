package main

import (
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"sync/atomic"
)

// storageReport, once the node runs, returns its storage engine's LSM
// report for /debug/pebble.
var storageReport atomic.Pointer[func() string]

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
	report := storageReport.Load()
	if report == nil {
		http.Error(w, "the node has not started yet", http.StatusServiceUnavailable)
		return
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	io.WriteString(w, (*report)())
}
