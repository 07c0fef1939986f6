// Package torture is Doppio's fault-injection suite: real node processes in
// their own network namespaces, nemeses that kill, pause and cut them, and
// workloads whose histories are checked afterwards (linearizability with
// Porcupine, bank totals, counters, sets, change-log order), in the manner
// of Jepsen and FoundationDB's simulation tests.
//
// The pieces meet at two interfaces: a Workload drives a Target (the nodes'
// REST endpoints) and judges its own history; a Nemesis (see nemesis.go)
// injects faults into the Cluster the Target belongs to.
package torture

import (
	"context"
	"crypto/tls"
	"math/rand/v2"
	"time"
)

// Target is what a workload drives: the REST endpoints of the cluster's nodes.
type Target interface {
	// Endpoints are the base URLs of every node's REST API, e.g.
	// "http://10.77.0.2:8080", or "https://…" in secure mode. A workload
	// spreads its clients over them.
	Endpoints() []string
	// TLS is the client configuration the endpoints require: nil for
	// plaintext; in secure mode it trusts the cluster's CA and presents a
	// client certificate that authenticates a user holding root.
	TLS() *tls.Config
}

// Workload is one kind of concurrent client activity with its own checker.
type Workload interface {
	// Name is short and stable ("register", "bank", "counter", "set",
	// "changelog", "bulk", "derived"); it names the workload in reports
	// and in -workload flags.
	Name() string
	// Setup creates the workload's own database and tables and any initial
	// documents; it retries until the cluster serves them or ctx ends.
	Setup(ctx context.Context, t Target) error
	// Run drives concurrent clients until ctx ends, recording every
	// operation's invocation, completion and outcome (ok, failed, or
	// indeterminate when the outcome is unknown: timeouts, 5xx, resets).
	Run(ctx context.Context, t Target, rng *rand.Rand) error
	// Check runs once the nemesis has healed the cluster: it reads the final
	// state, judges the recorded history and writes artifacts (Porcupine's
	// visualization, the minimal failing history) under dir.
	Check(ctx context.Context, t Target, dir string) Result
}

// Result is a workload's verdict over one run.
type Result struct {
	Workload      string
	Attempted     int
	Acknowledged  int
	Indeterminate int
	// Lost counts acknowledged effects missing at the end; must be 0.
	Lost int
	// Violations counts consistency anomalies (non-linearizable keys, a
	// wrong bank total, a change-log gap or duplicate, a phantom); must be 0.
	Violations int
	// LongestWriteGap is the longest stretch of the run in which no write
	// was acknowledged.
	LongestWriteGap time.Duration
	// Failures describe each lost effect or violation, minimal and readable.
	Failures []string
	// Artifacts are files written under Check's dir.
	Artifacts []string
}

// OK reports whether the run lost nothing and broke no invariant.
func (r Result) OK() bool { return r.Lost == 0 && r.Violations == 0 && len(r.Failures) == 0 }
