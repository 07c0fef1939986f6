package main

import (
	"fmt"

	"github.com/doppio-db/doppio/client"
	"github.com/spf13/cobra"
)

func quotaCommand(f *clientFlags) *cobra.Command {
	cmd := &cobra.Command{
		Use:     "quota",
		Aliases: []string{"quotas"},
		Short:   "Set, read and remove read and write capacity quotas of databases and users",
		Long: "A quota is capacity units per second, cluster-wide; 0 is unlimited. A read unit is\n" +
			"up to 4 KiB read (documents and index entries), a write unit up to 1 KiB written\n" +
			"(the document, its change-log image and its index entries). A database's quota\n" +
			"covers every request on it; a user's covers the user's requests on every database.",
	}
	cmd.AddCommand(quotaSetCommand(f), quotaGetCommand(f), quotaDeleteCommand(f), quotaListCommand(f))
	return cmd
}

// quotaScope reads the scope argument: database (db) or user.
func quotaScope(arg string) (client.QuotaScope, error) {
	switch arg {
	case "database", "db":
		return client.DatabaseQuota, nil
	case "user":
		return client.UserQuota, nil
	}
	return "", fmt.Errorf("%q is not a quota's scope: say database or user", arg)
}

func quotaSetCommand(f *clientFlags) *cobra.Command {
	var q client.Quota
	cmd := &cobra.Command{
		Use:   "set database|user NAME [--read N] [--write N]",
		Short: "Set the quota of a database or user (a unit not given is unlimited)",
		Args:  cobra.ExactArgs(2),
		RunE: runE(func(cmd *cobra.Command, args []string) error {
			scope, err := quotaScope(args[0])
			if err != nil {
				return err
			}
			if !cmd.Flags().Changed("read") && !cmd.Flags().Changed("write") {
				return fmt.Errorf("give --read, --write or both (units per second, 0 = unlimited)")
			}
			out, created, err := f.client().SetQuota(cmd.Context(), scope, args[1], q)
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.ErrOrStderr(), "quota of %s %s: %s\n", args[0], args[1], createdWord(created))
			return printJSON(cmd, out)
		}),
	}
	cmd.Flags().Int64Var(&q.ReadUnitsPerSecond, "read", 0, "read units per second (1 = up to 4 KiB read), 0 = unlimited")
	cmd.Flags().Int64Var(&q.WriteUnitsPerSecond, "write", 0, "write units per second (1 = up to 1 KiB written), 0 = unlimited")
	return cmd
}

func quotaGetCommand(f *clientFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "get database|user NAME",
		Short: "Print the quota of a database or user",
		Args:  cobra.ExactArgs(2),
		RunE: runE(func(cmd *cobra.Command, args []string) error {
			scope, err := quotaScope(args[0])
			if err != nil {
				return err
			}
			q, err := f.client().GetQuota(cmd.Context(), scope, args[1])
			if err != nil {
				return err
			}
			return printJSON(cmd, q)
		}),
	}
}

func quotaDeleteCommand(f *clientFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "delete database|user NAME",
		Short: "Remove the quota of a database or user: unlimited again",
		Args:  cobra.ExactArgs(2),
		RunE: runE(func(cmd *cobra.Command, args []string) error {
			scope, err := quotaScope(args[0])
			if err != nil {
				return err
			}
			if err := f.client().DeleteQuota(cmd.Context(), scope, args[1]); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "quota of %s %s deleted\n", args[0], args[1])
			return nil
		}),
	}
}

func quotaListCommand(f *clientFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "list",
		Short: "Print every quota set, of databases and of users",
		Args:  cobra.NoArgs,
		RunE: runE(func(cmd *cobra.Command, args []string) error {
			qs, err := f.client().ListQuotas(cmd.Context())
			if err != nil {
				return err
			}
			return printJSON(cmd, qs)
		}),
	}
}
