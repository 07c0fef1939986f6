package torture

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"slices"
	"strings"
	"time"
)

// A Nemesis injects one kind of fault (or, "mixed", every kind) into a
// Cluster on a schedule drawn from a seed: the same seed, duration and
// cluster size give the same schedule. Faults come one at a time, each
// healed before the next; which node is "the leader" or "the controller"
// is resolved when the fault fires and recorded in the run's events.
type Nemesis struct {
	Name  string
	Doc   string
	kinds []string
}

// Fault is one planned fault: injected At after the run starts, healed
// Hold later.
type Fault struct {
	At, Hold time.Duration
	Kind     string
	// Nodes are the targets chosen at plan time (indexes from 0), for kinds
	// that take random nodes.
	Nodes []int
	// Groups are the sides of a partition; nodes in no group (the bridge)
	// keep every link.
	Groups [][]int
	// Seed drives what the fault draws while it lasts (flapping links).
	Seed uint64
}

// faultKind is how one kind of fault is planned, injected and healed.
type faultKind struct {
	doc  string
	hold [2]time.Duration
	// plan chooses the plan-time targets of a fault on n nodes.
	plan func(rng *rand.Rand, n int, f *Fault)
	// inject applies the fault and returns what it did and how to undo it.
	inject func(ctx context.Context, c *Cluster, f Fault) (what string, heal func(context.Context) (string, error), err error)
}

// minority is the most nodes a fault may take down and leave a majority.
func minority(n int) int { return (n - 1) / 2 }

func randomNodes(rng *rand.Rand, n, k int) []int {
	p := rng.Perm(n)[:k]
	slices.Sort(p)
	return p
}

func names(c *Cluster, idx []int) string {
	var s []string
	for _, i := range idx {
		s = append(s, c.Nodes[i].ID)
	}
	return strings.Join(s, ",")
}

// killNodes kills the given nodes; the heal starts them again.
func killNodes(c *Cluster, idx []int, why string) (string, func(context.Context) (string, error), error) {
	for _, i := range idx {
		c.Nodes[i].Kill()
	}
	return fmt.Sprintf("kill -9 %s%s", names(c, idx), why), func(ctx context.Context) (string, error) {
		ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
		defer cancel()
		var errs []error
		for _, i := range idx {
			if err := c.Nodes[i].Start(); err != nil {
				errs = append(errs, err)
			}
		}
		for _, i := range idx {
			errs = append(errs, c.Nodes[i].WaitReady(ctx))
		}
		return "restart " + names(c, idx), errors.Join(errs...)
	}, nil
}

func healNetwork(what string, c *Cluster) func(context.Context) (string, error) {
	return func(context.Context) (string, error) { return "heal " + what, c.Net.Heal() }
}

// degradeLinks is a fault that degrades the links of a random minority
// with degrade (a netem setting drawn from the fault's seed), then heals.
func degradeLinks(what, doc string, degrade func(w *Network, i int, rng *rand.Rand) (string, error)) faultKind {
	return faultKind{
		doc:  doc,
		hold: [2]time.Duration{3 * time.Second, 6 * time.Second},
		plan: func(rng *rand.Rand, n int, f *Fault) {
			f.Nodes = randomNodes(rng, n, 1+rng.IntN(minority(n)))
			f.Seed = rng.Uint64()
		},
		inject: func(ctx context.Context, c *Cluster, f Fault) (string, func(context.Context) (string, error), error) {
			rng := rand.New(rand.NewPCG(f.Seed, f.Seed))
			var how []string
			var errs []error
			for _, i := range f.Nodes {
				h, err := degrade(c.Net, i, rng)
				how = append(how, h)
				errs = append(errs, err)
			}
			return fmt.Sprintf("%s on %s: %s", what, names(c, f.Nodes), strings.Join(how, "; ")), healNetwork("links", c), errors.Join(errs...)
		},
	}
}

func indexOf(c *Cluster, nodes []*Node, k int) []int {
	var idx []int
	for _, n := range nodes[:min(k, len(nodes))] {
		idx = append(idx, n.Index)
	}
	return idx
}

