package main

import (
	"fmt"
	"image/color"
	"math"
	"os"
	"os/exec"
	"runtime/debug"
	"strconv"
	"strings"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"

	"github.com/doppio-db/doppio/bench/internal/benchutil"
)

// machine describes where the benchmark ran.
type machine struct {
	benchutil.Machine
	Bleve    string
	Postgres string
}

func describeMachine() machine {
	m := machine{Machine: benchutil.DescribeMachine()}
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, d := range bi.Deps {
			if d.Path == "github.com/blevesearch/bleve/v2" {
				m.Bleve = d.Version
			}
		}
	}
	if bin, err := findPostgresQuiet(); err == nil {
		if out, err := exec.Command(bin+"/postgres", "--version").Output(); err == nil {
			m.Postgres = strings.TrimSpace(string(out))
		}
	}
	return m
}

func findPostgresQuiet() (string, error) {
	if p, err := exec.LookPath("initdb"); err == nil {
		if real, err := os.Readlink(p); err == nil && strings.HasPrefix(real, "/") {
			p = real
		}
		d := p[:strings.LastIndex(p, "/")]
		if _, err := os.Stat(d + "/postgres"); err == nil {
			return d, nil
		}
	}
	for _, v := range []string{"17", "16", "15", "14"} {
		d := "/usr/lib/postgresql/" + v + "/bin"
		if _, err := os.Stat(d + "/postgres"); err == nil {
			return d, nil
		}
	}
	return "", os.ErrNotExist
}

func (r *results) run(set, system string) *systemRun {
	for _, x := range r.Runs {
		if x.Set == set && x.System == system {
			return x
		}
	}
	return nil
}

func (r *results) systemNames() []string {
	var out []string
	for _, s := range []string{"Doppio", "Bleve over HTTP", "Bleve", "PostgreSQL", "PostgreSQL over a Unix socket"} {
		for _, x := range r.Runs {
			if x.System == s {
				out = append(out, s)
				break
			}
		}
	}
	return out
}

func ms(v float64, n int) string {
	if n == 0 {
		return "–"
	}
	switch {
	case v >= 100:
		return fmt.Sprintf("%.0f", v)
	case v >= 10:
		return fmt.Sprintf("%.1f", v)
	}
	return fmt.Sprintf("%.2f", v)
}

func ratio(a, b stats) string {
	if a.N == 0 || b.N == 0 || b.Mean == 0 {
		return "–"
	}
	return fmt.Sprintf("%.2f / %.2f", a.Mean/b.Mean, a.P99/b.P99)
}

