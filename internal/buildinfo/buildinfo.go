// Package buildinfo says which Doppio a binary is: its version, commit,
// build date, Go version and the store format it reads and writes, from
// the linker flags `make build` and `make release` set or, for a plain
// `go build` or `go run`, from the module and VCS stamps Go embeds.
package buildinfo

import (
	"fmt"
	"runtime"
	"runtime/debug"
	"strings"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
)

// StoreFormat is the version of the layout of what a node stores that this
// binary reads and writes (the node records it in its store and refuses a
// newer one; see internal/node/format.go for its history).
const StoreFormat = 2

// Set by the Makefile: -ldflags "-X github.com/doppio-db/doppio/internal/buildinfo.version=…".
var (
	version string
	commit  string
	date    string
)

// Info is what a binary says of itself.
type Info struct {
	Version     string `json:"version"`
	Commit      string `json:"commit"`
	Date        string `json:"date"` // RFC 3339, UTC; "" when unknown
	GoVersion   string `json:"goVersion"`
	StoreFormat int    `json:"storeFormat"`
}

var (
	once sync.Once
	info Info
)

// Get returns this binary's Info: the linker's values where set, else
// Go's build stamps; a version nobody stamped reads "devel".
func Get() Info {
	once.Do(func() {
		info = Info{Version: version, Commit: commit, Date: date, GoVersion: runtime.Version(), StoreFormat: StoreFormat}
		if bi, ok := debug.ReadBuildInfo(); ok {
			fromBuildInfo(&info, bi)
		}
		if info.Version == "" {
			info.Version = "devel"
		}
	})
	return info
}

// fromBuildInfo fills what the linker left empty from Go's stamps: the
// module version (a tagged `go install`) and the VCS revision and time (a
// `go build` in a checkout); a modified checkout's commit ends "-dirty".
func fromBuildInfo(in *Info, bi *debug.BuildInfo) {
	if in.Version == "" && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		in.Version = strings.TrimPrefix(bi.Main.Version, "v")
	}
	var rev, at string
	dirty := false
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.time":
			at = s.Value
		case "vcs.modified":
			dirty = s.Value == "true"
		}
	}
	if in.Commit == "" && rev != "" {
		in.Commit = rev
		if dirty {
			in.Commit += "-dirty"
		}
	}
	if in.Date == "" {
		in.Date = at
	}
}

// String is the one-line form: "doppio 0.3.0 (commit abc123, built …, go1.26.8, store format 1)".
func (in Info) String() string {
	c, d := in.Commit, in.Date
	if c == "" {
		c = "unknown"
	}
	if d == "" {
		d = "unknown"
	}
	return fmt.Sprintf("doppio %s (commit %s, built %s, %s, store format %d)", in.Version, c, d, in.GoVersion, in.StoreFormat)
}

// Collector is the doppio_build_info gauge: always 1, the build in its
// labels, so a query can group or join any metric by version.
func Collector() prometheus.Collector {
	in := Get()
	g := prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "doppio_build_info",
		Help: "Always 1; the labels say which build of Doppio this process runs.",
		ConstLabels: prometheus.Labels{
			"version": in.Version, "commit": in.Commit, "date": in.Date,
			"goversion": in.GoVersion, "store_format": fmt.Sprint(in.StoreFormat),
		},
	})
	g.Set(1)
	return g
}
