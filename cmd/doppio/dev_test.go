package main

import "testing"

func TestDevClusterNodesServePprofOnConsecutivePorts(t *testing.T) {
	for k, want := range []string{"127.0.0.1:6060", "127.0.0.1:6061", "127.0.0.1:6062"} {
		got, err := nthPort("127.0.0.1:6060", k)
		if err != nil || got != want {
			t.Errorf("node %d: %q, %v; want %q", k+1, got, err, want)
		}
	}
	for _, bad := range []string{"127.0.0.1:0", "127.0.0.1", "host:http"} {
		if got, err := nthPort(bad, 1); err == nil {
			t.Errorf("nthPort(%q) = %q, want an error", bad, got)
		}
	}
}
