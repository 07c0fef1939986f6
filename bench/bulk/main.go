// Command bulk measures the bulk path of issue 29 (the Espresso paper's
// section 3.3) against its peers, in one run on one machine:
//
//   - the MailboxDB messages data set (bench/internal/mailboxdata) as a
//     JSON Lines file of -messages messages, -per-mailbox per mailbox;
//   - (a) loaded through the document API with the Go client (smart
//     routing), at the best of the -api-clients concurrencies, each tried
//     for -probe on the head of the data set first;
//   - (b) built with the Go builder (`doppio bulk build`) and bulk-loaded
//     (`POST /_bulk/loads`) into a 3-node cluster, replicas 3;
//   - (c) copied into PostgreSQL's JSONB table of bench/mailbox (COPY,
//     then its indexes and ANALYZE);
//   - exported (`doppio export --format jsonl`) against PostgreSQL's
//     COPY TO;
//   - a foreground workload (reads and writes of single messages) for
//     -before, then during a second load (a -throttled-share of the data
//     set more) throttled to last about -during: its read and write p99.
//
// It writes bulk.md and bulk.png to -out. Run it with `make bench-bulk`
// (BULK_FLAGS=-quick for a smoke run).
package main

import (
	"context"
	"flag"
	"log"
	"path/filepath"
	"time"

	"github.com/doppio-db/doppio/bench/internal/benchutil"
)

// config is everything a run depends on.
type config struct {
	benchutil.Common
	Messages, PerMailbox int
	Partitions           int
	APIClients           []int
	Probe                time.Duration
	Foreground           int
	Before, During       time.Duration
	ThrottledShare       float64
	ExportParallel       int
}

func main() {
	var (
		messages   = flag.Int("messages", 2_000_000, "messages in the data set (about 1.2 KB of JSON each)")
		perMailbox = flag.Int("per-mailbox", 1000, "messages per mailbox")
		partitions = flag.Int("partitions", 8, "partitions of the database (3 replicas each)")
		apiClients = flag.String("api-clients", "8,32,128", "concurrencies of the document API load; the best is kept")
		probe      = flag.Duration("probe", 15*time.Second, "how long each -api-clients concurrency is tried")
		foreground = flag.Int("foreground", 8, "closed-loop clients of the foreground workload (half reads, half writes)")
		before     = flag.Duration("before", 30*time.Second, "foreground workload measured before the throttled load")
		during     = flag.Duration("during", 60*time.Second, "how long the throttled load should last (sets its throttle)")
		share      = flag.Float64("throttled-share", 0.25, "size of the throttled load as a share of -messages")
		exportPar  = flag.Int("export-parallel", 4, "partitions `doppio export` reads at a time")
	)
	common := benchutil.CommonFlags("bulk", "smoke run: 20,000 messages, 3 s probes, 8 s before and during")
	flag.Parse()
	cfg := config{
		Messages: *messages, PerMailbox: *perMailbox, Partitions: *partitions, Probe: *probe,
		Foreground: *foreground, Before: *before, During: *during, ThrottledShare: *share, ExportParallel: *exportPar,
		Common: common(),
	}
	var err error
	if cfg.APIClients, err = benchutil.ParseInts(*apiClients); err != nil {
		log.Fatalf("-api-clients: %v", err)
	}
	if cfg.Quick {
		benchutil.Unset(map[string]func(){
			"messages":    func() { cfg.Messages = 20_000 },
			"per-mailbox": func() { cfg.PerMailbox = 100 },
			"probe":       func() { cfg.Probe = 3 * time.Second },
			"before":      func() { cfg.Before = 8 * time.Second },
			"during":      func() { cfg.During = 8 * time.Second },
		})
	}
	if cfg.Messages < cfg.PerMailbox || cfg.PerMailbox < 1 || len(cfg.APIClients) == 0 || cfg.ThrottledShare <= 0 {
		log.Fatal("want -messages ≥ -per-mailbox ≥ 1, at least one -api-clients and a positive -throttled-share")
	}
	benchutil.Main(func(ctx context.Context) error { return run(ctx, cfg) })
	log.Printf("wrote %s and bulk.png", filepath.Join(cfg.Out, "bulk.md"))
}
