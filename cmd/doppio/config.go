package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"sigs.k8s.io/yaml"
)

// The one precedence rule for every flag of every command: a flag given
// on the command line, else its DOPPIO_<FLAG> environment variable, else
// its key in the --config file, else its default.

// notConfig marks the flags that are a command's arguments rather than
// configuration (a request body, --help): neither the environment nor the
// file sets them, so DOPPIO_DATA (a node's data directory) cannot turn
// into every `doppio put`'s body.
const notConfig = "doppio/not-config"

// configFlag names the persistent flag holding the configuration file.
const configFlag = "config"

// markNotConfig excludes the named flags of cmd from the environment and
// the file.
func markNotConfig(cmd *cobra.Command, names ...string) {
	for _, n := range names {
		_ = cmd.Flags().SetAnnotation(n, notConfig, []string{"true"})
	}
}

// isConfig reports whether fl can come from the environment or a file.
func isConfig(fl *pflag.Flag) bool {
	switch fl.Name {
	case "help", "version", configFlag, printConfigFlag:
		return false
	}
	_, arg := fl.Annotations[notConfig]
	return !arg
}

// envName is the environment variable of a flag: DOPPIO_ and the name in
// capitals, dashes as underscores (--max-document-bytes:
// DOPPIO_MAX_DOCUMENT_BYTES).
func envName(flag string) string {
	return "DOPPIO_" + strings.ToUpper(strings.ReplaceAll(flag, "-", "_"))
}

// configSource is where a flag's effective value came from.
type configSource string

const (
	fromFlag    configSource = "flag"
	fromEnv     configSource = "environment"
	fromFile    configSource = "file"
	fromDefault configSource = "default"
)

// applyConfig sets each configuration flag of cmd that the command line
// left alone from the environment, then from the configuration file
// (--config, or DOPPIO_CONFIG), and returns where each flag's value came
// from. A file key that names no flag of any command is an error, so a
// typo does not go unnoticed.
func applyConfig(cmd *cobra.Command) (map[string]configSource, error) {
	path, err := cmd.Flags().GetString(configFlag)
	if err != nil {
		return nil, err
	}
	if path == "" {
		path = os.Getenv(envName(configFlag))
	}
	var file map[string]string
	if path != "" {
		if file, err = readConfigFile(path, cmd.Root()); err != nil {
			return nil, err
		}
	}
	sources := map[string]configSource{}
	var errs []error
	cmd.Flags().VisitAll(func(fl *pflag.Flag) {
		if !isConfig(fl) {
			return
		}
		if fl.Changed {
			sources[fl.Name] = fromFlag
			return
		}
		sources[fl.Name] = fromDefault
		if v, ok := os.LookupEnv(envName(fl.Name)); ok {
			sources[fl.Name] = fromEnv
			if err := setFlag(fl, v); err != nil {
				errs = append(errs, fmt.Errorf("%s=%q: %w", envName(fl.Name), v, badValue(fl)))
			}
			return
		}
		if v, ok := file[fl.Name]; ok {
			sources[fl.Name] = fromFile
			if err := setFlag(fl, v); err != nil {
				errs = append(errs, fmt.Errorf("%s: %s: %q: %w", path, fl.Name, v, badValue(fl)))
			}
		}
	})
	return sources, errors.Join(errs...)
}

// badValue says what fl accepts, in place of pflag's parser errors.
func badValue(fl *pflag.Flag) error {
	kind := fl.Value.Type()
	if elem, ok := strings.CutSuffix(kind, "Slice"); ok {
		kind = elem + " list"
	}
	return fmt.Errorf("not a valid %s for --%s", kind, fl.Name)
}

// setFlag sets fl as if given on the command line; a list replaces the
// default rather than appending to it.
func setFlag(fl *pflag.Flag, v string) error {
	if sv, ok := fl.Value.(pflag.SliceValue); ok {
		var items []string
		if v != "" {
			items = strings.Split(v, ",")
		}
		if err := sv.Replace(items); err != nil {
			return err
		}
	} else if err := fl.Value.Set(v); err != nil {
		return err
	}
	fl.Changed = true
	return nil
}

