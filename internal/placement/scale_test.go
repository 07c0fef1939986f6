package placement_test

import (
	"fmt"
	"testing"

	"github.com/doppio-db/doppio/internal/placement"
)

// BenchmarkScale times one call of Compute on clusters of 6 to 1,000 nodes
// in three zones holding one database of 2,048 to 33,334 partitions × 3
// replicas: the initial placement, then the replan right after each event
// on the placement it created. It uses only the package's exported API,
// so bench/placement runs the same file against an older Compute (`make
// bench-placement`, docs/benchmarks/placement.md).
func BenchmarkScale(b *testing.B) {
	for _, ev := range scaleEvents {
		for _, sz := range scaleSizes {
			b.Run(fmt.Sprintf("%s/nodes=%d/replicas=%d", ev, sz.Nodes, 3*sz.Partitions), func(b *testing.B) {
				in, err := scaleInput(ev, sz.Nodes, sz.Partitions)
				if err != nil {
					b.Fatal(err)
				}
				for b.Loop() {
					if _, err := placement.Compute(in); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

// scaleSizes are BenchmarkScale's clusters.
var scaleSizes = []struct{ Nodes, Partitions int }{
	{6, 2048}, {30, 3334}, {100, 10000}, {300, 33334}, {1000, 33334},
}

// scaleEvents are what BenchmarkScale replans after: initial is the
// placement of a new database on an empty cluster; join adds a node to zone
// a; down, gone and drain mark the first node down (it keeps its
// replicas), gone (they are recreated) or draining; zone-gone loses zone
// c; create adds a database of 1,024 partitions × 3.
var scaleEvents = []string{"initial", "join", "down", "gone", "drain", "zone-gone", "create"}

// scaleInput returns the input of the replan after event on a cluster of
// nodes in three zones holding partitions × 3 replicas, as placed by
// Compute.
func scaleInput(event string, nodes, partitions int) (placement.Input, error) {
	var ns []placement.Node
	for i := range nodes {
		ns = append(ns, placement.Node{ID: placement.NodeID(fmt.Sprintf("n%04d", i)), Zone: string(rune('a' + i%3))})
	}
	dbs := []placement.Database{{Name: "d", Partitions: partitions, Replicas: 3}}
	in := placement.Input{Nodes: ns, Databases: dbs}
	if event == "initial" {
		return in, nil
	}
	plan, err := placement.Compute(in)
	if err != nil {
		return in, err
	}
	in.Current = plan.Create
	switch event {
	case "join":
		in.Nodes = append(ns, placement.Node{ID: "joining", Zone: "a"})
	case "down":
		ns[0].State = placement.Down
	case "gone":
		ns[0].State = placement.Gone
	case "drain":
		ns[0].Draining = true
	case "zone-gone":
		for i := range ns {
			if ns[i].Zone == "c" {
				ns[i].State = placement.Gone
			}
		}
	case "create":
		in.Databases = append(dbs, placement.Database{Name: "e", Partitions: 1024, Replicas: 3})
	default:
		return in, fmt.Errorf("unknown event %q", event)
	}
	return in, nil
}
