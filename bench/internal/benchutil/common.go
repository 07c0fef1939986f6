package benchutil

import (
	"flag"
	"log"
	"os"
	"path/filepath"
	"time"
)

// Common is what a load benchmark's run takes besides its sizes.
type Common struct {
	// Settle is the longest wait for a calm machine before a measured
	// phase (Calm).
	Settle  time.Duration
	Seed    uint64
	WorkDir string // the data, builds and stores; "" is the system's temporary directory
	Out     string // the report's directory
	Command string // what reproduces the run
	Quick   bool
	// Progress logs what the run is doing.
	Progress func(format string, args ...any)
}

// CommonFlags defines -settle, -seed, -out, -workdir and -quick for the
// command in bench/name, whose report is name.md; quick says what -quick
// does. After flag.Parse, the function it returns makes Common: a quick
// run waits at most 3 s for calm and writes to a temporary directory
// unless told otherwise.
func CommonFlags(name, quick string) func() Common {
	settle := flag.Duration("settle", time.Minute, "longest wait for an idle machine before each measured phase")
	seed := flag.Uint64("seed", 1, "seed of the data and the workload")
	out := flag.String("out", "docs/benchmarks", "directory for "+name+".md and "+name+".png")
	work := flag.String("workdir", "", "directory for the data, the builds and the stores (default: the system's temporary directory)")
	q := flag.Bool("quick", false, quick+" (output defaults to a temporary directory)")
	return func() Common {
		c := Common{Settle: *settle, Seed: *seed, WorkDir: *work, Out: OutDir(*out), Quick: *q,
			Command: CommandLine("cd bench && go run ./" + name), Progress: log.Printf}
		if c.Quick {
			Unset(map[string]func(){
				"settle": func() { c.Settle = 3 * time.Second },
				"out":    func() { c.Out = filepath.Join(os.TempDir(), "doppio-"+name+"-quick") },
			})
		}
		return c
	}
}
