package main

import (
	"context"
	"strings"
	"time"

	"github.com/doppio-db/doppio/client"
	"github.com/spf13/cobra"
)

// completeFunc is a cobra ValidArgsFunction.
type completeFunc = func(cmd *cobra.Command, args []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective)

// completionTimeout bounds the server's answer: a shell waits on it.
const completionTimeout = 3 * time.Second

// completionClient readies f as a command's PersistentPreRunE would, which
// cobra does not run for completions, so DOPPIO_* and --config count.
func (f *clientFlags) completionClient(cmd *cobra.Command) (context.Context, context.CancelFunc, bool) {
	if _, err := applyConfig(cmd); err != nil {
		return nil, nil, false
	}
	if err := f.setupTLS(cmd); err != nil {
		return nil, nil, false
	}
	ctx, cancel := context.WithTimeout(context.Background(), completionTimeout)
	return ctx, cancel, true
}

// quickClient is the flags' client without retries: a completion
// answers at once or not at all.
func (f *clientFlags) quickClient() *client.Client {
	return f.client().At(f.server, client.WithRetry(0))
}

// addCompletions makes the commands that name databases, tables, nodes
// and datastreams complete those names from the server.
func addCompletions(root *cobra.Command, f *clientFlags) {
	set := func(fn completeFunc, paths ...string) {
		for _, p := range paths {
			if c, _, err := root.Find(strings.Fields(p)); err == nil && c != root {
				c.ValidArgsFunction = fn
			}
		}
	}
	set(completePaths(f, 1), "check", "changes tail", "txn", "backup")
	set(completePaths(f, 2), "schema get", "schema put", "schema status")
	set(completePaths(f, 3), "get", "put", "patch", "insert", "delete")
	set(completeNames(f, nodeNames), "cluster add", "cluster drain", "cluster remove")
	set(completeFirst(completeNames(f, datastreamNames)), "datastream get", "datastream delete", "datastream status", "datastream pause", "datastream resume")
}

// completePaths completes the first argument as "DB", "DB/Table" (depth
// 2) or "DB/Table/" to go on with key parts (depth 3).
func completePaths(f *clientFlags, depth int) completeFunc {
	return func(cmd *cobra.Command, args []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
		if len(args) > 0 {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		ctx, cancel, ok := f.completionClient(cmd)
		if !ok {
			return nil, cobra.ShellCompDirectiveError
		}
		defer cancel()
		dbs, err := f.quickClient().ListDatabases(ctx)
		if err != nil {
			return nil, cobra.ShellCompDirectiveError
		}
		db, _, inTable := strings.Cut(toComplete, "/")
		var out []cobra.Completion
		for _, d := range dbs {
			switch {
			case !inTable && depth > 1:
				out = append(out, d.Name+"/")
			case !inTable:
				out = append(out, d.Name)
			case d.Name == db:
				for _, t := range d.Tables {
					if depth > 2 {
						out = append(out, d.Name+"/"+t.Name+"/")
					} else {
						out = append(out, d.Name+"/"+t.Name)
					}
				}
			}
		}
		dir := cobra.ShellCompDirectiveNoFileComp
		if depth > 1 && (!inTable || depth > 2) {
			dir |= cobra.ShellCompDirectiveNoSpace // more follows the slash
		}
		return out, dir
	}
}

// completeNames completes every argument from the names list returns.
func completeNames(f *clientFlags, list func(ctx context.Context, f *clientFlags) ([]string, error)) completeFunc {
	return func(cmd *cobra.Command, args []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
		ctx, cancel, ok := f.completionClient(cmd)
		if !ok {
			return nil, cobra.ShellCompDirectiveError
		}
		defer cancel()
		names, err := list(ctx, f)
		if err != nil {
			return nil, cobra.ShellCompDirectiveError
		}
		return names, cobra.ShellCompDirectiveNoFileComp
	}
}

// nodeNames lists the cluster's nodes.
func nodeNames(ctx context.Context, f *clientFlags) ([]string, error) {
	info, err := f.quickClient().Cluster(ctx)
	var out []string
	for _, n := range info.Nodes {
		out = append(out, n.ID)
	}
	return out, err
}

// datastreamNames lists the datastreams.
func datastreamNames(ctx context.Context, f *clientFlags) ([]string, error) {
	ds, err := f.quickClient().ListDatastreams(ctx)
	var out []string
	for _, d := range ds {
		out = append(out, d.Name)
	}
	return out, err
}

// completeFirst completes only the first argument with fn.
func completeFirst(fn completeFunc) completeFunc {
	return func(cmd *cobra.Command, args []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
		if len(args) > 0 {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		return fn(cmd, args, toComplete)
	}
}
