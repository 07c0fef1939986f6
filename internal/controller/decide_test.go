package controller

import (
	"reflect"
	"testing"
	"time"

	"github.com/doppio-db/doppio/internal/placement"
)

func TestJudgeAppliesTheDeadNodeDelay(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	delay := 3 * time.Minute
	nodes, untilGone := Judge([]NodeRecord{
		{ID: "c", Zone: "z1", DeadSince: now.Add(-time.Minute)},
		{ID: "a", Zone: "z0", Alive: true},
		{ID: "d", Zone: "z1", DeadSince: now.Add(-delay)},
		{ID: "b", Zone: "z0", Alive: true, Draining: true},
		{ID: "e", Zone: "z2", DeadSince: now.Add(-2 * time.Minute)},
	}, now, delay)
	want := []placement.Node{
		{ID: "a", Zone: "z0", State: placement.Alive},
		{ID: "b", Zone: "z0", State: placement.Alive, Draining: true},
		{ID: "c", Zone: "z1", State: placement.Down},
		{ID: "d", Zone: "z1", State: placement.Gone},
		{ID: "e", Zone: "z2", State: placement.Down},
	}
	if !reflect.DeepEqual(nodes, want) {
		t.Errorf("nodes %+v, want %+v", nodes, want)
	}
	if untilGone != time.Minute {
		t.Errorf("the first down node is gone in %s, want 1m (e's)", untilGone)
	}
	if _, untilGone := Judge([]NodeRecord{{ID: "a", Alive: true}}, now, delay); untilGone != 0 {
		t.Errorf("no node down, yet one is gone in %s", untilGone)
	}
}
