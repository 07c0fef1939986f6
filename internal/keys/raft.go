package keys

import "encoding/binary"

// Raft state of a partition replica, under the partition prefix so that
// dropping a partition drops its log too, but in a section of its own so that
// a snapshot (everything else under the prefix) leaves it out:
//
//	raft section    = prefix 'r'
//	hard state      = prefix 'r' 'h'                 -> raftpb.HardState
//	log entry       = prefix 'r' 'l' uint64(index)    -> raftpb.Entry
//	applied state   = prefix 'r' 's'                 -> applied index, term, SCN, conf state
//	truncated state = prefix 'r' 't'                 -> index and term of the last entry removed from the log
//	rebuilt         = prefix 'r' 'b'                 -> empty: restarted empty by a rebuild, votes for no one until a snapshot
const (
	sectionRaft byte = 'r'

	raftHardState byte = 'h'
	raftLog       byte = 'l'
	raftApplied   byte = 's'
	raftTruncated byte = 't'
	raftRebuilt   byte = 'b'
)

// Raft returns the prefix of the partition's Raft section.
func (p Partition) Raft() []byte { return p.section(sectionRaft, 0) }

func (p Partition) raft(item byte, extra int) []byte {
	return append(p.section(sectionRaft, 1+extra), item)
}

// RaftHardState returns the key of the replica's Raft hard state.
func (p Partition) RaftHardState() []byte { return p.raft(raftHardState, 0) }

// RaftLogPrefix returns the prefix of the replica's Raft log entries.
func (p Partition) RaftLogPrefix() []byte { return p.raft(raftLog, 8) }

// RaftLog returns the key of the Raft log entry at index.
func (p Partition) RaftLog(index uint64) []byte {
	return binary.BigEndian.AppendUint64(p.RaftLogPrefix(), index)
}

// RaftApplied returns the key of the replica's applied state.
func (p Partition) RaftApplied() []byte { return p.raft(raftApplied, 0) }

// RaftTruncated returns the key of the replica's log truncation state.
func (p Partition) RaftTruncated() []byte { return p.raft(raftTruncated, 0) }

// RaftRebuilt returns the key marking a replica restarted empty by a
// consistency repair; installing a snapshot deletes it with the rest of
// the Raft section.
func (p Partition) RaftRebuilt() []byte { return p.raft(raftRebuilt, 0) }
