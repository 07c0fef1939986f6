package main

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/doppio-db/doppio/client"
	"github.com/dustin/go-humanize"
	"github.com/spf13/cobra"
)

func cacheCommand(f *clientFlags) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "cache",
		Short: "Inspect the cache tier: cacheable tables, read sides, updaters",
	}
	cmd.AddCommand(cacheStatusCommand(f))
	return cmd
}

func cacheStatusCommand(f *clientFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "status [-o json|yaml|table]",
		Short: "Show the cache tier: hit rates per table and tier, each process's hot-key cache, Redis health and fills, the updater's watermarks, lag and bootstraps",
		Long: "Show the cache section of GET /_cluster: per cacheable table its settings, reads and hit rates (overall and per tier) and bootstrap progress; " +
			"per process (the nodes that run a read side, and the router asked, if it runs one) its hot-key cache, its judgement of each Redis endpoint and its fills; " +
			"per partition of each datastream with a Redis sink its owner, watermark, lag and last bootstraps.",
		Args: cobra.NoArgs,
		RunE: runE(func(cmd *cobra.Command, _ []string) error {
			c, err := f.client().CacheStatus(cmd.Context())
			if err != nil {
				return err
			}
			return printOutput(cmd, c, func(out io.Writer) error { return cacheTables(out, c, time.Now()) })
		}),
	}
}

// cacheTables prints the cache section as three tables.
func cacheTables(out io.Writer, c client.CacheInfo, now time.Time) error {
	w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "TABLE\tTTL\tBOOTSTRAP EVERY\tGENERATION\tREADS\tHIT RATE\tLOCAL HITS\tREDIS HITS\tBOOTSTRAPPED")
	for _, t := range c.Tables {
		var reads int64
		for _, n := range t.Answered {
			reads += n
		}
		fmt.Fprintf(w, "%s.%s\t%s\t%s\t%d\t%d\t%s\t%s\t%s\t%s\n", t.Database, t.Table, t.TTL, t.BootstrapEvery, t.Generation, reads,
			percent(t.HitRate()), percent(t.Local.HitRate()), percent(t.Redis.HitRate()), percent(t.BootstrapProgress))
	}
	if len(c.Tables) == 0 {
		fmt.Fprintln(w, "(no cacheable table)")
	}
	if err := w.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(out)
	w = tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "PROCESS\tROLE\tLOCAL CACHE\tREDIS\tFILLS")
	for _, p := range c.Processes {
		local := "-"
		if p.Local != nil {
			local = fmt.Sprintf("%d entries, %s of %s", p.Local.Entries, humanize.Bytes(p.Local.Bytes), humanize.Bytes(p.Local.MaxBytes))
		}
		var redis []string
		for _, e := range p.Redis {
			state := "healthy"
			if !e.Healthy {
				state = "UNHEALTHY"
			}
			redis = append(redis, e.Addr+" "+state)
		}
		var fills []string
		for _, tier := range slices.Sorted(maps.Keys(p.Fills)) {
			var rs []string
			for _, r := range slices.Sorted(maps.Keys(p.Fills[tier])) {
				rs = append(rs, fmt.Sprintf("%s %d", r, p.Fills[tier][r]))
			}
			fills = append(fills, tier+": "+strings.Join(rs, ", "))
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\n", p.Process, p.Role, local, dash(strings.Join(redis, ", ")), dash(strings.Join(fills, "; ")))
	}
	if len(c.Processes) == 0 {
		fmt.Fprintln(w, "(no process runs a read side)")
	}
	if err := w.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(out)
	w = tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "DATASTREAM\tPARTITION\tSTATE\tOWNER\tWATERMARK\tLAG\tLAG TXNS\tBOOTSTRAP")
	for _, u := range c.Updaters {
		wm, lag := "-", "-"
		if u.Watermark != nil {
			wm = u.Watermark.Local().Format(time.TimeOnly + ".000")
		}
		if u.LagSeconds != nil {
			lag = time.Duration(*u.LagSeconds * float64(time.Second)).Round(time.Millisecond).String()
		}
		var boot []string
		if u.Bootstrapping != "" {
			boot = append(boot, fmt.Sprintf("%s: %d documents so far", u.Bootstrapping, u.Documents))
		}
		for _, t := range slices.Sorted(maps.Keys(u.Bootstrapped)) {
			boot = append(boot, fmt.Sprintf("%s %s ago", t, now.Sub(u.Bootstrapped[t]).Round(time.Second)))
		}
		fmt.Fprintf(w, "%s\t%d\t%s\t%s\t%s\t%s\t%d\t%s\n", u.Datastream, u.Partition, u.State, dash(u.Owner), wm, lag, u.LagTransactions, dash(strings.Join(boot, ", ")))
	}
	if len(c.Updaters) == 0 {
		fmt.Fprintln(w, "(no datastream with a Redis sink)")
	}
	return w.Flush()
}

// percent prints a share as a percentage.
func percent(f float64) string { return fmt.Sprintf("%.1f%%", 100*f) }