var faultKinds = map[string]faultKind{
	"kill": {
		doc:  "kill -9 a random minority of the nodes, restart them",
		hold: [2]time.Duration{2 * time.Second, 4 * time.Second},
		plan: func(rng *rand.Rand, n int, f *Fault) { f.Nodes = randomNodes(rng, n, 1+rng.IntN(minority(n))) },
		inject: func(ctx context.Context, c *Cluster, f Fault) (string, func(context.Context) (string, error), error) {
			return killNodes(c, f.Nodes, "")
		},
	},
	"kill-leaders": {
		doc:  "kill -9 the nodes leading the most partitions (a minority), restart them",
		hold: [2]time.Duration{2 * time.Second, 4 * time.Second},
		plan: func(rng *rand.Rand, n int, f *Fault) {},
		inject: func(ctx context.Context, c *Cluster, f Fault) (string, func(context.Context) (string, error), error) {
			leaders, err := resolve(ctx, c.Leaders)
			if err != nil {
				return "", nil, err
			}
			return killNodes(c, indexOf(c, leaders, minority(len(c.Nodes))), " (leading the most partitions)")
		},
	},
	"pause": {
		doc:  "SIGSTOP a random minority for longer than an election timeout (and an etcd lease), then SIGCONT",
		hold: [2]time.Duration{2 * time.Second, 5 * time.Second},
		plan: func(rng *rand.Rand, n int, f *Fault) { f.Nodes = randomNodes(rng, n, 1+rng.IntN(minority(n))) },
		inject: func(ctx context.Context, c *Cluster, f Fault) (string, func(context.Context) (string, error), error) {
			var errs []error
			for _, i := range f.Nodes {
				errs = append(errs, c.Nodes[i].Pause())
			}
			return "SIGSTOP " + names(c, f.Nodes), func(context.Context) (string, error) {
				var errs []error
				for _, i := range f.Nodes {
					errs = append(errs, c.Nodes[i].Resume())
				}
				return "SIGCONT " + names(c, f.Nodes), errors.Join(errs...)
			}, errors.Join(errs...)
		},
	},
	"partition": {
		doc:  "cut the cluster into a random majority and minority, heal",
		hold: [2]time.Duration{3 * time.Second, 6 * time.Second},
		plan: func(rng *rand.Rand, n int, f *Fault) {
			p := rng.Perm(n)
			k := 1 + rng.IntN(minority(n))
			small, large := slices.Clone(p[:k]), slices.Clone(p[k:])
			slices.Sort(small)
			slices.Sort(large)
			f.Groups = [][]int{small, large}
		},
		inject: func(ctx context.Context, c *Cluster, f Fault) (string, func(context.Context) (string, error), error) {
			what := fmt.Sprintf("partition {%s} | {%s}", names(c, f.Groups[0]), names(c, f.Groups[1]))
			return what, healNetwork("partition", c), c.Net.Partition(f.Groups)
		},
	},
	"partition-leader": {
		doc:  "isolate the node leading the most partitions from every other node, heal",
		hold: [2]time.Duration{3 * time.Second, 6 * time.Second},
		plan: func(rng *rand.Rand, n int, f *Fault) {},
		inject: func(ctx context.Context, c *Cluster, f Fault) (string, func(context.Context) (string, error), error) {
			leaders, err := resolve(ctx, c.Leaders)
			if err != nil {
				return "", nil, err
			}
			l := leaders[0]
			return "isolate " + l.ID + " (leading the most partitions)", healNetwork("isolation of "+l.ID, c), c.Net.Isolate(l.Index)
		},
	},
	"partition-bridge": {
		doc:  "split the nodes into two halves that only one bridge node sees both of, heal",
		hold: [2]time.Duration{3 * time.Second, 6 * time.Second},
		plan: func(rng *rand.Rand, n int, f *Fault) {
			p := rng.Perm(n)
			h := n / 2
			a, b := slices.Clone(p[:h]), slices.Clone(p[h+1:])
			slices.Sort(a)
			slices.Sort(b)
			f.Groups = [][]int{a, b}
			f.Nodes = []int{p[h]}
		},
		inject: func(ctx context.Context, c *Cluster, f Fault) (string, func(context.Context) (string, error), error) {
			what := fmt.Sprintf("bridge {%s} | %s | {%s}", names(c, f.Groups[0]), names(c, f.Nodes), names(c, f.Groups[1]))
			return what, healNetwork("bridge", c), c.Net.Partition(f.Groups)
		},
	},
	"loss":  degradeLinks("loss", "lose packets on a random minority's links (netem loss, or a flapping link without sch_netem), heal", (*Network).Loss),
	"delay": degradeLinks("delay", "slow a random minority's links (netem delay, or a 512 kbit/s token bucket without sch_netem), heal", (*Network).Delay),
	"restart-all": {
		doc:  "kill -9 every node at once, start them all again",
		hold: [2]time.Duration{200 * time.Millisecond, 1 * time.Second},
		plan: func(rng *rand.Rand, n int, f *Fault) {},
		inject: func(ctx context.Context, c *Cluster, f Fault) (string, func(context.Context) (string, error), error) {
			c.KillAll()
			return "kill -9 every node", func(ctx context.Context) (string, error) {
				return "start every node", c.StartAll(ctx)
			}, nil
		},
	},
	"kill-controller": {
		doc:  "kill -9 the node running the active placement controller, restart it",
		hold: [2]time.Duration{2 * time.Second, 4 * time.Second},
		plan: func(rng *rand.Rand, n int, f *Fault) {},
		inject: func(ctx context.Context, c *Cluster, f Fault) (string, func(context.Context) (string, error), error) {
			n, err := resolve(ctx, c.Controller)
			if err != nil {
				return "", nil, err
			}
			return killNodes(c, []int{n.Index}, " (the active controller)")
		},
	},
	"restart": {
		doc:  "stop a random node gracefully (SIGTERM: it hands its leaderships over, then drains its clients), start it again",
		hold: [2]time.Duration{500 * time.Millisecond, 2 * time.Second},
		plan: func(rng *rand.Rand, n int, f *Fault) { f.Nodes = randomNodes(rng, n, 1) },
		inject: func(ctx context.Context, c *Cluster, f Fault) (string, func(context.Context) (string, error), error) {
			nd := c.Nodes[f.Nodes[0]]
			if err := nd.Stop(); err != nil {
				return "", nil, err
			}
			return "SIGTERM " + nd.ID, func(ctx context.Context) (string, error) {
				ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
				defer cancel()
				return "start " + nd.ID, nd.Restart(ctx)
			}, nil
		},
	},
	"drain": {
		doc:  "drain a random node (its replicas and leaderships move to the others under load), then add it back (replicas move back); refused, and skipped, when the others are too few for the replication factor",
		hold: [2]time.Duration{4 * time.Second, 8 * time.Second},
		plan: func(rng *rand.Rand, n int, f *Fault) { f.Nodes = randomNodes(rng, n, 1) },
		inject: func(ctx context.Context, c *Cluster, f Fault) (string, func(context.Context) (string, error), error) {
			nd := c.Nodes[f.Nodes[0]]
			code, b, err := c.operate(ctx, nd.ID, "drain")
			if err != nil {
				return "", nil, err
			}
			if code == http.StatusConflict {
				return fmt.Sprintf("drain %s refused (%s)", nd.ID, strings.TrimSpace(string(b))), func(context.Context) (string, error) { return "nothing to heal", nil }, nil
			}
			if code != http.StatusOK {
				return "", nil, fmt.Errorf("drain %s: %d %s", nd.ID, code, b)
			}
			return "drain " + nd.ID, func(ctx context.Context) (string, error) {
				code, b, err := c.operate(ctx, nd.ID, "add")
				if err == nil && code != http.StatusOK {
					err = fmt.Errorf("add %s: %d %s", nd.ID, code, b)
				}
				return "add " + nd.ID + " back", err
			}, nil
		},
	},
	"kill-etcd": {
		doc:  "kill -9 the node whose embedded etcd member leads etcd, restart it",
		hold: [2]time.Duration{2 * time.Second, 4 * time.Second},
		plan: func(rng *rand.Rand, n int, f *Fault) {},
		inject: func(ctx context.Context, c *Cluster, f Fault) (string, func(context.Context) (string, error), error) {
			n, err := resolve(ctx, c.EtcdLeader)
			if err != nil {
				return "", nil, err
			}
			return killNodes(c, []int{n.Index}, " (the etcd leader)")
		},
	},
}

