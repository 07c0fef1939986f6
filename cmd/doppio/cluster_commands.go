package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/doppio-db/doppio/internal/node"
	"github.com/spf13/cobra"
)

func clusterCommand(f *clientFlags) *cobra.Command {
	cmd := &cobra.Command{Use: "cluster", Short: "Inspect the cluster"}
	cmd.AddCommand(&cobra.Command{
		Use:   "status",
		Short: "Nodes (alive, zone, partitions led / followed) and per partition its replicas, leader, term, SCN and follower lag",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			hc := &http.Client{Timeout: 10 * time.Second}
			resp, err := hc.Get(strings.TrimSuffix(f.server, "/") + "/_cluster")
			if err != nil {
				return err
			}
			defer resp.Body.Close()
			b, err := io.ReadAll(resp.Body)
			if err != nil {
				return err
			}
			if resp.StatusCode != http.StatusOK {
				return fmt.Errorf("%s: %s", resp.Status, b)
			}
			var info node.ClusterInfo
			if err := json.Unmarshal(b, &info); err != nil {
				return err
			}
			printCluster(cmd.OutOrStdout(), info)
			return nil
		},
	})
	return cmd
}

func printCluster(out io.Writer, info node.ClusterInfo) {
	fmt.Fprintf(out, "active controller: %s\n\n", dash(info.Controller))
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NODE\tSTATE\tZONE\tHTTP\tGRPC\tLEADS\tFOLLOWS")
	for _, n := range info.Nodes {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%d\t%d\n", n.ID, n.State, dash(n.Zone), dash(n.HTTP), dash(n.GRPC), n.Leads, n.Follows)
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
