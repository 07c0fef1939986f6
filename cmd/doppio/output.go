package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"sigs.k8s.io/yaml"
)

// outputFlag is the global -o: how a command prints what it read.
const outputFlag = "output"

// The -o formats; "" lets each command print its default (a table where
// a person reads it, JSON where a program does).
var outputFormats = []string{"json", "yaml", "table"}

func registerOutputFlag(pf *pflag.FlagSet) {
	pf.StringP(outputFlag, "o", "", "print data as `FORMAT`: json, yaml or table (default: a table for cluster, status and list commands, JSON for documents and schemas)")
}

// outputFormat is cmd's -o, or def when none was given.
func outputFormat(cmd *cobra.Command, def string) (string, error) {
	o, err := cmd.Flags().GetString(outputFlag)
	if err != nil || o == "" {
		return def, nil // a command outside the root has no -o
	}
	if !slices.Contains(outputFormats, o) {
		return "", usageError{fmt.Errorf("-o %q: want one of %s", o, strings.Join(outputFormats, ", "))}
	}
	return o, nil
}

// printJSON prints v as indented JSON (re-indenting raw documents), or in
// the format -o names.
func printJSON(cmd *cobra.Command, v any) error {
	return printOutput(cmd, v, nil)
}

// printOutput prints v in the -o format; table writes the command's own
// table, the default when it is not nil (JSON is, otherwise).
func printOutput(cmd *cobra.Command, v any, table func(w io.Writer) error) error {
	def := "json"
	if table != nil {
		def = "table"
	}
	format, err := outputFormat(cmd, def)
	if err != nil {
		return err
	}
	out := cmd.OutOrStdout()
	switch format {
	case "table":
		if table != nil {
			return table(out)
		}
		return genericTable(out, v)
	case "yaml":
		js, err := marshalJSON(v)
		if err != nil {
			return err
		}
		y, err := yaml.JSONToYAML(js)
		if err != nil {
			return err
		}
		_, err = out.Write(y)
		return err
	}
	js, err := marshalJSON(v)
	if err != nil {
		return err
	}
	var buf bytes.Buffer
	if err := json.Indent(&buf, js, "", "  "); err != nil {
		return err
	}
	buf.WriteByte('\n')
	_, err = out.Write(buf.Bytes())
	return err
}

// marshalJSON encodes v without HTML escaping; raw documents pass as
// they are.
func marshalJSON(v any) ([]byte, error) {
	if raw, ok := v.(json.RawMessage); ok {
		return raw, nil
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSpace(buf.Bytes()), nil
}

// genericTable prints any JSON value for a person: a list of objects (or
// an object holding just one such list, as a page of documents) as rows
// under the union of their fields, another object as FIELD VALUE rows.
func genericTable(out io.Writer, v any) error {
	js, err := marshalJSON(v)
	if err != nil {
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(js))
	dec.UseNumber()
	var val any
	if err := dec.Decode(&val); err != nil {
		return err
	}
	if obj, ok := val.(map[string]any); ok && len(obj) == 1 {
		for _, inner := range obj {
			if _, isList := inner.([]any); isList {
				val = inner
			}
		}
	}
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	switch val := val.(type) {
	case []any:
		var cols []string
		for _, row := range val {
			if obj, ok := row.(map[string]any); ok {
				for _, k := range sortedFields(obj) {
					if !slices.Contains(cols, k) {
						cols = append(cols, k)
					}
				}
			}
		}
		if len(cols) == 0 {
			for _, row := range val {
				fmt.Fprintln(tw, cell(row))
			}
			break
		}
		fmt.Fprintln(tw, strings.ToUpper(strings.Join(cols, "\t")))
		for _, row := range val {
			obj, _ := row.(map[string]any)
			cells := make([]string, len(cols))
			for i, c := range cols {
				cells[i] = cell(obj[c])
			}
			fmt.Fprintln(tw, strings.Join(cells, "\t"))
		}
	case map[string]any:
		fmt.Fprintln(tw, "FIELD\tVALUE")
		for _, k := range sortedFields(val) {
			fmt.Fprintf(tw, "%s\t%s\n", k, cell(val[k]))
		}
	default:
		fmt.Fprintln(tw, cell(val))
	}
	return tw.Flush()
}

func sortedFields(obj map[string]any) []string {
	ks := make([]string, 0, len(obj))
	for k := range obj {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}

// cell is a value as one table cell: strings and numbers bare, nothing
// as "-", anything else as compact JSON.
func cell(v any) string {
	switch v := v.(type) {
	case nil:
		return "-"
	case string:
		return v
	case json.Number:
		return v.String()
	case bool:
		return fmt.Sprint(v)
	}
	b, _ := marshalJSON(v)
	return string(b)
}
