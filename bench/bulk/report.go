package main

import (
	"fmt"
	"strings"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/vg"

	"github.com/doppio-db/doppio/bench/internal/benchutil"
)

// report is the whole run.
type report struct {
	benchutil.Run
	Cfg config
	Res results
}

const mib = 1 << 20

func (r *report) markdown() string {
	var b strings.Builder
	w := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	x := r.Res
	w("%s", r.Header("Bulk load and export against the document API and PostgreSQL", "bench-bulk", x.PGVersion, r.Cfg.Quick, x.LoadAvg, "2 GB of JSON, the default -messages"))

	w("## What runs\n\n")
	w("- Data: the MailboxDB messages of `bench/mailbox` (`bench/internal/mailboxdata`, seed %d): %d messages in mailboxes of %d, %.1f MiB of JSON Lines (%.0f bytes a message), each line the key parts (`mailboxId`, `messageId`) beside the 39 fields; four fields indexed (`body` as text, `isInbox`, `createdOn`, `senderId`).\n",
		r.Cfg.Seed, x.Messages, r.Cfg.PerMailbox, float64(x.InputBytes)/mib, float64(x.InputBytes)/float64(x.Messages))
	w("- Doppio: %d `doppio start` processes on this machine with one etcd, a database of %d partitions with 3 replicas each, so every document is written three times on the same CPUs and disk; PostgreSQL writes it once.\n", nodes, r.Cfg.Partitions)
	w("- (a) Document API: one `PUT` per message through the Go client with smart routing, into a table of its own (a 503 or 504 put again, as the API's contract allows); %s tried for %v each on the head of the data set, the fastest loading the rest.\n", benchutil.JoinInts(r.Cfg.APIClients)+" clients", r.Cfg.Probe)
	w("- (b) Bulk: `doppio bulk build` (the Go builder, schema from the server) of the JSON Lines file, then `POST /_bulk/loads` of the build, timed from the request until the load reports done (every partition applied on its leader and replicated).\n")
	w("- (c) PostgreSQL (private cluster, fsync and synchronous_commit on): one `COPY` into `bench/mailbox`'s table `messages(mailbox_id, message_id, doc jsonb, primary key)`, then its three other indexes (two expression btrees and a GIN over the body's tsvector) and `ANALYZE`.\n")
	w("- Export: `doppio export %s --tables %s --format jsonl --parallel %d` (a snapshot of every partition, read from followers) against `COPY messages TO STDOUT` into a file.\n", db, bulkTable, r.Cfg.ExportParallel)
	w("- Foreground: %d closed-loop clients (half `GET`s of loaded messages, half `PUT`s of new ones) for %v, then during a second bulk load of %d messages (%.1f MiB of JSON) throttled to %s per node, which took %v.\n\n",
		r.Cfg.Foreground, r.Cfg.Before, x.Throttled, float64(x.ThrottledBytes)/mib, perSecond(x.Throttle), x.ThrottleTook.Round(100*time.Millisecond))

	bulkTotal := x.Build + x.Load
	api := float64(x.InputBytes) / float64(x.Messages) * float64(x.APIDocs) / x.APITook.Seconds()
	rate := func(d time.Duration) float64 { return float64(x.InputBytes) / d.Seconds() }
	pgTotal := x.PGCopy + x.PGIndex
	w("## Loading\n\n")
	w("| | time | messages/s | MiB/s of JSON | bulk build + load is |\n|---|---:|---:|---:|---:|\n")
	row := func(name string, d time.Duration, bps float64) {
		w("| %s | %s | %.0f | %.2f | %.2f× |\n", name, secs(d), bps/float64(x.InputBytes)*float64(x.Messages), bps/mib, rate(bulkTotal)/bps)
	}
	row(fmt.Sprintf("(a) document API, %d clients", x.APIClients), time.Duration(float64(x.InputBytes)/api*float64(time.Second)), api)
	row("(b) bulk build (Go builder)", x.Build, rate(x.Build))
	row("(b) bulk load", x.Load, rate(x.Load))
	row("(b) bulk build + load", bulkTotal, rate(bulkTotal))
	row("(c) PostgreSQL COPY (primary key)", x.PGCopy, rate(x.PGCopy))
	row("(c) PostgreSQL indexes + ANALYZE", x.PGIndex, rate(x.PGIndex))
	row("(c) PostgreSQL COPY with indexes", pgTotal, rate(pgTotal))
	w("\nThe document API's time is the data set's at the rate it reached with %d clients (%d messages in %v). The build wrote %.1f MiB of partition files.\n\n",
		x.APIClients, x.APIDocs, x.APITook.Round(100*time.Millisecond), float64(x.BuildBytes)/mib)
	w("| document API clients | messages | seconds | messages/s |\n|---:|---:|---:|---:|\n")
	for _, p := range x.Probes {
		w("| %d | %d | %.1f | %.0f |\n", p.Clients, p.Docs, p.Took.Seconds(), p.rate())
	}
	gib := float64(x.InputBytes) / (1 << 30)
	w("\nPer node: %.2f GiB/h of JSON input for build and load together, %.2f GiB/h for the load alone (the data set over the time, shared by the %d nodes; each also applies the other nodes' partitions as a follower). TiDB Lightning publishes 100–500 GiB/h per instance on much larger machines.\n\n",
		gib/bulkTotal.Hours()/nodes, gib/x.Load.Hours()/nodes, nodes)

	w("## Foreground workload during a throttled load\n\n")
	w("| | before p50 | before p99 | during p50 | during p99 | p99 during / before | requests/s before | during | failed before | during |\n|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, k := range []string{"read", "write"} {
		bf, du := x.Before[k], x.During[k]
		w("| %s | %s | %s | %s | %s | %.2f× | %.0f | %.0f | %d | %d |\n", k, benchutil.Millis(bf.P50), benchutil.Millis(bf.P99), benchutil.Millis(du.P50), benchutil.Millis(du.P99), ratio(du.P99, bf.P99), bf.Throughput, du.Throughput, bf.Failed, du.Failed)
	}
	w("\nLatencies in milliseconds, of the requests that succeeded; a failed one is an error after the Go client's retries.\n\n")

	w("## Export\n\n")
	w("| | rows | time | rows/s | MiB/s written |\n|---|---:|---:|---:|---:|\n")
	w("| `doppio export` (JSON Lines) | %d | %s | %.0f | %.2f |\n", x.ExportRows, secs(x.Export), float64(x.ExportRows)/x.Export.Seconds(), float64(x.ExportBytes)/mib/x.Export.Seconds())
	w("| PostgreSQL `COPY TO` | %d | %s | %.0f | %.2f |\n", x.CopyToRows, secs(x.CopyTo), float64(x.CopyToRows)/x.CopyTo.Seconds(), float64(x.CopyToBytes)/mib/x.CopyTo.Seconds())
	w("\nThe export holds the table as it ended: the data set, the throttled load and the foreground's writes.\n\n")

	w("## Against the issue's goals\n\n")
	w("| goal | this run |\n|---|---:|\n")
	w("| bulk load ≥ 10× the document API | %.1f× (build + load), %.1f× (load) |\n", rate(bulkTotal)/api, rate(x.Load)/api)
	w("| bulk load faster than PostgreSQL COPY with indexes | %.2f× (build + load), %.2f× (load) |\n", rate(bulkTotal)/rate(pgTotal), rate(x.Load)/rate(pgTotal))
	w("| foreground p99 during a throttled load ≤ 1.5× before | read %.2f×, write %.2f× |\n", ratio(x.During["read"].P99, x.Before["read"].P99), ratio(x.During["write"].P99, x.Before["write"].P99))
	w("| export ≥ PostgreSQL COPY TO (rows/s) | %.2f× |\n", (float64(x.ExportRows)/x.Export.Seconds())/(float64(x.CopyToRows)/x.CopyTo.Seconds()))
	w("\n![Loading and export rates](bulk.png)\n")
	return b.String()
}

