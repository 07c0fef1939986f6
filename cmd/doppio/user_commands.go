package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"text/tabwriter"

	"github.com/doppio-db/doppio/client"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// authFlags are the credentials every client subcommand sends: a session
// token, or a user and password (HTTP Basic).
type authFlags struct {
	user, password, token string
}

func (a *authFlags) register(pf *pflag.FlagSet) {
	pf.StringVar(&a.user, "user", "", "`USER` to authenticate as: with --password by password, else by its client certificate client.USER.crt in --certs-dir (default root)")
	pf.StringVar(&a.password, "password", "", "the user's password")
	pf.StringVar(&a.token, "token", "", "session token from doppio login")
}

// options are the client options the credentials make: a token wins over
// a user and password.
func (a authFlags) options() []client.Option {
	switch {
	case a.token != "":
		return []client.Option{client.WithToken(a.token)}
	case a.user != "" && a.password != "":
		return []client.Option{client.WithBasicAuth(a.user, a.password)}
	}
	return nil
}

// withHeader sets one header on every request it sends.
type withHeader struct {
	base        http.RoundTripper
	name, value string
}

func (t withHeader) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set(t.name, t.value)
	return t.base.RoundTrip(r)
}

func userCommand(f *clientFlags) *cobra.Command {
	cmd := &cobra.Command{
		Use:     "user",
		Aliases: []string{"users"},
		Short:   "Create, list and delete users, set passwords, grant and revoke roles",
		Long: "Roles: read, readWrite and dbAdmin are granted on one database (each includes the ones before);\n" +
			"clusterAdmin, userAdmin and root are cluster-wide. These commands need userAdmin (or root).",
	}
	cmd.AddCommand(userCreateCommand(f, "create"), userCreateCommand(f, "passwd"), userGrantCommand(f, "grant"), userGrantCommand(f, "revoke"),
		userListCommand(f), userGetCommand(f), userDeleteCommand(f))
	return cmd
}

// newPassword is where a command reads the password it sets: a flag, or
// the first line of stdin; never a prompt, so scripts can drive it.
type newPassword struct {
	value string
	stdin bool
}

func (p *newPassword) register(fl *pflag.FlagSet) {
	fl.StringVar(&p.value, "new-password", "", "the password to set (visible to other local users in the process list: prefer --stdin)")
	fl.BoolVar(&p.stdin, "stdin", false, "read the password to set from the first line of stdin")
}

func (p *newPassword) read(cmd *cobra.Command) (string, error) {
	if p.stdin == (p.value != "") {
		if p.stdin {
			return "", errors.New("give the password by --new-password or --stdin, not both")
		}
		return "", nil
	}
	if !p.stdin {
		return p.value, nil
	}
	line, err := bufio.NewReader(cmd.InOrStdin()).ReadString('\n')
	if err != nil && !errors.Is(err, io.EOF) {
		return "", err
	}
	line = strings.TrimRight(line, "\r\n")
	if line == "" {
		return "", errors.New("--stdin: no password on stdin")
	}
	return line, nil
}

func userCreateCommand(f *clientFlags, verb string) *cobra.Command {
	var pw newPassword
	cmd := &cobra.Command{
		Use:   verb + " NAME [--new-password PW | --stdin]",
		Short: "Create a user (without a password: client certificate only)",
		Args:  cobra.ExactArgs(1),
		RunE: runE(func(cmd *cobra.Command, args []string) error {
			p, err := pw.read(cmd)
			if err != nil {
				return err
			}
			if verb == "passwd" && p == "" {
				return errors.New("passwd: give the new password by --new-password or --stdin")
			}
			u, created, err := f.client().PutUser(cmd.Context(), args[0], p)
			if err != nil {
				return err
			}
			switch {
			case verb == "create" && !created:
				fmt.Fprintf(cmd.ErrOrStderr(), "user %s: already existed", u.Name)
				if p != "" {
					fmt.Fprint(cmd.ErrOrStderr(), "; password changed")
				}
				fmt.Fprintln(cmd.ErrOrStderr())
			case verb == "passwd" && created:
				fmt.Fprintf(cmd.ErrOrStderr(), "user %s: created with this password\n", u.Name)
			case verb == "passwd":
				fmt.Fprintf(cmd.ErrOrStderr(), "user %s: password changed; its sessions are ended\n", u.Name)
			default:
				fmt.Fprintf(cmd.ErrOrStderr(), "user %s: created\n", u.Name)
			}
			return printJSON(cmd, u)
		}),
	}
	if verb == "passwd" {
		cmd.Short = "Set a user's password (its session tokens are refused from then on)"
	}
	pw.register(cmd.Flags())
	return cmd
}

