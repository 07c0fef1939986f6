// Command doppio is Doppio's single binary: `doppio dev` runs a node with an
// embedded etcd for local use; the other subcommands are a command-line
// client of the REST API.
package main

import (
	"fmt"
	"os"
	"strings"

	"github.com/doppio-db/doppio/internal/buildinfo"

	"github.com/spf13/cobra"
)

func main() {
	if err := newRoot().Execute(); err != nil {
		fmt.Fprintln(os.Stderr, "doppio:", err)
		os.Exit(exitCode(err))
	}
}

// newRoot is the doppio command with every subcommand.
func newRoot() *cobra.Command {
	root := &cobra.Command{
		Use:           "doppio",
		Short:         "Doppio: a distributed, schema-aware document store",
		SilenceUsage:  true,
		SilenceErrors: true,
		// Version makes cobra add --version; the template prints what
		// `doppio version` does.
		Version: buildinfo.Get().Version,
	}
	var version strings.Builder
	printVersion(&version)
	root.SetVersionTemplate(version.String())
	f := addClientCommands(root)
	root.AddCommand(withPrintConfig(f, devCommand(f)), withPrintConfig(f, startCommand(f)), withPrintConfig(f, routerCommand(f)), certCommand(f))
	root.AddCommand(changesCommand(f), bulkCommand(f), derivedCommand(f), exportCommand(f))
	root.AddCommand(backupCommands(f)...)
	root.AddCommand(versionCommand())
	addCompletions(root, f)
	markUsageErrors(root)
	return root
}
