package controlsim

import (
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/doppio-db/doppio/internal/placement"
)

// EventKind is what happens to the cluster in a scenario.
type EventKind int

const (
	// Join starts a new node in Event.Zone.
	Join EventKind = iota
	// Kill stops Event.Node's process (kill -9, a host lost).
	Kill
	// Restart starts Event.Node again with its data (deferred to the
	// zone's return while its zone is down).
	Restart
	// Drain sets Event.Node's intent to draining.
	Drain
	// ZoneDown kills every live node of Event.Zone; ZoneUp restarts them.
	ZoneDown
	ZoneUp
	// Create creates Event.Database.
	Create
)

var eventNames = [...]string{"join", "kill", "restart", "drain", "zone-down", "zone-up", "create"}

func (k EventKind) String() string { return nameOf(eventNames[:], int(k), "EventKind") }

// nameOf is names[i], or typ(i) when i is none of them.
func nameOf(names []string, i int, typ string) string {
	if i >= 0 && i < len(names) {
		return names[i]
	}
	return fmt.Sprintf("%s(%d)", typ, i)
}

// Event is one scheduled change to the cluster.
type Event struct {
	At       time.Duration
	Kind     EventKind
	Node     int // Kill, Restart, Drain: the node's number (name n00000 + Node)
	Zone     int // Join, ZoneDown, ZoneUp
	Database placement.Database
}

func (e Event) String() string {
	switch e.Kind {
	case Join, ZoneDown, ZoneUp:
		return fmt.Sprintf("%s %s", e.Kind, zoneName(e.Zone))
	case Create:
		return fmt.Sprintf("create %s (%d partitions × %d)", e.Database.Name, e.Database.Partitions, e.Database.Replicas)
	}
	return fmt.Sprintf("%s %s", e.Kind, nodeName(e.Node))
}

// Scenario is a named schedule of events for a cluster of any size.
type Scenario struct {
	Name string
	Doc  string
	// events lays the schedule out for c, drawing from rng.
	events func(c Config, rng *rand.Rand) []Event
}

// start is when scenarios begin: the databases are placed by then.
const start = time.Minute

// Scenarios lists the scenarios Run knows.
func Scenarios() []Scenario {
	return []Scenario{
		{"day", "a day's events at random times: nodes dying and coming back, dying for good, joining, drained; a zone outage; a database created", day},
		{"expand", "a tenth of the nodes join at once", expand},
		{"drain", "a tenth of the nodes are drained at once", drainTenth},
		{"node-loss", "a node dies for good (replaced after the dead-node delay); later another dies and comes back before it", nodeLoss},
		{"zone-outage", "a zone is down for half the dead-node delay", zoneOutage},
		{"zone-loss", "a zone is down past the dead-node delay, then comes back", zoneLoss},
		{"churn", "two hours of nodes dying and coming back at random, some past the dead-node delay", churn},
		{"rolling-restart", "every node restarted in turn, down 20 s each", rollingRestart},
	}
}

// ScenarioNames lists the scenarios' names.
func ScenarioNames() []string {
	var out []string
	for _, s := range Scenarios() {
		out = append(out, s.Name)
	}
	return out
}

func scenarioNamed(name string) (Scenario, bool) {
	for _, s := range Scenarios() {
		if s.Name == name {
			return s, true
		}
	}
	return Scenario{}, false
}

func between(rng *rand.Rand, lo, hi time.Duration) time.Duration {
	if hi <= lo {
		return lo
	}
	return lo + time.Duration(rng.Int64N(int64(hi-lo)))
}

func expand(c Config, rng *rand.Rand) []Event {
	var out []Event
	for i := range max(1, c.Nodes/10) {
		out = append(out, Event{At: start, Kind: Join, Zone: i % c.Zones})
	}
	return out
}

func drainTenth(c Config, rng *rand.Rand) []Event {
	var out []Event
	for _, n := range rng.Perm(c.Nodes)[:max(1, c.Nodes/10)] {
		out = append(out, Event{At: start, Kind: Drain, Node: n})
	}
	return out
}

func nodeLoss(c Config, rng *rand.Rand) []Event {
	p := rng.Perm(c.Nodes)
	out := []Event{{At: start, Kind: Kill, Node: p[0]}}
	if c.Nodes > 1 {
		at := start + c.DeadNodeDelay + 30*time.Minute
		out = append(out, Event{At: at, Kind: Kill, Node: p[1]}, Event{At: at + c.DeadNodeDelay/3, Kind: Restart, Node: p[1]})
	}
	return out
}

