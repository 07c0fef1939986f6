package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/doppio-db/doppio/client"
	"github.com/doppio-db/doppio/internal/bulk"

	"github.com/doppio-db/doppio/bench/internal/benchutil"
	"github.com/doppio-db/doppio/bench/internal/bulkbuild"
	"github.com/doppio-db/doppio/bench/internal/loadgen"
	"github.com/doppio-db/doppio/bench/internal/localcluster"
	"github.com/doppio-db/doppio/bench/internal/mailboxdata"
	"github.com/doppio-db/doppio/bench/internal/pgserver"
)

const (
	db        = "MailboxDB"
	bulkTable = "Message"    // loaded in bulk
	apiTable  = "MessageAPI" // loaded through the document API
	nodes     = 3
	replicas  = 3
)

// results is what run measured.
type results struct {
	InputBytes, ThrottledBytes int64 // JSON Lines of the data set and of the throttled load
	Messages, Throttled        int
	LoadAvg                    [2]float64 // 1-minute load average at the start and the end

	Probes       []probe       // the document API load at each concurrency tried
	APIClients   int           // the best one, which loaded the rest
	APIDocs      int           // documents the best one loaded (the rest, or its probe)
	APITook      time.Duration // and in how long
	Build        time.Duration // Go builder
	BuildBytes   int64         // the build's partition files
	Load         time.Duration // bulk load, from the request until done
	PGCopy       time.Duration // COPY into the table with its primary key
	PGIndex      time.Duration // the three other indexes and ANALYZE
	PGVersion    string
	Throttle     int64 // bytes per second per node of the throttled load
	ThrottleTook time.Duration
	Before       map[string]loadgen.Summary // "read", "write"
	During       map[string]loadgen.Summary
	ExportRows   int64
	ExportBytes  int64
	Export       time.Duration
	CopyToRows   int64
	CopyToBytes  int64
	CopyTo       time.Duration
}

// probe is the document API load at one concurrency.
type probe struct {
	Clients int
	Docs    int
	Took    time.Duration
}

func (p probe) rate() float64 { return float64(p.Docs) / p.Took.Seconds() }

