package torture

import (
	"testing"
)

const fixtureGroups = 6

// dread records a read of group 1 by client answering version v: whole
// (its documents), or with version w's documents.
func (s *synth) dread(client, v, w int, stale bool, from, to int) {
	in := derivedRead{What: "group", G: 1, Stale: stale}
	s.add(client, "read", "", false, in, derivedAnswer{Version: v, Status: 200, Docs: derivedWant(in, w, fixtureGroups)}, Acked, from, to)
}

// dmove records a pusher operation from version from, seen announced
// with current version cur (0: never seen announced).
func (s *synth) dmove(kind string, from, cur int, o Outcome, at, to int) {
	var out any
	if cur != 0 {
		out = int64(cur)
	}
	s.add(0, kind, "", true, derivedMove{From: from}, out, o, at, to)
}

// derivedFixture: version 2 pushed and swapped in (announced at 100),
// rolled back to 1 (announced at 300), rolled forward without being
// seen announced (from 400); reads at nodes that lag each move.
func derivedFixture() synth {
	var s synth
	s.dmove("push", 1, 2, Acked, 0, 100)
	s.dread(1, 1, 1, false, 10, 20)
	s.dread(1, 2, 2, false, 30, 40)
	s.dread(1, 1, 1, false, 50, 60) // a node not yet serving 2
	s.dread(1, 2, 2, false, 110, 120)
	s.dread(2, 1, 1, true, 150, 160) // stale reads may lag
	s.dmove("stage", 2, 2, Acked, 150, 180)
	s.dmove("rollback", 2, 1, Acked, 200, 300)
	s.dread(1, 2, 2, false, 210, 220)
	s.dread(1, 1, 1, false, 230, 240)
	s.dread(1, 1, 1, false, 310, 320)
	s.dmove("swap", 1, 0, Failed, 330, 340) // refused: no effect
	s.dread(3, 1, 1, false, 350, 360)
	s.dmove("roll-forward", 1, 0, Indeterminate, 400, 500)
	s.dread(3, 2, 2, false, 410, 420)
	s.dread(3, 1, 1, false, 430, 440) // a node not yet serving the roll-forward
	return s
}

func TestDerivedCheckerAcceptsReadsAcrossMoves(t *testing.T) {
	s := derivedFixture()
	if res := judgeDerived(Result{}, s.ops, fixtureGroups); !res.OK() {
		t.Fatalf("valid history judged %+v", res)
	}
}

func TestDerivedCheckerFindsMixedVersionsStaleReadsAndGoingBack(t *testing.T) {
	for _, c := range []struct {
		name  string
		add   func(s *synth)
		viols int
	}{
		{"an answer of another version than it names", func(s *synth) { s.dread(4, 2, 1, false, 30, 40) }, 1},
		{"a document missing from the version", func(s *synth) {
			in := derivedRead{What: "group", G: 1}
			docs := derivedWant(in, 2, fixtureGroups)
			s.add(4, "read", "", false, in, derivedAnswer{Version: 2, Status: 200, Docs: docs[1:]}, Acked, 30, 40)
		}, 1},
		{"a 404 for a document the version holds", func(s *synth) {
			// (5·1 + 3·1 + 7·2) mod 4 = 2: version 2 holds g1/1.
			s.add(4, "read", "", false, derivedRead{What: "get", G: 1, ID: 1}, derivedAnswer{Version: 2, Status: 404}, Acked, 30, 40)
		}, 1},
		{"the old version after the swap was announced", func(s *synth) { s.dread(4, 1, 1, false, 110, 120) }, 1},
		{"going back with no rollback or move from it under way", func(s *synth) {
			s.dmove("roll-forward", 1, 2, Acked, 550, 560)
			s.dmove("push", 2, 3, Acked, 600, 700)
			s.dmove("push", 3, 0, Indeterminate, 710, 720)
			s.dread(5, 3, 3, false, 730, 740)
			s.dread(5, 2, 2, false, 750, 760)
		}, 1},
	} {
		s := derivedFixture()
		c.add(&s)
		if res := judgeDerived(Result{}, s.ops, fixtureGroups); res.Violations != c.viols {
			t.Errorf("%s: %d violations, want %d: %v", c.name, res.Violations, c.viols, res.Failures)
		}
	}
}
