// Command torture runs Doppio's fault-injection suite: for each nemesis, a
// fresh cluster of real `doppio start` processes in network namespaces, the
// workloads driving it while the nemesis injects faults, then heal, settle
// and check. It needs root (namespaces, routes, qdiscs).
//
//	go run ./torture/cmd/torture -nemesis all -workload all -duration 60s -report docs/reliability.md
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/doppio-db/doppio/torture"
)

func main() {
	var names []string
	for _, n := range torture.Nemeses() {
		names = append(names, n.Name)
	}
	nemesis := flag.String("nemesis", "mixed", "nemeses to run, comma-separated, or all: "+strings.Join(names, ", "))
	workload := flag.String("workload", "all", "workloads to run together, comma-separated, or all: "+strings.Join(torture.WorkloadNames(), ", "))
	duration := flag.Duration("duration", 60*time.Second, "how long each nemesis runs")
	nodes := flag.Int("nodes", 3, "nodes in the cluster: 3 or 5 (three embed the etcd members)")
	seed := flag.Uint64("seed", 0, "seed of the schedules and the clients (0: from the clock); printed to replay a run")
	report := flag.String("report", "", "write the results section of this markdown file (e.g. docs/reliability.md)")
	dir := flag.String("dir", "", "directory for node logs, checker artifacts and the data of failed runs (default: a new temporary one, kept)")
	binary := flag.String("binary", "", "doppio binary to run (default: go build ./cmd/doppio)")
	secure := flag.Bool("secure", false, "run the nodes in secure mode (TLS on every link, authentication), with certificates made for each cluster")
	flag.Parse()
	if err := run(*nemesis, *workload, *duration, *nodes, *seed, *report, *dir, *binary, *secure); err != nil {
		fmt.Fprintln(os.Stderr, "torture:", err)
		os.Exit(1)
	}
}

func run(nemesisList, workloadList string, d time.Duration, nodes int, seed uint64, report, dir, binary string, secure bool) error {
	if nodes != 3 && nodes != 5 {
		return fmt.Errorf("-nodes must be 3 or 5, not %d", nodes)
	}
	if err := torture.CanCreateNetworks(); err != nil {
		return err
	}
	var nemeses []torture.Nemesis
	if nemesisList == "all" {
		nemeses = torture.Nemeses()
	} else {
		for _, name := range strings.Split(nemesisList, ",") {
			nm, err := torture.NemesisNamed(strings.TrimSpace(name))
			if err != nil {
				return err
			}
			nemeses = append(nemeses, nm)
		}
	}
	if _, err := torture.NewWorkloads(workloadList); err != nil {
		return err
	}
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	if dir == "" {
		var err error
		if dir, err = os.MkdirTemp("", "doppio-torture-"); err != nil {
			return err
		}
	}
	if binary == "" {
		binary = filepath.Join(dir, "doppio")
		build := exec.Command("go", "build", "-o", binary, "./cmd/doppio")
		build.Stdout, build.Stderr = os.Stderr, os.Stderr
		if err := build.Run(); err != nil {
			return fmt.Errorf("build doppio (run from the repository's root): %w", err)
		}
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	mode := "insecure"
	if secure {
		mode = "secure"
	}
	fmt.Printf("torture: seed %d, %d nodes (%s), %v per nemesis, data and logs under %s\n", seed, nodes, mode, d, dir)

	var runs []torture.RunReport
	failed := 0
	netem := false
	for i, nm := range nemeses {
		if ctx.Err() != nil {
			break
		}
		ws, _ := torture.NewWorkloads(workloadList)
		cdir := filepath.Join(dir, fmt.Sprintf("%02d-%s", i, nm.Name))
		start := torture.StartCluster
		if secure {
			start = torture.StartSecureCluster
		}
		c, err := start(ctx, binary, cdir, nodes)
		if err != nil {
			return fmt.Errorf("nemesis %s: start the cluster: %w", nm.Name, err)
		}
		netem = c.Net.Netem
		r := torture.Run(ctx, c, torture.Options{Nemesis: nm, Workloads: ws, Duration: d, Seed: seed,
			Dir: filepath.Join(cdir, "artifacts"), Log: os.Stdout})
		if err := c.Close(); err != nil {
			fmt.Fprintln(os.Stderr, "torture: tear down:", err)
		}
		runs = append(runs, r)
		if !r.OK() {
			failed++
		} else {
			// A passing run keeps its logs; its stores (a GB or more) go.
			os.RemoveAll(filepath.Join(cdir, "data"))
		}
	}
	if report != "" {
		cmd := fmt.Sprintf("go run ./torture/cmd/torture -nemesis %s -workload %s -duration %v -nodes %d -seed %d -report %s",
			nemesisList, workloadList, d, nodes, seed, report)
		if secure {
			cmd += " -secure"
		}
		if err := torture.WriteReport(report, torture.Markdown(cmd, seed, torture.Machine(netem), runs)); err != nil {
			return err
		}
		fmt.Println("torture: results written to", report)
	}
	if failed > 0 {
		return fmt.Errorf("%d of %d nemesis runs failed (seed %d); logs and artifacts under %s", failed, len(runs), seed, dir)
	}
	fmt.Printf("torture: %d nemesis runs passed (seed %d)\n", len(runs), seed)
	return nil
}