func run(ctx context.Context, cfg config) error {
	p := cfg.Progress
	rep := &report{Run: benchutil.StartRun(cfg.Command), Cfg: cfg}
	res := &rep.Res
	res.LoadAvg[0] = benchutil.LoadAvg()
	work, err := os.MkdirTemp(cfg.WorkDir, "doppio-bench-bulk-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(work)

	// The data set, and the throttled load's (mailbox set B).
	boxes := cfg.Messages / cfg.PerMailbox
	res.Messages = boxes * cfg.PerMailbox
	bBoxes := max(1, int(float64(boxes)*cfg.ThrottledShare))
	res.Throttled = bBoxes * cfg.PerMailbox
	inputA, inputB := filepath.Join(work, "messages-a.jsonl"), filepath.Join(work, "messages-b.jsonl")
	p("writing %d messages (%d mailboxes) to %s", res.Messages, boxes, inputA)
	if res.InputBytes, err = writeSet(inputA, cfg.Seed, "A", boxes, cfg.PerMailbox); err != nil {
		return err
	}
	if res.ThrottledBytes, err = writeSet(inputB, cfg.Seed, "B", bBoxes, cfg.PerMailbox); err != nil {
		return err
	}
	p("data set: %.1f MiB of JSON Lines", float64(res.InputBytes)/(1<<20))

	p("building doppio")
	bin, cleanup, err := localcluster.Build(ctx, work)
	if err != nil {
		return err
	}
	defer cleanup()
	c, err := localcluster.Start(ctx, bin, filepath.Join(work, "cluster"), nodes, nil)
	if err != nil {
		return err
	}
	defer c.Stop()
	cl := client.New(c.Nodes[0].Addr, client.WithSmartRouting(time.Second))
	var spec client.TableSpec
	if err := json.Unmarshal([]byte(mailboxdata.Schema), &spec); err != nil {
		return err
	}
	if err := c.CreateTable(ctx, cl, db, cfg.Partitions, replicas, bulkTable, spec); err != nil {
		return err
	}
	if _, _, err := cl.PutTable(ctx, db, apiTable, spec); err != nil {
		return err
	}

	// (a) The document API.
	benchutil.Calm(ctx, cfg.Settle, p)
	if err := apiLoad(ctx, cfg, cl, res); err != nil {
		return fmt.Errorf("document API load: %w", err)
	}
	p("document API: %d clients, %.0f documents/s", res.APIClients, float64(res.APIDocs)/res.APITook.Seconds())

	// (b) Build, then load.
	benchutil.Calm(ctx, cfg.Settle, p)
	buildA := filepath.Join(work, "build-a")
	if res.Build, err = bulkbuild.Go(ctx, bin, "--server", c.Nodes[0].Addr, "--db", db, "--table", bulkTable, "--input", inputA, "--out", buildA); err != nil {
		return err
	}
	m, err := bulk.ReadManifest(buildA)
	if err != nil {
		return err
	}
	res.BuildBytes = bulkbuild.Bytes(m)
	p("built in %v: %d records, %.1f MiB of partition files", res.Build.Round(time.Millisecond), m.Records, float64(res.BuildBytes)/(1<<20))
	if res.Load, err = load(ctx, cl, client.LoadRequest{Source: buildA}); err != nil {
		return err
	}
	p("bulk load: %v", res.Load.Round(time.Millisecond))

	// A foreground workload before and during a throttled load.
	buildB := filepath.Join(work, "build-b")
	if _, err := bulkbuild.Go(ctx, bin, "--server", c.Nodes[0].Addr, "--db", db, "--table", bulkTable, "--input", inputB, "--out", buildB); err != nil {
		return err
	}
	mb, err := bulk.ReadManifest(buildB)
	if err != nil {
		return err
	}
	res.Throttle = max(1, int64(float64(bulkbuild.Bytes(mb))/(nodes*cfg.During.Seconds())))
	benchutil.Calm(ctx, cfg.Settle, p)
	if err := foreground(ctx, cfg, c, res, client.LoadRequest{Source: buildB, Throttle: res.Throttle}); err != nil {
		return err
	}
	p("foreground p99 before/during: read %v/%v, write %v/%v", res.Before["read"].P99, res.During["read"].P99, res.Before["write"].P99, res.During["write"].P99)

	// Export.
	benchutil.Calm(ctx, cfg.Settle, p)
	exportDir := filepath.Join(work, "export")
	export := exec.CommandContext(ctx, bin, "export", db, "--server", c.Nodes[0].Addr, "--tables", bulkTable, "--to", exportDir,
		"--format", "jsonl", "--parallel", fmt.Sprint(cfg.ExportParallel))
	started := time.Now()
	if out, err := export.CombinedOutput(); err != nil {
		return fmt.Errorf("doppio export: %w\n%s", err, out)
	}
	res.Export = time.Since(started)
	if res.ExportRows, res.ExportBytes, err = exportSize(exportDir); err != nil {
		return err
	}
	p("export: %d rows in %v", res.ExportRows, res.Export.Round(time.Millisecond))
	c.Stop()

	// (c) PostgreSQL.
	benchutil.Calm(ctx, cfg.Settle, p)
	if err := postgres(ctx, cfg, filepath.Join(work, "postgres"), res); err != nil {
		return err
	}
	p("postgres: COPY %v, indexes %v, COPY TO %v", res.PGCopy.Round(time.Millisecond), res.PGIndex.Round(time.Millisecond), res.CopyTo.Round(time.Millisecond))
	res.LoadAvg[1] = benchutil.LoadAvg()
	rep.Finish()
	return benchutil.WriteReport(cfg.Out, "bulk", rep.markdown(), rep.plot)
}

// writeSet writes mailbox set set as a build's input.
func writeSet(path string, seed uint64, set string, boxes, perMailbox int) (int64, error) {
	return benchutil.WriteJSONLines(path, func(emit func(any) error) error {
		return mailboxdata.Each(seed, set, boxes, perMailbox, func(r mailboxdata.Record) error { return emit(r) })
	})
}

// apiLoad puts set A's messages one by one into apiTable: the head of the
// set at each concurrency in turn for cfg.Probe, the rest at the fastest.
func apiLoad(ctx context.Context, cfg config, cl *client.Client, res *results) error {
	records := make(chan mailboxdata.Record, 1024)
	gen, stopGen := context.WithCancel(ctx)
	defer stopGen()
	go func() {
		defer close(records)
		_ = mailboxdata.Each(cfg.Seed, "A", res.Messages/cfg.PerMailbox, cfg.PerMailbox, func(r mailboxdata.Record) error {
			select {
			case records <- r:
				return nil
			case <-gen.Done():
				return gen.Err()
			}
		})
	}()
	// phase puts records with n clients until the set ends or, when limit
	// is positive, limit has passed; a record taken is always put.
	phase := func(n int, limit time.Duration) (probe, error) {
		pctx, cancel := context.WithCancel(ctx)
		if limit > 0 {
			pctx, cancel = context.WithTimeout(ctx, limit)
		}
		defer cancel()
		var docs atomic.Int64
		var wg sync.WaitGroup
		errs := make(chan error, n)
		start := time.Now()
		for range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					var r mailboxdata.Record
					var ok bool
					select {
					case <-pctx.Done():
						return
					case r, ok = <-records:
						if !ok {
							return
						}
					}
					if err := putAgain(ctx, cl, r); err != nil {
						errs <- fmt.Errorf("put %s/%d: %w", r.MailboxID, r.MessageID, err)
						cancel()
						return
					}
					docs.Add(1)
				}
			}()
		}
		wg.Wait()
		pr := probe{Clients: n, Docs: int(docs.Load()), Took: time.Since(start)}
		select {
		case err := <-errs:
			return pr, err
		default:
			return pr, ctx.Err()
		}
	}
	best := probe{}
	for _, n := range cfg.APIClients {
		pr, err := phase(n, cfg.Probe)
		if err != nil {
			return err
		}
		res.Probes = append(res.Probes, pr)
		cfg.Progress("document API, %d clients: %.0f documents/s", n, pr.rate())
		if pr.Docs > 0 && (best.Docs == 0 || pr.rate() > best.rate()) {
			best = pr
		}
	}
	rest, err := phase(best.Clients, 0)
	if err != nil {
		return err
	}
	if rest.Docs < best.Docs { // the probes took (nearly) the whole set
		rest = best
	}
	res.APIClients, res.APIDocs, res.APITook = rest.Clients, rest.Docs, rest.Took
	return nil
}

