package buildinfo

import (
	"maps"
	"runtime/debug"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

// TestGoStampsFillWhatTheLinkerLeftEmpty: a `go build` in a checkout
// reports its revision (marked dirty when modified) and commit time, a
// tagged `go install` its module version; linker values win.
func TestGoStampsFillWhatTheLinkerLeftEmpty(t *testing.T) {
	stamps := &debug.BuildInfo{
		Main: debug.Module{Version: "v1.4.2"},
		Settings: []debug.BuildSetting{
			{Key: "vcs.revision", Value: "abc123"},
			{Key: "vcs.time", Value: "2026-11-27T10:00:00Z"},
			{Key: "vcs.modified", Value: "true"},
		},
	}
	var got Info
	fromBuildInfo(&got, stamps)
	if want := (Info{Version: "1.4.2", Commit: "abc123-dirty", Date: "2026-11-27T10:00:00Z"}); got != want {
		t.Errorf("from Go's stamps: %+v, want %+v", got, want)
	}
	linked := Info{Version: "2.0.0", Commit: "def456", Date: "2026-11-01T00:00:00Z"}
	got = linked
	fromBuildInfo(&got, stamps)
	if got != linked {
		t.Errorf("linker values overridden: %+v, want %+v", got, linked)
	}
	got = Info{}
	fromBuildInfo(&got, &debug.BuildInfo{Main: debug.Module{Version: "(devel)"}})
	if got.Version != "" {
		t.Errorf("a devel module gave version %q", got.Version)
	}
}

func TestBuildInfoGaugeCarriesTheBuild(t *testing.T) {
	reg := prometheus.NewRegistry()
	reg.MustRegister(Collector())
	mfs, err := reg.Gather()
	if err != nil || len(mfs) != 1 || len(mfs[0].GetMetric()) != 1 {
		t.Fatalf("gathered %v, %v; want one doppio_build_info sample", mfs, err)
	}
	m := mfs[0].GetMetric()[0]
	got := map[string]string{}
	for _, l := range m.GetLabel() {
		got[l.GetName()] = l.GetValue()
	}
	in := Get()
	want := map[string]string{"version": in.Version, "commit": in.Commit, "date": in.Date, "goversion": in.GoVersion, "store_format": "2"}
	if mfs[0].GetName() != "doppio_build_info" || m.GetGauge().GetValue() != 1 || !maps.Equal(got, want) {
		t.Errorf("%s = %v %v, want doppio_build_info = 1 %v", mfs[0].GetName(), m.GetGauge().GetValue(), got, want)
	}
}