// resolve finds a fault's target when it fires, asking again for up to
// 5 s: right after a heal the cluster may not name a leader or a
// controller yet.
func resolve[T any](ctx context.Context, find func(context.Context) (T, error)) (T, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	for {
		v, err := find(ctx)
		if err == nil || !sleepUntil(ctx, time.Now().Add(100*time.Millisecond)) {
			return v, err
		}
	}
}

// kindOrder is the order nemeses are listed and run in.
var kindOrder = []string{"kill", "kill-leaders", "pause", "partition", "partition-leader", "partition-bridge",
	"loss", "delay", "restart-all", "kill-controller", "kill-etcd", "restart", "drain"}

// Nemeses lists every nemesis: "none" (no faults, the baseline), one per
// kind of fault, and "mixed", drawing from all of them.
func Nemeses() []Nemesis {
	out := []Nemesis{{Name: "none", Doc: "no faults: the baseline"}}
	for _, k := range kindOrder {
		out = append(out, Nemesis{Name: k, Doc: faultKinds[k].doc, kinds: []string{k}})
	}
	return append(out, Nemesis{Name: "mixed", Doc: "a fault of a random kind at a time, from every kind above", kinds: kindOrder})
}

// NemesisNamed finds a nemesis by name.
func NemesisNamed(name string) (Nemesis, error) {
	var all []string
	for _, n := range Nemeses() {
		if n.Name == name {
			return n, nil
		}
		all = append(all, n.Name)
	}
	return Nemesis{}, fmt.Errorf("no nemesis %q (have %s)", name, strings.Join(all, ", "))
}

// Quiet stretches between faults, so that the workloads make progress
// and the schedule measures recovery.
var quiet = [2]time.Duration{1500 * time.Millisecond, 3 * time.Second}

