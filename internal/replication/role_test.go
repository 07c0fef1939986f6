package replication

import (
	"encoding/json"
	"testing"
)

// TestRoleJSONIsTheStatusWord guards /_cluster's role words: a Role
// marshals to the lower-case word callers compared strings with before it
// was typed.
func TestRoleJSONIsTheStatusWord(t *testing.T) {
	want := map[Role]string{
		RoleFollower: `"follower"`, RoleCandidate: `"candidate"`, RolePreCandidate: `"pre-candidate"`,
		RoleLeader: `"leader"`, RoleLearner: `"learner"`, RoleRemoved: `"removed"`,
	}
	for r, w := range want {
		b, err := json.Marshal(r)
		if err != nil || string(b) != w {
			t.Errorf("json.Marshal(%d) = %s, %v; want %s", uint8(r), b, err, w)
		}
	}
}