func userGrantCommand(f *clientFlags, verb string) *cobra.Command {
	cmd := &cobra.Command{
		Use:   verb + " NAME ROLE [DB]",
		Short: "Grant a role (DB for read, readWrite, dbAdmin)",
		Args:  cobra.RangeArgs(2, 3),
		RunE: runE(func(cmd *cobra.Command, args []string) error {
			g := client.Grant{Role: args[1]}
			if len(args) == 3 {
				g.DB = args[2]
			}
			c := f.client()
			if verb == "revoke" {
				if err := c.RevokeRole(cmd.Context(), args[0], g); err != nil {
					return err
				}
				fmt.Fprintf(cmd.ErrOrStderr(), "user %s: %s revoked\n", args[0], grantText(g))
				return nil
			}
			u, added, err := c.GrantRole(cmd.Context(), args[0], g)
			if err != nil {
				return err
			}
			if added {
				fmt.Fprintf(cmd.ErrOrStderr(), "user %s: %s granted\n", u.Name, grantText(g))
			} else {
				fmt.Fprintf(cmd.ErrOrStderr(), "user %s: already holds %s\n", u.Name, grantText(g))
			}
			return printJSON(cmd, u)
		}),
	}
	if verb == "revoke" {
		cmd.Short = "Revoke a role (DB for read, readWrite, dbAdmin)"
	}
	return cmd
}

func grantText(g client.Grant) string {
	if g.DB == "" {
		return g.Role
	}
	return g.Role + " on " + g.DB
}

func userListCommand(f *clientFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "list",
		Short: "List the users and their roles",
		Args:  cobra.NoArgs,
		RunE: runE(func(cmd *cobra.Command, args []string) error {
			us, err := f.client().ListUsers(cmd.Context())
			if err != nil {
				return err
			}
			return printOutput(cmd, us, func(out io.Writer) error {
				w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
				fmt.Fprintln(w, "NAME\tPASSWORD\tROLES")
				for _, u := range us {
					roles := make([]string, len(u.Grants))
					for i, g := range u.Grants {
						roles[i] = grantText(g)
					}
					pw := "no"
					if u.HasPassword {
						pw = "yes"
					}
					fmt.Fprintf(w, "%s\t%s\t%s\n", u.Name, pw, strings.Join(roles, ", "))
				}
				return w.Flush()
			})
		}),
	}
}

func userGetCommand(f *clientFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "get NAME",
		Short: "Show a user and its roles",
		Args:  cobra.ExactArgs(1),
		RunE: runE(func(cmd *cobra.Command, args []string) error {
			u, err := f.client().GetUser(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			return printJSON(cmd, u)
		}),
	}
}

func userDeleteCommand(f *clientFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "delete NAME",
		Short: "Delete a user; its session tokens are refused from then on",
		Args:  cobra.ExactArgs(1),
		RunE: runE(func(cmd *cobra.Command, args []string) error {
			if err := f.client().DeleteUser(cmd.Context(), args[0]); err != nil {
				return err
			}
			fmt.Fprintf(cmd.ErrOrStderr(), "user %s: deleted\n", args[0])
			return nil
		}),
	}
}

func loginCommand(f *clientFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "login",
		Short: "Exchange --user and --password for a session token, printed for DOPPIO_TOKEN",
		Long: "Prints the token alone on stdout, e.g.\n" +
			"  export DOPPIO_TOKEN=$(doppio login --user alice --password …)\n" +
			"and its expiry on stderr.",
		Args: cobra.NoArgs,
		RunE: runE(func(cmd *cobra.Command, args []string) error {
			if f.auth.user == "" || f.auth.password == "" {
				return errors.New("login: give --user and --password (or DOPPIO_USER and DOPPIO_PASSWORD)")
			}
			s, err := client.New(f.server, f.transport()...).Login(cmd.Context(), f.auth.user, f.auth.password)
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.ErrOrStderr(), "logged in as %s until %s\n", f.auth.user, s.Expires.Local().Format("2006-01-02 15:04:05 MST"))
			_, err = fmt.Fprintln(cmd.OutOrStdout(), s.Token)
			return err
		}),
	}
}
