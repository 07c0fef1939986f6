package operator

import (
	"context"
	"errors"
	"slices"

	"github.com/doppio-db/doppio/client/wire"
	"github.com/doppio-db/doppio/internal/membership"
	"github.com/doppio-db/doppio/internal/problem"
	"github.com/doppio-db/doppio/internal/schema"
)

// SetNodeIntent records what the operator wants of node id: "add" makes
// it active (it takes replicas), "drain" moves everything off it, "remove"
// takes a drained node out of the cluster for good. It refuses a drain
// that would leave a database fewer active nodes than its replicas, and a
// removal while the node still holds replicas.
func (o *Operator) SetNodeIntent(ctx context.Context, id, verb string) (wire.NodeIntent, error) {
	var st membership.IntentState
	switch verb {
	case "add":
		st = membership.IntentActive
	case "drain":
		st = membership.IntentDraining
	case "remove":
		st = membership.IntentRemoved
	default:
		return wire.NodeIntent{}, problem.New(problem.NotFound, "unknown node operation %q (want add, drain or remove)", verb)
	}
	v := o.cfg.Cluster
	_, alive := v.Node(id)
	intents, err := membership.ReadIntents(ctx, o.cfg.Client, o.cfg.Prefix)
	if err != nil {
		return wire.NodeIntent{}, err
	}
	_, hasIntent := intents.ByNode[id]
	held := replicasHeld(id, v.Placements(), v.Groups())
	if !alive && !hasIntent && held == 0 {
		return wire.NodeIntent{}, problem.Field(problem.NotFound, "node", "node %q is not part of the cluster: not registered, no intent recorded, no replica placed on it", id)
	}
	cur := intents.State(id)
	guard := []string{id}
	switch st {
	case membership.IntentDraining:
		if cur == membership.IntentRemoved {
			return wire.NodeIntent{}, problem.Field(problem.Conflict, "node", "node %q was removed; add it again first", id)
		}
		// Two drains at once must not both pass the check: the write
		// requires every live node's intent unchanged since read.
		if guard, err = checkDrain(id, v.Nodes(), intents, o.cfg.Databases.Databases()); err != nil {
			return wire.NodeIntent{}, err
		}
	case membership.IntentRemoved:
		if held > 0 {
			return wire.NodeIntent{}, problem.Field(problem.Conflict, "node", "node %q still holds %d replica(s); drain it first (doppio cluster drain %s) and remove it once it holds none", id, held, id)
		}
	}
	in, recorded := intents.ByNode[id]
	if !recorded || cur != st {
		if in, err = membership.SetIntent(ctx, o.cfg.Client, o.cfg.Prefix, id, st, intents, guard); err != nil {
			if errors.Is(err, membership.ErrIntentsChanged) {
				return wire.NodeIntent{}, problem.New(problem.Conflict, "another node's state changed while %s was being applied to %q; retry", verb, id)
			}
			return wire.NodeIntent{}, err
		}
	}
	return wire.NodeIntent{Node: id, Alive: alive, State: string(in.State), Since: in.Since, Replicas: held}, nil
}

// checkDrain refuses draining id when some database would be left with
// fewer live, active nodes than its replication factor: its replicas on id
// could go nowhere and the drain would never end. It returns the nodes
// whose intents the decision read.
func checkDrain(id string, live []membership.Node, intents membership.Intents, dbs []schema.Database) ([]string, error) {
	active := 0
	read := []string{id}
	for _, nd := range live {
		if nd.ID == id {
			continue
		}
		read = append(read, nd.ID)
		if intents.State(nd.ID).TakesReplicas() {
			active++
		}
	}
	for _, d := range dbs {
		if rf := max(d.Replicas, 1); active < rf {
			return nil, problem.Field(problem.Conflict, "node",
				"draining %q would leave %d live active node(s) for database %q, which keeps %d replicas of each partition; add a node first", id, active, d.Name, rf)
		}
	}
	return read, nil
}

// replicasHeld counts the partitions that place a replica on id or whose
// leader reports id as a member.
func replicasHeld(id string, placements map[string]membership.PlacementRecord, groups map[string]membership.Groups) int {
	type key struct {
		db string
		p  int
	}
	held := map[key]bool{}
	for db, rec := range placements {
		for p, pp := range rec.Partitions {
			if slices.Contains(pp.Replicas, id) {
				held[key{db, p}] = true
			}
		}
	}
	for _, gs := range groups {
		for db, ps := range gs {
			for p, g := range ps {
				if g.Has(id) {
					held[key{db, p}] = true
				}
			}
		}
	}
	return len(held)
}
