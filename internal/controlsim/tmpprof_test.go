package controlsim

import "testing"

func TestTmpProfile(t *testing.T) {
	r, err := Run(Config{Scenario: "expand", Seed: 3, Nodes: 30, Replicas: 3000})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("rounds %d wall %s planning %s adds %d", r.Rounds, r.Wall, r.Planning, r.Moves.Adds)
}