// putAgain puts a message, again after a 503 (not applied) or a 504
// (outcome unknown), as a client of the documented contract may: the put
// of a fixed key is idempotent, and a loaded machine makes some outlast
// the server's deadline.
func putAgain(ctx context.Context, cl *client.Client, r mailboxdata.Record) error {
	var err error
	for range 5 {
		_, err = cl.Put(ctx, db, apiTable, client.Key{r.MailboxID, r.MessageID}, r.Message)
		var e *client.Error
		if !errors.As(err, &e) || (e.Status != http.StatusServiceUnavailable && e.Status != http.StatusGatewayTimeout) {
			return err
		}
		time.Sleep(time.Second)
	}
	return err
}

// load starts a bulk load and waits until it is done; it returns the time
// from the request until the load was seen done.
func load(ctx context.Context, cl *client.Client, req client.LoadRequest) (time.Duration, error) {
	start := time.Now()
	l, _, err := cl.StartLoad(ctx, req)
	if err != nil {
		return 0, fmt.Errorf("start load: %w", err)
	}
	var ended error // ends the wait: a failed or cancelled load stays so
	err = localcluster.Poll(ctx, 50*time.Millisecond, time.Hour, "load "+l.ID+" done", func() (bool, string, error) {
		got, err := cl.GetLoad(ctx, l.ID)
		if err != nil {
			return false, "", err
		}
		l = got
		if l.State == client.LoadFailed || l.State == client.LoadCancelled {
			ended = fmt.Errorf("load %s %s: %s", l.ID, l.State, l.Error)
		}
		return l.State == client.LoadDone || ended != nil, fmt.Sprintf("%s, %d of %d partitions done", l.State, l.PartitionsDone, l.TotalPartitions), nil
	})
	took := time.Since(start)
	if err == nil {
		err = ended
	}
	return took, err
}

