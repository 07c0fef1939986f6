package main

import (
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

//go:generate go test -run ^TestCLIReferenceIsUpToDate$ -update .

// referencePath is the CLI reference, relative to this package.
const referencePath = "../../docs/reference/cli.md"

// writeReference writes the Markdown reference of every command and flag
// under root: what docs/reference/cli.md holds.
func writeReference(w io.Writer, root *cobra.Command) {
	fmt.Fprintf(w, `# doppio command reference

Generated from the command definitions by `+"`go generate ./cmd/doppio`"+`; do not
edit (TestCLIReferenceIsUpToDate fails when this page is out of date).

Every flag of every command can also be set by an environment variable,
`+"`DOPPIO_`"+` and the flag's name in capitals with dashes as underscores
(`+"`--max-document-bytes`"+`: `+"`DOPPIO_MAX_DOCUMENT_BYTES`"+`), and by a key of the
YAML file that `+"`--config`"+` (or `+"`DOPPIO_CONFIG`"+`) names, the flag's name
without dashes in front (lists for flags taking several values):

`+"```yaml"+`
data: /var/lib/doppio
etcd: [https://10.0.0.9:2379, https://10.0.0.10:2379]
log-format: json
`+"```"+`

One precedence rule: a flag given on the command line wins over its
environment variable, which wins over the file, which wins over the
default. A file key that names no flag of any command is an error; a key
the running command does not have is ignored, so one file can serve a
node and the CLI. `+"`doppio start --print-config`"+` (also dev and router) prints
the effective configuration as such a file, each key marked with where
its value came from. Request bodies (`+"`-d`"+`, `+"`-f`"+` of the document
commands) are arguments, not configuration: no variable or key sets them.

`)
	fmt.Fprint(w, "## Exit codes\n\nA script can tell these apart; the message on standard error says more.\n\n| Code | Meaning |\n|---|---|\n")
	for _, e := range exitCodes {
		fmt.Fprintf(w, "| %d | %s |\n", e.code, e.what)
	}
	fmt.Fprint(w, "\nCommands that print data take `-o json`, `-o yaml` or `-o table` (or `DOPPIO_OUTPUT`): a table by default where a person reads it (cluster status, datastream list and status, user list, schema get of every database), JSON where a program does (documents, schemas, transactions). `--json` stays an alias of `-o json` where it was. Names of databases, tables, nodes and datastreams complete from the server (`doppio completion bash|zsh|fish|powershell` prints the shell's script).\n\n")
	fmt.Fprint(w, "## Global flags\n\nEvery command takes these.\n\n")
	flagTable(w, root.PersistentFlags())
	var walk func(*cobra.Command)
	walk = func(c *cobra.Command) {
		if c != root {
			fmt.Fprintf(w, "## %s\n\n%s.\n\n", c.CommandPath(), strings.TrimSuffix(c.Short, "."))
			if c.Runnable() {
				fmt.Fprintf(w, "```\n%s\n```\n\n", c.UseLine())
			}
			if c.Long != "" {
				fmt.Fprintf(w, "```text\n%s\n```\n\n", strings.TrimSpace(c.Long))
			}
			if c.HasAvailableLocalFlags() {
				flagTable(w, c.LocalNonPersistentFlags())
			}
		}
		for _, sub := range c.Commands() {
			if sub.IsAvailableCommand() {
				walk(sub)
			}
		}
	}
	walk(root)
}

// flagTable writes a flag set as a Markdown table: flag and value name,
// environment variable, default, help line.
func flagTable(w io.Writer, fs *pflag.FlagSet) {
	fmt.Fprintln(w, "| Flag | Environment | Default | Description |\n|---|---|---|---|")
	fs.VisitAll(func(fl *pflag.Flag) {
		if fl.Hidden || fl.Name == "help" {
			return
		}
		name, usage := pflag.UnquoteUsage(fl)
		flag := "--" + fl.Name
		if fl.Shorthand != "" {
			flag = "-" + fl.Shorthand + ", " + flag
		}
		if name != "" {
			flag += " " + name
		}
		env := "—"
		if isConfig(fl) {
			env = "`" + envName(fl.Name) + "`"
		}
		def := "—"
		if fl.DefValue != "" && fl.DefValue != "[]" && !(fl.Value.Type() == "bool" && fl.DefValue == "false") {
			def = "`" + fl.DefValue + "`"
		}
		usage = strings.NewReplacer("|", `\|`, "<", "&lt;", ">", "&gt;").Replace(usage)
		fmt.Fprintf(w, "| `%s` | %s | %s | %s |\n", flag, env, def, usage)
	})
	fmt.Fprintln(w)
}
