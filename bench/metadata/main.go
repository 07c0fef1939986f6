// Command metadata measures what the control plane's metadata costs per
// event as the cluster grows (issue 32, item 3): the etcd bytes written
// and the bytes a router's watch receives when a node joins, a node goes
// down and its leaderships move, and a database is created, at 10,000
// and 100,000 partition replicas.
//
// Everything but the storage is real: an etcd (internal/embedetcd), the
// controller (controller.Run), the catalog, and one
// membership.Registration per node publishing its leaderships and group
// reports as a node does. The partitions' Raft groups follow their
// placement at once (see hosts), so the figures are the metadata's alone.
// It prints a markdown section for docs/benchmarks/scale.md. Run it with
// `make bench-metadata`; -quick is a smoke run.
package main

import (
	"flag"
	"fmt"
	"log"
	"os"
	"time"

	"github.com/doppio-db/doppio/bench/internal/benchutil"
)

// size is one cluster: its partitions are split over databases of at
// most 4,096 partitions.
type size = benchutil.Cluster

func main() {
	var (
		sizes = flag.String("sizes", "100x3334,1000x33334", "clusters, nodes x partitions (3 replicas each), comma-separated")
		idle  = flag.Duration("idle", 3*time.Second, "an event is over when etcd saw no write for this long")
		out   = flag.String("out", "", "also write the markdown section to this file")
		quick = flag.Bool("quick", false, "smoke run: 12 nodes x 334 partitions")
	)
	flag.Parse()
	if *quick && !benchutil.FlagSet("sizes") {
		*sizes = "12x334"
	}
	ss, err := benchutil.ParseClusters(*sizes)
	if err != nil {
		log.Fatalf("-sizes: %v", err)
	}
	run := benchutil.StartRun(benchutil.CommandLine("cd bench && go run ./metadata"))
	load := [2]float64{benchutil.LoadAvg()}
	var results [][]event
	for _, s := range ss {
		log.Printf("%d nodes, %d partitions x 3", s.Nodes, s.Partitions)
		evs, err := measure(s, *idle)
		if err != nil {
			log.Fatal(err)
		}
		results = append(results, evs)
	}
	load[1] = benchutil.LoadAvg()
	run.Finish()
	md := report(run, ss, results, load, *quick)
	fmt.Print(md)
	if *out != "" {
		if err := os.WriteFile(*out, []byte(md), 0o644); err != nil {
			log.Fatal(err)
		}
	}
}
