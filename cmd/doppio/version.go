package main

import (
	"encoding/json"
	"fmt"
	"io"

	"github.com/doppio-db/doppio/internal/buildinfo"
	"github.com/spf13/cobra"
)

func versionCommand() *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "version",
		Short: "Print this binary's version, commit, build date, Go version and store format",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if asJSON {
				return json.NewEncoder(cmd.OutOrStdout()).Encode(buildinfo.Get())
			}
			return printOutput(cmd, buildinfo.Get(), func(w io.Writer) error { printVersion(w); return nil })
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the same as one JSON object")
	return cmd
}

// printVersion is the text of `doppio version` and `doppio --version`.
func printVersion(w io.Writer) {
	in := buildinfo.Get()
	fmt.Fprintf(w, "doppio %s\ncommit:       %s\nbuilt:        %s\ngo:           %s\nstore format: %d\n",
		in.Version, orUnknown(in.Commit), orUnknown(in.Date), in.GoVersion, in.StoreFormat)
}

func orUnknown(s string) string {
	if s == "" {
		return "unknown"
	}
	return s
}
