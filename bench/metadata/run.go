package main

import (
	"context"
	"fmt"
	"log"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/doppio-db/doppio/internal/catalog"
	"github.com/doppio-db/doppio/internal/controller"
	"github.com/doppio-db/doppio/internal/embedetcd"
	"github.com/doppio-db/doppio/internal/membership"
	"github.com/doppio-db/doppio/internal/schema"
)

const prefix = "/doppio"

// event is one measured event.
type event struct {
	Name    string
	Traffic traffic
	DBDelta int64 // etcd's db size after minus before
	Changed int   // partitions whose placement or leader changed
	Took    time.Duration
}

// measure builds a cluster of s and measures each event in turn: the
// initial placement, a node joining, a node going down (its leaderships
// move; the dead-node delay is long enough that its replicas stay) and a
// database of a twentieth of the partitions being created.
func measure(s size, idle time.Duration) ([]event, error) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	quiet := slog.New(slog.DiscardHandler)
	dir, err := os.MkdirTemp("", "bench-metadata-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	srv, err := embedetcd.Start(ctx, filepath.Join(dir, "etcd"), quiet)
	if err != nil {
		return nil, err
	}
	defer srv.Close()
	client := func() (*clientv3.Client, error) {
		return clientv3.New(clientv3.Config{Endpoints: srv.Endpoints(), DialTimeout: 5 * time.Second, Logger: zap.NewNop(),
			MaxCallRecvMsgSize: 64 << 20})
	}
	var clis []*clientv3.Client
	defer func() {
		for _, c := range clis {
			c.Close()
		}
	}()
	for range 4 {
		c, err := client()
		if err != nil {
			return nil, err
		}
		clis = append(clis, c)
	}
	cli, hostCli, ctlCli, meterCli := clis[0], clis[1], clis[2], clis[3]
	cat, err := catalog.Open(ctx, cli, prefix)
	if err != nil {
		return nil, err
	}
	defer cat.Close()
	h := newHosts(hostCli, prefix, quiet)
	defer h.closeAll()
	for i := range s.Nodes {
		if err := h.start(ctx, nodeName(i), fmt.Sprintf("z%d", i%3)); err != nil {
			return nil, err
		}
	}
	view, err := membership.Open(ctx, cli, prefix, quiet)
	if err != nil {
		return nil, err
	}
	defer view.Close()
	changes, unsubscribe := view.Subscribe()
	defer unsubscribe()
	go func() {
		for {
			select {
			case <-ctx.Done():
				return
			case <-changes:
				h.follow(view.Placements())
			}
		}
	}()
	go controller.Run(ctx, ctlCli, "controller", controller.Options{Prefix: prefix, DeadNodeDelay: time.Hour, Logger: quiet})

	dbs := split(s.Partitions, 4096)
	events := []struct {
		name string
		do   func() error
	}{
		{fmt.Sprintf("initial placement (%d databases)", len(dbs)), func() error {
			for i, n := range dbs {
				if err := putDatabase(ctx, cat, fmt.Sprintf("db%d", i), n); err != nil {
					return err
				}
			}
			return nil
		}},
		{"a node joins", func() error { return h.start(ctx, nodeName(s.Nodes), "z0") }},
		{"a node goes down (its leaderships move)", func() error {
			h.mu.Lock()
			h.down = nodeName(1)
			h.mu.Unlock()
			return h.kill(nodeName(1), view.Placements())
		}},
		{fmt.Sprintf("a database of %d partitions is created", min(max(s.Partitions/20, 1), 4096)), func() error {
			return putDatabase(ctx, cat, "created", min(max(s.Partitions/20, 1), 4096))
		}},
	}
	var out []event
	for _, e := range events {
		before := snapshot(view, h)
		st0, err := cli.Status(ctx, srv.Endpoints()[0])
		if err != nil {
			return nil, err
		}
		m := startMeter(meterCli, prefix, st0.Header.Revision+1)
		start := time.Now()
		if err := e.do(); err != nil {
			m.stop()
			return nil, fmt.Errorf("%s: %w", e.name, err)
		}
		// Done when etcd is quiet and the cluster converged: planning a
		// round at 100,000 replicas may take longer than idle.
		var last time.Time
		for err == nil {
			if last, err = m.quiet(ctx, idle); err == nil && h.converged(ctx, cat, view) {
				break
			}
			if time.Since(start) > 30*time.Minute {
				err = fmt.Errorf("%s: not converged after 30 minutes", e.name)
			}
		}
		t := m.stop()
		if err != nil {
			return nil, err
		}
		st1, err := cli.Status(ctx, srv.Endpoints()[0])
		if err != nil {
			return nil, err
		}
		ev := event{Name: e.name, Traffic: t, DBDelta: st1.DbSize - st0.DbSize, Changed: changed(before, snapshot(view, h)), Took: last.Sub(start)}
		log.Printf("  %s: %d puts, %d bytes put (placement %d, leaders %d, groups %d), %d bytes watched, db size %+d, %d partitions changed, %s",
			ev.Name, t.Puts, t.PutTotal(), t.PutBytes[membership.PlacementDir], t.PutBytes[membership.LeadersDir], t.PutBytes[membership.GroupsDir],
			t.WatchRecv, ev.DBDelta, ev.Changed, ev.Took.Round(time.Millisecond))
		out = append(out, ev)
	}
	return out, nil
}

func nodeName(i int) string { return fmt.Sprintf("node-%04d", i) }

// split divides n partitions into the fewest databases of at most max,
// as evenly as possible.
func split(n, max int) []int {
	k := (n + max - 1) / max
	out := make([]int, k)
	for i := range out {
		out[i] = n / k
		if i < n%k {
			out[i]++
		}
	}
	return out
}

// state is each partition's placement and the leader the hosts publish.
type state map[partition]string

func snapshot(v *membership.View, h *hosts) state {
	out := state{}
	for db, rec := range v.Placements() {
		for i, pp := range rec.Partitions {
			out[partition{db, i}] = fmt.Sprint(pp.Replicas, pp.Leader)
		}
	}
	h.mu.Lock()
	for p, g := range h.led {
		out[p] += " " + g.leader
	}
	h.mu.Unlock()
	return out
}

// changed counts the partitions whose state differs.
func changed(a, b state) int {
	n := 0
	for p, s := range b {
		if a[p] != s {
			n++
		}
	}
	for p := range a {
		if _, ok := b[p]; !ok {
			n++
		}
	}
	return n
}

func putDatabase(ctx context.Context, cat *catalog.Catalog, name string, partitions int) error {
	return retry(ctx, func() error {
		_, _, err := cat.PutDatabase(ctx, schema.Database{Name: name, Partitions: partitions, Replicas: 3})
		return err
	})
}
