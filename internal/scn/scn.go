// Package scn defines the system change number, the position of one
// committed transaction in one partition's timeline; it is a leaf (stdlib
// only) so that light packages, such as the change-stream checkpoint
// format the Go client parses, can name positions without linking the
// partition engine.
package scn

import "strconv"

// SCN is the system change number of one committed transaction in one
// partition: the generation changes with leadership, the sequence is the
// transaction's position in the partition's timeline (it never restarts, so
// a timeline has no gaps). SCNs compare by (generation, sequence).
type SCN struct {
	Generation uint64
	Sequence   uint64
}

// String renders "g:s", the wire form of X-Doppio-SCN.
func (s SCN) String() string {
	var b [41]byte // two uint64s and the colon
	out := strconv.AppendUint(b[:0], s.Generation, 10)
	out = append(out, ':')
	return string(strconv.AppendUint(out, s.Sequence, 10))
}

// Less orders SCNs.
func (s SCN) Less(o SCN) bool {
	if s.Generation != o.Generation {
		return s.Generation < o.Generation
	}
	return s.Sequence < o.Sequence
}
