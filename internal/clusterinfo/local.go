package clusterinfo

import (
	"iter"

	"github.com/doppio-db/doppio/client/wire"
	"github.com/doppio-db/doppio/internal/consistency"
	"github.com/doppio-db/doppio/internal/replication"
)

// Replica is a Raft group hosted here (*replication.Group).
type Replica interface {
	Status() (replication.Status, error)
	// CheckProgress reports whether a consistency check is summing the
	// replica now, and the bytes it summed so far.
	CheckProgress() (summing bool, bytes uint64)
}

// Checks holds the consistency check outcomes (*consistency.Checker).
type Checks interface {
	Recorded() map[consistency.Ref]wire.PartitionCheck
	Last(ref consistency.Ref, recorded map[consistency.Ref]wire.PartitionCheck) *wire.CheckStatus
}

// Local reports every replica of hosted with its Raft status, node ids
// named by name, and the last check of those led here.
func Local(node string, transfers []wire.Transfer, hosted iter.Seq2[consistency.Ref, Replica], checks Checks, name func(raft uint64) string) wire.LocalInfo {
	out := wire.LocalInfo{Node: node, Replicas: []wire.LocalReplica{}, Transfers: transfers}
	if hosted == nil {
		return out
	}
	var recorded map[consistency.Ref]wire.PartitionCheck
	for ref, g := range hosted {
		st, err := g.Status()
		if err != nil {
			continue
		}
		lr := wire.LocalReplica{
			Database: ref.DB, Partition: ref.Partition, Role: st.Role.String(), Term: st.Term,
			SCN: st.Applied.String(), Applied: st.AppliedIndex,
		}
		if st.Leader != 0 {
			lr.Leader = name(st.Leader)
		}
		for _, v := range st.Voters {
			lr.Voters = append(lr.Voters, name(v))
		}
		for _, l := range st.Learners {
			lr.Learners = append(lr.Learners, name(l))
		}
		if st.Role == replication.RoleLeader {
			if recorded == nil { // read once, and only if this node leads
				recorded = checks.Recorded()
			}
			lr.Check = checks.Last(ref, recorded)
			if summing, b := g.CheckProgress(); summing && lr.Check != nil {
				lr.Check.SummedBytes = b
			}
		}
		if len(st.Followers) > 0 {
			lr.Followers = map[string]wire.FollowerReport{}
			for id, f := range st.Followers {
				lr.Followers[name(id)] = wire.FollowerReport{Match: f.Match, Lag: f.Lag, State: f.State, Active: f.Active}
			}
		}
		out.Replicas = append(out.Replicas, lr)
	}
	return out
}