// report renders mailbox.md.
func report(r *results) string {
	var b strings.Builder
	w := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	w("# MailboxDB benchmark: Doppio's prefix index, Bleve, PostgreSQL\n\n")
	w("The Espresso paper's section 7.4 (Figure 7), rerun: the same mailbox workload against\n")
	w("(a) **Doppio**: a real in-process node (embedded etcd, Pebble with synced writes) through its REST API over loopback HTTP;\n")
	w("(b) **Bleve** %s: one scorch index per mailbox, as the paper had one Lucene index per mailbox, default durable batches; as **Bleve over HTTP**, behind a loopback HTTP server (Go's net/http) that takes the same requests and answers the same JSON page as Doppio's REST API, read by the same client code, as the paper compared Lucene and the prefix index inside one storage node behind one REST interface; as **Bleve**, called in-process (no HTTP, no JSON), which favours it;\n", r.Machine.Bleve)
	w("(c) **PostgreSQL** (%s): JSONB documents with expression btree indexes and a GIN index, synchronous_commit on, pgx over TCP on the loopback interface, as the clients of Doppio and Bleve over HTTP reach them (as **PostgreSQL over a Unix socket**, when run, pgx over its Unix socket, which spares both sides the TCP stack).\n\n", r.Machine.Postgres)
	b.WriteString(benchutil.ProducedBy("bench-mailbox", r.Command))
	w("%s Machine: %d CPUs (`nproc`), %s, %s RAM, %s, %s.\n\n",
		benchutil.Took(r.Started, r.Duration), r.Machine.CPUs, r.Machine.CPUModel, r.Machine.RAM, r.Machine.Kernel, r.Machine.Go)

	w("## Workload\n\n")
	w("- Message: 39 fields of mailbox message metadata (ids, sender and recipient, cc, subject, body, snippet, folder, labels, eight flags, five timestamps, sizes, client info); a mean of %.0f bytes as JSON. Four indexed: `body` (text), `isInbox`, `createdOn` (timestamp-millis) and `senderId` (attributes). Generated deterministically from seed %d.\n", r.DocBytes, r.Seed)
	for _, s := range r.Sets {
		w("- Set %s: %d mailboxes of %d messages (%d messages); %d sessions per mix.\n", s.Name, s.Mailboxes, s.Messages, s.Mailboxes*s.Messages, s.Sessions)
	}
	w("- A session: 10 requests on one uniformly chosen mailbox. Each request is a write with the mix's probability (insert one new message, durable when answered), else a read, alternating the paper's query (`isInbox:true`, sorted by `createdOn` descending, limit 20) and a text query (`body:<word>`, a random word of the 238-word mailboxdata.Vocabulary, same sort and limit); reads return the documents.\n")
	w("- %d concurrent clients, closed loop (each sends its next request when the previous is answered); each client's request sequence is seeded, so every system gets the same requests. Mixes run in order 0, 25, 50, 75, 100%% writes on the same data (writes accumulate), after a read-only warm-up of 20%% of a mix's sessions. The paper drove a fixed rate instead (2000 and 250 requests/s).\n", r.Clients)
	w("- Before the requests, each system's answers on the first three mailboxes are checked against a brute-force evaluation of the generated data (same ids, same order).\n\n")

	w("Load (not measured as latency) and size on disk after load:\n\n| set | system | load time | on disk |\n|---|---|---:|---:|\n")
	for _, x := range r.Runs {
		w("| %s | %s | %s | %.0f MiB |\n", x.Set, x.System, x.LoadTime.Round(100*time.Millisecond), float64(x.DiskBytes)/(1<<20))
	}
	w("\n")

	names := r.systemNames()
	for _, s := range r.Sets {
		w("## Set %s: %d mailboxes of %d messages\n\n", s.Name, s.Mailboxes, s.Messages)
		w("Latency in milliseconds, mean / p99, per request type; requests per second over the mix.\n\n")
		w("| writes | system | reads mean | reads p99 | writes mean | writes p99 | all mean | all p99 | req/s | errors | load avg |\n")
		w("|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
		for i, mix := range mixesOf(r, s.Name) {
			for _, n := range names {
				x := r.run(s.Name, n)
				if x == nil || i >= len(x.Mixes) {
					continue
				}
				m := x.Mixes[i]
				rd, wr, al := m.reads(), m.writes(), m.all()
				w("| %d%% | %s | %s | %s | %s | %s | **%s** | **%s** | %.0f | %d | %.1f |\n", mix, n,
					ms(rd.Mean, rd.N), ms(rd.P99, rd.N), ms(wr.Mean, wr.N), ms(wr.P99, wr.N), ms(al.Mean, al.N), ms(al.P99, al.N),
					float64(al.N)/m.Elapsed.Seconds(), m.Errors, m.LoadAvg)
			}
		}
		w("\n*load avg*: the machine's 1-minute load average at the end of the mix, on %d CPUs. It counts this benchmark's own threads too, so it tells only roughly how contended the CPUs were; other engineers' builds and tests shared this machine during the run.\n", r.Machine.CPUs)
		w("\nRatios of Doppio's latency to the others' (mean / p99; below 1 means Doppio is faster):\n\n")
		d := r.run(s.Name, "Doppio")
		var peers []*systemRun
		w("| writes |")
		for _, n := range names {
			if o := r.run(s.Name, n); n != "Doppio" && o != nil {
				peers = append(peers, o)
				w(" Doppio/%s reads | Doppio/%s writes | Doppio/%s all |", n, n, n)
			}
		}
		w("\n|---:|%s\n", strings.Repeat("---:|", 3*len(peers)))
		for i, mix := range mixesOf(r, s.Name) {
			w("| %d%% |", mix)
			for _, o := range peers {
				for _, f := range []func(mixResult) stats{mixResult.reads, mixResult.writes, mixResult.all} {
					if d == nil || i >= len(d.Mixes) || i >= len(o.Mixes) {
						w(" – |")
						continue
					}
					w(" %s |", ratio(f(d.Mixes[i]), f(o.Mixes[i])))
				}
			}
			w("\n")
		}
		w("\nReads by query (mean / p99 ms):\n\n| writes | system | `isInbox:true` | `body:<word>` |\n|---:|---|---:|---:|\n")
		for i, mix := range mixesOf(r, s.Name) {
			for _, n := range names {
				x := r.run(s.Name, n)
				if x == nil || i >= len(x.Mixes) {
					continue
				}
				in, tx := summarize(x.Mixes[i].Latencies[kindInbox]), summarize(x.Mixes[i].Latencies[kindSearch])
				w("| %d%% | %s | %s / %s | %s / %s |\n", mix, n, ms(in.Mean, in.N), ms(in.P99, in.N), ms(tx.Mean, tx.N), ms(tx.P99, tx.N))
			}
		}
		w("\n")
	}
	w("![Mean and p99 latency against the write share, per set and system](mailbox.png)\n\n")
	w("## What the numbers do and do not say\n\n")
	w("- **Shared machine.** Other engineers' builds and tests ran on the same %d CPUs during the run (see *load avg*); every system suffered it, but not at the same moments, so differences of a few tens of percent between runs are noise. Rerun on a quiet machine before quoting a ratio.\n", r.Machine.CPUs)
	w("- **Scale.** The paper had 400,000 small and 800 large mailboxes on a production server; here the sets are scaled to this machine and the whole data set sits in the page cache, so reads measure CPU work and writes measure the fsync path, not disk reads.\n")
	w("- **Closed loop.** Each of the %d clients waits for an answer before its next request; the paper drove a fixed request rate. Latency here includes queueing behind the other clients on %d CPUs.\n", r.Clients, r.Machine.CPUs)
	w("- **Not the same path.** Doppio is measured through HTTP, JSON and its Avro encoding with one node, every partition a Raft group of one voter (`replicas: 1`); Bleve over HTTP pays HTTP and the page's JSON as Doppio does (its server writes each stored document into the page as it is); Bleve in-process pays neither, which favours it; PostgreSQL is reached over TCP on the loopback interface, like Doppio and Bleve over HTTP, with its binary protocol. Each client takes the documents of an answer as bytes without decoding them: pgx hands over the jsonb column, Bleve the stored field, and the Doppio client splits the page in one validating pass (`parsePage`).\n")
	w("- **Processes.** Doppio runs inside the benchmark's Go process (GOMAXPROCS = %d), PostgreSQL as a server process per client connection: when other work shares the CPUs, the operating system's share of them does not fall the same way on both.\n", r.Machine.CPUs)
	w("- **Durability.** Doppio acknowledges a write once its Raft log entry is in a synced Pebble batch (writes of all partitions share the fsync) and the entry is applied; the application itself is not synced, as a crash re-applies it from the log. Bleve's scorch `Batch` (what `Index` calls too) waits, unless the index config sets `unsafe_batch`, which we do not, until the persister has written the batch's segment file with an fsync and committed the new root to its bolt file (bolt fsyncs on commit; scorch then calls `Sync`); each write is one batch. PostgreSQL runs with `fsync=on`, `synchronous_commit=on`; a commit returns after its WAL flush.\n")
	w("- **PostgreSQL's indexes** are expression indexes on the JSONB, built after the bulk load (`COPY`), then `VACUUM ANALYZE` and a checkpoint; writes during the run go through the GIN index's pending list (`fastupdate` on by default), which text queries also scan. The composite GIN index `(mailbox_id, to_tsvector(...))` needs the `btree_gin` extension (in PostgreSQL's contrib), so a text query reads one mailbox's posting lists, like the other two systems.\n")
	w("- **Writes accumulate**: the mixes run one after the other on the same data, so the 100%% mix runs on the most fragmented Bleve indexes and the largest PostgreSQL pending lists, as in the paper's sequence of runs.\n\n")
	for _, x := range r.Runs {
		for _, n := range x.Notes {
			w("PostgreSQL's plans on set %s (mailbox 0, after load):\n\n```\n%s```\n\n", x.Set, n)
		}
	}
	w("Where Doppio's time goes, what changed between runs and how these figures stand against the goals of issue 3: [mailbox-analysis.md](mailbox-analysis.md), written by hand.\n")
	return b.String()
}

func mixesOf(r *results, set string) []int {
	var best []int
	for _, x := range r.Runs {
		if x.Set == set && len(x.Mixes) > len(best) {
			best = best[:0]
			for _, m := range x.Mixes {
				best = append(best, m.WritePercent)
			}
		}
	}
	return best
}

var systemColors = map[string]color.Color{
	"Doppio":                        color.RGBA{R: 0xc0, G: 0x39, B: 0x2b, A: 0xff},
	"Bleve":                         color.RGBA{R: 0x29, G: 0x80, B: 0xb9, A: 0xff},
	"Bleve over HTTP":               color.RGBA{R: 0x8e, G: 0x44, B: 0xad, A: 0xff},
	"PostgreSQL":                    color.RGBA{R: 0x27, G: 0xae, B: 0x60, A: 0xff},
	"PostgreSQL over a Unix socket": color.RGBA{R: 0x7f, G: 0x8c, B: 0x8d, A: 0xff},
}

// writePlot draws one row per set and two columns, mean and p99 latency
// against the write share, one line per system, on a log scale.
func writePlot(r *results, path string) error {
	names := r.systemNames()
	rows := len(r.Sets)
	if rows == 0 || len(names) == 0 {
		return nil
	}
	plots := make([][]*plot.Plot, rows)
	for i, s := range r.Sets {
		plots[i] = make([]*plot.Plot, 2)
		for j, metric := range []string{"mean", "p99"} {
			p := plot.New()
			p.Title.Text = fmt.Sprintf("Set %s (%d × %d messages): %s latency", s.Name, s.Mailboxes, s.Messages, metric)
			p.X.Label.Text = "writes (% of requests)"
			p.Y.Label.Text = "latency (ms, log scale)"
			p.Y.Scale = plot.LogScale{}
			p.X.Min, p.X.Max = -5, 105
			p.X.Tick.Marker = plot.ConstantTicks{{Value: 0, Label: "0"}, {Value: 25, Label: "25"}, {Value: 50, Label: "50"}, {Value: 75, Label: "75"}, {Value: 100, Label: "100"}}
			p.Add(plotter.NewGrid())
			lo, hi := math.Inf(1), math.Inf(-1)
			for _, n := range names {
				x := r.run(s.Name, n)
				if x == nil {
					continue
				}
				var pts plotter.XYs
				for _, m := range x.Mixes {
					st := m.all()
					v := st.Mean
					if metric == "p99" {
						v = st.P99
					}
					if st.N == 0 || v <= 0 {
						continue
					}
					pts = append(pts, plotter.XY{X: float64(m.WritePercent), Y: v})
					lo, hi = math.Min(lo, v), math.Max(hi, v)
				}
				if len(pts) == 0 {
					continue
				}
				l, sc, err := plotter.NewLinePoints(pts)
				if err != nil {
					return err
				}
				l.Color, l.Width = systemColors[n], vg.Points(2)
				sc.Color, sc.Radius = systemColors[n], vg.Points(3)
				p.Add(l, sc)
				p.Legend.Add(n, l, sc)
			}
			if lo > hi {
				lo, hi = 1, 10
			}
			p.Y.Min, p.Y.Max = lo/1.5, hi*1.5
			p.Y.Tick.Marker = logTicks{}
			p.Legend.Top = true
			p.Legend.Left = true
			plots[i][j] = p
		}
	}
	img := vgimg.New(vg.Points(1100), vg.Points(420*float64(rows)))
	dc := draw.New(img)
	t := draw.Tiles{Rows: rows, Cols: 2, PadX: vg.Points(12), PadY: vg.Points(12), PadTop: vg.Points(8), PadBottom: vg.Points(8), PadLeft: vg.Points(8), PadRight: vg.Points(8)}
	canvases := plot.Align(plots, t, dc)
	for i := range plots {
		for j := range plots[i] {
			plots[i][j].Draw(canvases[i][j])
		}
	}
	return benchutil.WritePNG(img, path)
}

// logTicks labels 1, 2 and 5 times each power of ten, so a narrow range
// still gets several labels.
type logTicks struct{}

func (logTicks) Ticks(lo, hi float64) []plot.Tick {
	var out []plot.Tick
	labelled := 0
	for e := math.Floor(math.Log10(lo)); e <= math.Ceil(math.Log10(hi)); e++ {
		for m := 1.0; m < 10; m++ {
			v := m * math.Pow(10, e)
			if v < lo || v > hi {
				continue
			}
			t := plot.Tick{Value: v}
			if m == 1 || m == 2 || m == 5 {
				t.Label = strconv.FormatFloat(v, 'g', -1, 64)
				labelled++
			}
			out = append(out, t)
		}
	}
	if labelled < 3 {
		// Less than a decade: label every tick.
		for i := range out {
			out[i].Label = strconv.FormatFloat(out[i].Value, 'g', -1, 64)
		}
	}
	return out
}