func zoneOutage(c Config, rng *rand.Rand) []Event {
	z := rng.IntN(c.Zones)
	return []Event{{At: start, Kind: ZoneDown, Zone: z}, {At: start + c.DeadNodeDelay/2, Kind: ZoneUp, Zone: z}}
}

func zoneLoss(c Config, rng *rand.Rand) []Event {
	z := rng.IntN(c.Zones)
	return []Event{{At: start, Kind: ZoneDown, Zone: z}, {At: start + c.DeadNodeDelay + time.Hour, Kind: ZoneUp, Zone: z}}
}

// churn kills a random live node every 1 to 10 minutes for two hours
// (half an hour if c.Short) and brings it back after 10 s to twice the
// dead-node delay, at most a tenth of the nodes (and one at least) down
// at once.
func churn(c Config, rng *rand.Rand) []Event {
	var out []Event
	back := map[int]time.Duration{} // dead node -> when it returns
	limit := max(1, c.Nodes/10)
	length := 2 * time.Hour
	if c.Short {
		length = 30 * time.Minute
	}
	for at := start; at < start+length; at += between(rng, time.Minute, 10*time.Minute) {
		for n, t := range back {
			if t <= at {
				delete(back, n)
			}
		}
		if len(back) >= limit {
			continue
		}
		n := rng.IntN(c.Nodes)
		if _, dead := back[n]; dead {
			continue
		}
		ret := at + between(rng, 10*time.Second, 2*c.DeadNodeDelay)
		back[n] = ret
		out = append(out, Event{At: at, Kind: Kill, Node: n}, Event{At: ret, Kind: Restart, Node: n})
	}
	return out
}

func rollingRestart(c Config, rng *rand.Rand) []Event {
	var out []Event
	for n := range c.Nodes {
		at := start + time.Duration(n)*time.Minute
		out = append(out, Event{At: at, Kind: Kill, Node: n}, Event{At: at + 20*time.Second, Kind: Restart, Node: n})
	}
	return out
}

// day draws a day of a production cluster's events, more of them the
// larger the cluster, each at a random time.
func day(c Config, rng *rand.Rand) []Event {
	var out []Event
	when := func() time.Duration { return between(rng, 10*time.Minute, 23*time.Hour) }
	nodes := rng.Perm(c.Nodes)
	take := func() (int, bool) {
		if len(nodes) <= c.Nodes/2 {
			return 0, false // keep half the cluster out of it
		}
		n := nodes[0]
		nodes = nodes[1:]
		return n, true
	}
	// Back before the delay: only leaderships move.
	for range 1 + c.Nodes/200 {
		if n, ok := take(); ok {
			at := when()
			out = append(out, Event{At: at, Kind: Kill, Node: n}, Event{At: at + between(rng, 20*time.Second, c.DeadNodeDelay*2/3), Kind: Restart, Node: n})
		}
	}
	// Back after the delay: replaced, then balanced back.
	if n, ok := take(); ok {
		at := when()
		out = append(out, Event{At: at, Kind: Kill, Node: n}, Event{At: at + c.DeadNodeDelay + between(rng, 5*time.Minute, 30*time.Minute), Kind: Restart, Node: n})
	}
	for range 1 + c.Nodes/500 {
		if n, ok := take(); ok {
			out = append(out, Event{At: when(), Kind: Kill, Node: n})
		}
	}
	for range 1 + c.Nodes/1000 {
		if n, ok := take(); ok {
			out = append(out, Event{At: when(), Kind: Drain, Node: n})
		}
	}
	for range 1 + c.Nodes/500 {
		out = append(out, Event{At: when(), Kind: Join, Zone: rng.IntN(c.Zones)})
	}
	z, at := rng.IntN(c.Zones), when()
	out = append(out, Event{At: at, Kind: ZoneDown, Zone: z}, Event{At: at + between(rng, 30*time.Second, c.DeadNodeDelay/2), Kind: ZoneUp, Zone: z})
	parts := max(1, c.Replicas/c.RF/20)
	return append(out, Event{At: when(), Kind: Create, Database: placement.Database{Name: "day", Partitions: parts, Replicas: c.RF}})
}

func nodeName(n int) placement.NodeID { return placement.NodeID(fmt.Sprintf("n%05d", n)) }

func zoneName(z int) string { return fmt.Sprintf("z%d", z) }