// readConfigFile reads a YAML configuration file: a mapping from flag
// names (without dashes) to values; lists for flags that take several.
func readConfigFile(path string, root *cobra.Command) (map[string]string, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("--config: %w", err)
	}
	js, err := yaml.YAMLToJSON(raw)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	dec := json.NewDecoder(bytes.NewReader(js))
	dec.UseNumber()
	var doc map[string]any
	if err := dec.Decode(&doc); err != nil && !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("%s: want a mapping of flag names to values: %w", path, err)
	}
	known := configFlagNames(root)
	out := map[string]string{}
	for k, v := range doc {
		if !known[k] {
			return nil, fmt.Errorf("%s: %q is not a flag of any doppio command (see docs/reference/cli.md)", path, k)
		}
		s, err := configValue(v)
		if err != nil {
			return nil, fmt.Errorf("%s: %s: %w", path, k, err)
		}
		out[k] = s
	}
	return out, nil
}

// configValue is a file value in the command line's spelling: lists
// joined by commas.
func configValue(v any) (string, error) {
	switch v := v.(type) {
	case string:
		return v, nil
	case json.Number:
		return v.String(), nil
	case bool:
		return fmt.Sprint(v), nil
	case nil:
		return "", nil
	case []any:
		items := make([]string, len(v))
		for i, e := range v {
			s, err := configValue(e)
			if err != nil {
				return "", err
			}
			if _, nested := e.([]any); nested || strings.Contains(s, ",") {
				return "", fmt.Errorf("list item %q: want a plain value without commas", s)
			}
			items[i] = s
		}
		return strings.Join(items, ","), nil
	}
	return "", fmt.Errorf("want a value or a list of values, not a mapping")
}

// configFlagNames are the names of every configuration flag of every
// command under root.
func configFlagNames(root *cobra.Command) map[string]bool {
	names := map[string]bool{}
	var walk func(*cobra.Command)
	walk = func(c *cobra.Command) {
		for _, fs := range []*pflag.FlagSet{c.LocalFlags(), c.InheritedFlags()} {
			fs.VisitAll(func(fl *pflag.Flag) {
				if isConfig(fl) {
					names[fl.Name] = true
				}
			})
		}
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(root)
	return names
}

// printConfigFlag makes a server command print its effective
// configuration instead of running.
const printConfigFlag = "print-config"

func addPrintConfig(cmd *cobra.Command) {
	cmd.Flags().Bool(printConfigFlag, false, "print the effective configuration (flags, DOPPIO_* variables, --config file, defaults) as a configuration file, and exit")
}

// clientOnlyFlags are the persistent flags a server command ignores
// (the CLI's server and credentials): --print-config leaves them out.
var clientOnlyFlags = []string{"server", "retry", "user", "password", "token"}

// printConfig writes cmd's effective configuration as YAML that --config
// reads back, each key followed by where its value came from.
func printConfig(w io.Writer, cmd *cobra.Command, sources map[string]configSource) error {
	var names []string
	for n := range sources {
		if !slices.Contains(clientOnlyFlags, n) {
			names = append(names, n)
		}
	}
	slices.Sort(names)
	for _, n := range names {
		fl := cmd.Flags().Lookup(n)
		var v any = fl.Value.String()
		switch {
		case fl.Value.Type() == "bool":
			v = fl.Value.String() == "true"
		case strings.HasSuffix(fl.Value.Type(), "Slice"):
			sv := fl.Value.(pflag.SliceValue).GetSlice()
			if sv == nil {
				sv = []string{}
			}
			v = sv
		case strings.HasPrefix(fl.Value.Type(), "int") || strings.HasPrefix(fl.Value.Type(), "uint"):
			v = json.Number(fl.Value.String())
		}
		b, err := yaml.Marshal(map[string]any{n: v})
		if err != nil {
			return err
		}
		first, rest, _ := strings.Cut(string(b), "\n")
		fmt.Fprintf(w, "%s  # %s\n%s", first, sources[n], rest)
	}
	return nil
}

// withPrintConfig gives a server command --print-config: print the
// effective configuration instead of running.
func withPrintConfig(f *clientFlags, cmd *cobra.Command) *cobra.Command {
	addPrintConfig(cmd)
	run := cmd.RunE
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		if p, _ := cmd.Flags().GetBool(printConfigFlag); p {
			return printConfig(cmd.OutOrStdout(), cmd, f.sources)
		}
		return run(cmd, args)
	}
	return cmd
}