// foreground runs reads of loaded messages and writes of new ones for
// cfg.Before, then for as long as the throttled load req takes.
func foreground(ctx context.Context, cfg config, c *localcluster.Cluster, res *results, req client.LoadRequest) error {
	boxes := res.Messages / cfg.PerMailbox
	clients := make([]*client.Client, cfg.Foreground)
	for i := range clients {
		clients[i] = client.New(c.Nodes[i%len(c.Nodes)].Addr, client.WithSmartRouting(time.Second))
	}
	var next atomic.Int64
	run := loadgen.Start(ctx, cfg.Foreground, cfg.Seed, func(ctx context.Context, w int, r *rand.Rand) (string, error) {
		mb := mailboxdata.MailboxName("A", r.IntN(boxes))
		if r.IntN(2) == 0 {
			_, err := clients[w].Get(ctx, db, bulkTable, client.Key{mb, int64(1 + r.IntN(cfg.PerMailbox))})
			return "read", err
		}
		id := int64(cfg.PerMailbox) + next.Add(1)
		_, err := clients[w].Put(ctx, db, bulkTable, client.Key{mb, id}, mailboxdata.New(r, mb, id, mailboxdata.BaseTime+id*60000))
		return "write", err
	})
	const warm = 3 * time.Second
	select {
	case <-ctx.Done():
		run.Stop()
		return ctx.Err()
	case <-time.After(warm + cfg.Before):
	}
	from := run.Now()
	took, err := load(ctx, clients[0], req)
	to := run.Now()
	ops := run.Stop()
	if err != nil {
		return err
	}
	res.ThrottleTook = took
	res.Before, res.During = map[string]loadgen.Summary{}, map[string]loadgen.Summary{}
	for _, k := range []string{"read", "write"} {
		res.Before[k] = loadgen.Summarize(ops, k, warm, warm+cfg.Before)
		res.During[k] = loadgen.Summarize(ops, k, from, to)
	}
	return nil
}

// exportSize counts the rows and bytes of an export's files.
func exportSize(dir string) (rows, size int64, err error) {
	b, err := os.ReadFile(filepath.Join(dir, "manifest.json"))
	if err != nil {
		return 0, 0, err
	}
	var m struct {
		Rows       int64 `json:"rows"`
		Partitions []struct {
			Files []struct {
				Bytes int64 `json:"bytes"`
			} `json:"files"`
		} `json:"partitions"`
	}
	if err := json.Unmarshal(b, &m); err != nil {
		return 0, 0, err
	}
	for _, p := range m.Partitions {
		for _, f := range p.Files {
			size += f.Bytes
		}
	}
	return m.Rows, size, nil
}

// postgres copies set A into the mailbox benchmark's JSONB table (with
// its primary key), builds its other indexes and analyzes, then copies
// the table out again to a file.
func postgres(ctx context.Context, cfg config, dir string, res *results) error {
	pg, err := pgserver.Start(ctx, pgserver.Config{Dir: dir, Clients: 4, Logf: cfg.Progress})
	if err != nil {
		return err
	}
	defer pg.Close()
	res.PGVersion = pg.Version()
	if err := pg.Exec(ctx, `CREATE EXTENSION IF NOT EXISTS btree_gin`, mailboxdata.PostgresTable); err != nil {
		return err
	}
	rows := make(chan []any, 1024)
	gen, stopGen := context.WithCancel(ctx)
	defer stopGen()
	genErr := make(chan error, 1)
	go func() {
		defer close(rows)
		genErr <- mailboxdata.Each(cfg.Seed, "A", res.Messages/cfg.PerMailbox, cfg.PerMailbox, func(r mailboxdata.Record) error {
			doc, err := json.Marshal(r.Message)
			if err != nil {
				return err
			}
			select {
			case rows <- []any{r.MailboxID, r.MessageID, doc}:
				return nil
			case <-gen.Done():
				return gen.Err()
			}
		})
	}()
	start := time.Now()
	n, err := pg.Copy(ctx, "messages", []string{"mailbox_id", "message_id", "doc"}, func() ([]any, error) {
		return <-rows, nil
	})
	if err != nil {
		return fmt.Errorf("postgres: COPY: %w", err)
	}
	if err := <-genErr; err != nil {
		return err
	}
	res.PGCopy = time.Since(start)
	if n != int64(res.Messages) {
		return fmt.Errorf("postgres: COPY wrote %d rows, want %d", n, res.Messages)
	}
	start = time.Now()
	if err := pg.Exec(ctx, append(mailboxdata.PostgresIndexes, `ANALYZE messages`)...); err != nil {
		return err
	}
	res.PGIndex = time.Since(start)

	f, err := os.Create(filepath.Join(dir, "messages.copy"))
	if err != nil {
		return err
	}
	defer f.Close()
	conn, err := pg.Pool.Acquire(ctx)
	if err != nil {
		return err
	}
	defer conn.Release()
	start = time.Now()
	tag, err := conn.Conn().PgConn().CopyTo(ctx, f, `COPY messages TO STDOUT`)
	if err == nil {
		err = f.Sync()
	}
	if err != nil {
		return fmt.Errorf("postgres: COPY TO: %w", err)
	}
	res.CopyTo = time.Since(start)
	res.CopyToRows = tag.RowsAffected()
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	res.CopyToBytes = fi.Size()
	return nil
}
