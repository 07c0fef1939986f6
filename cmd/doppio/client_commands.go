package main

import "github.com/spf13/cobra"

// addClientCommands registers the client subcommands (schema, get, put,
// patch, delete, txn). PLACEHOLDER: being written.
func addClientCommands(root *cobra.Command) {}