func between(rng *rand.Rand, r [2]time.Duration) time.Duration {
	return r[0] + time.Duration(rng.Int64N(int64(r[1]-r[0])+1))
}

// Plan is the nemesis's schedule for a run of d on n nodes from seed:
// quiet, fault, hold, heal, quiet, … with every fault healed by d.
func (nm Nemesis) Plan(seed uint64, d time.Duration, n int) []Fault {
	if len(nm.kinds) == 0 {
		return nil
	}
	rng := rand.New(rand.NewPCG(seed, 0x6e656d65736973)) // "nemesis"
	var plan []Fault
	at := between(rng, quiet)
	for {
		kind := nm.kinds[rng.IntN(len(nm.kinds))]
		fk := faultKinds[kind]
		f := Fault{At: at, Kind: kind, Hold: between(rng, fk.hold)}
		fk.plan(rng, n, &f)
		if at+f.Hold > d {
			return plan
		}
		plan = append(plan, f)
		at += f.Hold + between(rng, quiet)
	}
}

// String describes a planned fault (plan-time targets as n1, n2, …).
func (f Fault) String() string {
	s := fmt.Sprintf("+%6.2fs %-16s hold %.2fs", f.At.Seconds(), f.Kind, f.Hold.Seconds())
	ids := func(idx []int) string {
		var out []string
		for _, i := range idx {
			out = append(out, fmt.Sprintf("n%d", i+1))
		}
		return strings.Join(out, ",")
	}
	switch {
	case len(f.Groups) == 2 && len(f.Nodes) == 1:
		s += fmt.Sprintf(" {%s} | %s | {%s}", ids(f.Groups[0]), ids(f.Nodes), ids(f.Groups[1]))
	case len(f.Groups) == 2:
		s += fmt.Sprintf(" {%s} | {%s}", ids(f.Groups[0]), ids(f.Groups[1]))
	case len(f.Nodes) > 0:
		s += " " + ids(f.Nodes)
	default:
		s += " (targets chosen when it fires)"
	}
	return s
}

// Event is something the nemesis did, at an offset from the run's start.
type Event struct {
	At   time.Duration
	What string
	Err  string
}

func (e Event) String() string {
	s := fmt.Sprintf("+%6.2fs %s", e.At.Seconds(), e.What)
	if e.Err != "" {
		s += " — error: " + e.Err
	}
	return s
}

// execute carries out plan against c from start until the plan ends or ctx
// does; every fault it injected is healed before it returns. It reports
// each step to record as it happens.
func execute(ctx context.Context, c *Cluster, plan []Fault, start time.Time, record func(Event)) {
	// Heals run even once ctx has ended, under their own deadline.
	healCtx := context.WithoutCancel(ctx)
	// A heal that took longer than planned (a restart waiting for
	// readiness) pushes the rest of the plan back, so the quiet stretch
	// before the next fault is never cut short.
	var drift time.Duration
	for _, f := range plan {
		if !sleepUntil(ctx, start.Add(f.At+drift)) {
			return
		}
		what, heal, err := faultKinds[f.Kind].inject(ctx, c, f)
		ev := Event{At: time.Since(start), What: f.Kind + ": " + what}
		if err != nil {
			ev.Err = err.Error()
		}
		if what == "" {
			ev.What = f.Kind + ": not injected"
		}
		record(ev)
		if heal == nil {
			continue
		}
		sleepUntil(ctx, time.Now().Add(f.Hold))
		what, err = heal(healCtx)
		ev = Event{At: time.Since(start), What: f.Kind + ": " + what}
		drift = max(drift, ev.At-(f.At+f.Hold))
		if err != nil {
			ev.Err = err.Error()
		}
		record(ev)
	}
}

// sleepUntil waits until t; false if ctx ended first.
func sleepUntil(ctx context.Context, t time.Time) bool {
	d := time.Until(t)
	if d <= 0 {
		return ctx.Err() == nil
	}
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-timer.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// operate sends POST /_cluster/nodes/{id}/{verb} to the first running
// node that answers, retrying for up to 10 s while none does.
func (c *Cluster) operate(ctx context.Context, id, verb string) (int, []byte, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	var last error
	for {
		for _, n := range c.Nodes {
			if n.State() != Running {
				continue
			}
			code, b, err := c.post(ctx, n, "/_cluster/nodes/"+id+"/"+verb)
			if err == nil && code != http.StatusServiceUnavailable {
				return code, b, nil
			}
			last = fmt.Errorf("%s: %d %v", n.ID, code, err)
		}
		if !sleepUntil(ctx, time.Now().Add(200*time.Millisecond)) {
			return 0, nil, fmt.Errorf("%s %s: no node answered: %v", verb, id, last)
		}
	}
}
