package main

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/doppio-db/doppio/client"
	"github.com/spf13/cobra"
)

func clusterCommand(f *clientFlags) *cobra.Command {
	cmd := &cobra.Command{Use: "cluster", Short: "Inspect the cluster; add, drain and remove nodes"}
	var watch time.Duration
	status := &cobra.Command{
		Use:   "status",
		Short: "Nodes (alive, intent, zone, partitions led / followed), the rebalance's progress, and per partition its replicas, leader, term, SCN and follower lag",
		Args:  cobra.NoArgs,
		RunE: runE(func(cmd *cobra.Command, _ []string) error {
			for {
				info, err := fetchCluster(cmd.Context(), f.client())
				if err != nil {
					return err
				}
				if watch <= 0 {
					return printOutput(cmd, info, func(w io.Writer) error { printCluster(w, info); return nil })
				}
				printRebalance(cmd.OutOrStdout(), info)
				if info.Rebalance == nil || !info.Rebalance.Active {
					return nil
				}
				select {
				case <-cmd.Context().Done():
					return cmd.Context().Err()
				case <-time.After(watch):
				}
			}
		}),
	}
	status.Flags().DurationVar(&watch, "watch", 0, "print only the rebalance's progress every interval until no move remains (e.g. 1s)")
	cmd.AddCommand(status)
	for _, op := range []struct{ verb, short string }{
		{"add", "Make nodes active members that take replicas (nodes started with --standby, or drained or removed before); several at once move data once"},
		{"drain", "Move every replica and leadership off nodes; they keep serving until empty"},
		{"remove", "Take drained nodes (holding no replica) out of the cluster"},
	} {
		var wait bool
		c := &cobra.Command{
			Use:   op.verb + " NODE...",
			Short: op.short,
			Args:  cobra.MinimumNArgs(1),
			RunE: runE(func(cmd *cobra.Command, args []string) error {
				cl := f.client()
				for _, id := range args {
					var in client.NodeIntent
					var err error
					switch op.verb {
					case "add":
						in, err = cl.AddNode(cmd.Context(), id)
					case "drain":
						in, err = cl.DrainNode(cmd.Context(), id)
					default:
						in, err = cl.RemoveNode(cmd.Context(), id)
					}
					if err != nil {
						return err
					}
					fmt.Fprintf(cmd.OutOrStdout(), "%s: %s (alive %t, %d replicas)\n", in.Node, in.State, in.Alive, in.Replicas)
				}
				if !wait || op.verb == "remove" {
					return nil
				}
				return waitRebalance(cmd, cl, op.verb, args)
			}),
		}
		if op.verb != "remove" {
			c.Flags().BoolVar(&wait, "wait", false, "show the rebalance's progress until it is done (for drain: until the nodes hold no replica)")
		}
		cmd.AddCommand(c)
	}
	return cmd
}

// waitRebalance prints the rebalance's progress until no move remains and,
// after a drain, the drained nodes hold nothing.
func waitRebalance(cmd *cobra.Command, cl *client.Client, verb string, nodes []string) error {
	// The controller plans within a second of the intent: until its report
	// says a rebalance started after now, an inactive report is an old one.
	since := time.Now().Add(-time.Second)
	deadline := time.Now().Add(5 * time.Second)
	for {
		info, err := fetchCluster(cmd.Context(), cl)
		if err != nil {
			return err
		}
		r := info.Rebalance
		fresh := r != nil && r.Started != nil && r.Started.After(since)
		done := fresh && !r.Active || !fresh && time.Now().After(deadline)
		if verb == "drain" {
			done = r != nil && !r.Active && heldBy(info, nodes) == 0
		}
		if fresh || done {
			printRebalance(cmd.OutOrStdout(), info)
		}
		if done {
			return nil
		}
		select {
		case <-cmd.Context().Done():
			return cmd.Context().Err()
		case <-time.After(time.Second):
		}
	}
}

// heldBy counts the replicas the partitions place on nodes.
func heldBy(info client.ClusterInfo, nodes []string) int {
	n := 0
	for _, p := range info.Partitions {
		for _, r := range p.Replicas {
			if slices.Contains(nodes, r) {
				n++
			}
		}
	}
	return n
}

// fetchCluster reads /_cluster, bounding the exchange as a status
// command should (the cluster answers within about a second).
func fetchCluster(ctx context.Context, cl *client.Client) (client.ClusterInfo, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	return cl.Cluster(ctx)
}

// printRebalance prints one line: the rebalance's progress bar, moves done
// of total, in flight, and its age.
func printRebalance(out io.Writer, info client.ClusterInfo) {
	r := info.Rebalance
	if r == nil {
		fmt.Fprintln(out, "rebalance: none yet")
		return
	}
	state := "done"
	var took time.Duration
	switch {
	case r.Active && r.Started != nil:
		state, took = "moving", time.Since(*r.Started)
	case r.Started != nil && r.Finished != nil:
		took = r.Finished.Sub(*r.Started)
	}
	fmt.Fprintf(out, "rebalance: %s %3.0f%%  %d/%d moves, %d in flight  %s %s (max %d moves, %d per node)\n",
		progressBar(r.Progress(), 30), r.Progress()*100, r.Done, r.Total, r.InFlight, state, took.Round(100*time.Millisecond), r.MaxMoves, r.MaxMovesPerNode)
}

func printCluster(out io.Writer, info client.ClusterInfo) {
	fmt.Fprintf(out, "active controller: %s\n", dash(info.Controller))
	printRebalance(out, info)
	if info.MixedVersions {
		fmt.Fprintln(out, "warning: mixed versions: the live nodes do not all run the same Doppio (see VERSION)")
	}
	fmt.Fprintln(out)
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NODE\tSTATE\tINTENT\tZONE\tVERSION\tHTTP\tGRPC\tLEADS\tFOLLOWS")
	for _, n := range info.Nodes {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%d\t%d\n", n.ID, n.State, dash(n.Intent), dash(n.Zone), dash(n.Version), dash(n.HTTP), dash(n.GRPC), n.Leads, n.Follows)
	}
	tw.Flush()
	fmt.Fprintln(out)
	tw = tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "DATABASE\tPARTITION\tLEADER\tTERM\tSCN\tREPLICAS (role scn lag)")
	for _, p := range info.Partitions {
		var ms []string
		for _, m := range p.Members {
			lag := "?"
			if m.Lag != nil {
				lag = fmt.Sprint(*m.Lag)
			}
			ms = append(ms, fmt.Sprintf("%s(%s %s %s)", m.Node, m.Role, dash(m.SCN), lag))
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\t%d\t%s\t%s\n", p.Database, p.Partition, dash(p.Leader), p.Term, dash(p.SCN), strings.Join(ms, " "))
	}
	tw.Flush()
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
