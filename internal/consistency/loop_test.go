package consistency

import (
	"testing"
	"time"

	"github.com/doppio-db/doppio/client/wire"
)

func TestPartitionIsDueAnIntervalAfterItsLatestCheck(t *testing.T) {
	const interval = time.Hour
	t0 := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	at := func(d time.Duration) time.Time { return t0.Add(d) }
	checked := func(d time.Duration) *wire.CheckStatus {
		return &wire.CheckStatus{Last: &wire.PartitionCheck{At: at(d)}}
	}
	for _, tc := range []struct {
		name  string
		now   time.Time
		epoch time.Time
		tried time.Time
		st    *wire.CheckStatus
		want  bool
	}{
		{"never checked, epoch recent", at(30 * time.Minute), t0, time.Time{}, nil, false},
		{"never checked, epoch an interval old", at(time.Hour), t0, time.Time{}, nil, true},
		{"no check outcome yet", at(2 * time.Hour), t0, time.Time{}, &wire.CheckStatus{}, true},
		{"checked recently by a leader", at(2 * time.Hour), t0, time.Time{}, checked(90 * time.Minute), false},
		{"checked an interval ago", at(3 * time.Hour), t0, time.Time{}, checked(2 * time.Hour), true},
		{"failed attempt recently", at(2 * time.Hour), t0, at(90 * time.Minute), nil, false},
		{"failed attempt an interval ago", at(3 * time.Hour), t0, at(2 * time.Hour), checked(time.Hour), true},
		{"check recorded before the epoch", at(30 * time.Minute), t0, time.Time{}, checked(-2 * time.Hour), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := due(tc.now, interval, tc.epoch, tc.tried, tc.st); got != tc.want {
				t.Fatalf("due = %v, want %v", got, tc.want)
			}
		})
	}
}
