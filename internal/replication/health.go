package replication

import (
	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/tracker"

	"github.com/doppio-db/doppio/internal/keys"
)

// Health summarizes this node's replicas for its metrics, read in one
// pass of the host's loop so that a scrape costs one round trip however
// many replicas the node hosts.
type Health struct {
	// Replicas counts the replicas hosted here, removed ones excepted.
	Replicas int
	// Leaders counts the replicas here that lead, ready to take writes.
	Leaders int
	// Leaderless counts the replicas here that know of no leader.
	Leaderless int
	// Led lists the Raft groups led here.
	Led []LedGroup
	// MaxFollowerLag is the most log entries any follower or learner of a
	// Raft group led here is behind its leader's last entry.
	MaxFollowerLag uint64
	// LeaderChanges counts the leaders the replicas here learned of, each
	// new leader or new term with a leader once (etcd's
	// leader_changes_seen), since the host started.
	LeaderChanges uint64
}

// LedGroup is a Raft group led here and how many of its voters are alive
// (the leader, and the others whose nodes the transport hears from).
type LedGroup struct {
	Partition  keys.Partition
	Voters     int
	LiveVoters int
}

// Health returns the summary of this node's replicas.
func (h *Host) Health() (Health, error) {
	var out Health
	err := h.call(func() {
		for _, g := range h.members {
			if g.removed {
				continue
			}
			out.Replicas++
			if g.lead == 0 {
				out.Leaderless++
			}
			if !g.isLeader {
				continue
			}
			if g.ready {
				out.Leaders++
			}
			led := LedGroup{Partition: g.prefix}
			for _, v := range g.st.applied.conf().GetVoters() {
				led.Voters++
				if v == h.cfg.NodeID || h.transport.alive(v) {
					led.LiveVoters++
				}
			}
			out.Led = append(out.Led, led)
			g.rn.WithProgress(func(id uint64, _ raft.ProgressType, pr tracker.Progress) {
				if id != h.cfg.NodeID && g.st.last > pr.Match {
					out.MaxFollowerLag = max(out.MaxFollowerLag, g.st.last-pr.Match)
				}
			})
		}
	})
	out.LeaderChanges = h.leaderChanges.Load()
	return out, err
}