func (r *report) plot(path string) error {
	x := r.Res
	rate := func(d time.Duration) float64 { return float64(x.InputBytes) / mib / d.Seconds() }
	api := float64(x.InputBytes) / float64(x.Messages) * float64(x.APIDocs) / x.APITook.Seconds() / mib
	load, err := benchutil.Bars("Loading the data set", "MiB of JSON input per second",
		[]string{"document API", "bulk build+load", "bulk load", "PG COPY+indexes", "PG COPY"},
		[]float64{api, rate(x.Build + x.Load), rate(x.Load), rate(x.PGCopy + x.PGIndex), rate(x.PGCopy)})
	if err != nil {
		return err
	}
	export, err := benchutil.Bars("Export", "rows per second",
		[]string{"doppio export", "PG COPY TO"},
		[]float64{float64(x.ExportRows) / x.Export.Seconds(), float64(x.CopyToRows) / x.CopyTo.Seconds()})
	if err != nil {
		return err
	}
	return benchutil.WritePlots(path, vg.Points(480), vg.Points(400), []*plot.Plot{load, export}...)
}

func secs(d time.Duration) string { return fmt.Sprintf("%.1f s", d.Seconds()) }

func ratio(a, b time.Duration) float64 {
	if b == 0 {
		return 0
	}
	return float64(a) / float64(b)
}

func perSecond(n int64) string { return fmt.Sprintf("%.0f KiB/s", float64(n)/1024) }
