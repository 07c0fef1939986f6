package main

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/spf13/pflag"
)

// Every global flag can be given by its DOPPIO_<FLAG> variable, so a
// script sets them once for a session of commands.
func TestEveryGlobalFlagHasAnEnvironmentVariable(t *testing.T) {
	root := newRoot()
	values := map[string]string{}
	root.PersistentFlags().VisitAll(func(fl *pflag.Flag) {
		switch fl.Name {
		case "help", configFlag: // --config is DOPPIO_CONFIG, tested with the file
			return
		}
		if !isConfig(fl) {
			t.Errorf("global flag --%s is not read from %s", fl.Name, envName(fl.Name))
			return
		}
		v := "env-" + fl.Name
		switch fl.Value.Type() {
		case "duration":
			v = "7s"
		case "bool":
			v = "true"
		case "int":
			v = "7"
		}
		if fl.Name == outputFlag {
			v = "yaml"
		}
		values[fl.Name] = v
		t.Setenv(envName(fl.Name), v)
	})
	if len(values) < 5 {
		t.Fatalf("only %d global flags found: %v", len(values), values)
	}
	get, _, err := root.Find([]string{"get"})
	if err != nil {
		t.Fatal(err)
	}
	if err := get.ParseFlags(nil); err != nil {
		t.Fatal(err)
	}
	sources, err := applyConfig(get)
	if err != nil {
		t.Fatal(err)
	}
	for name, v := range values {
		if got := get.Flags().Lookup(name).Value.String(); sources[name] != fromEnv || got != v {
			t.Errorf("--%s = %q from %s; want %q from %s", name, got, sources[name], v, envName(name))
		}
	}
}

// TestCLIForScripts drives one dev node through the built binary: the
// documented exit codes, -o on data and tables, and completion of names
// from the server.
func TestCLIForScripts(t *testing.T) {
	c := startDev(t)
	c.ok("", "schema", "put", "Shop", "--partitions", "2", "--replicas", "1")
	c.ok(`{"key":[{"name":"sku","type":"string"}],"schema":{"type":"record","name":"Item","fields":[{"name":"price","type":"long"}]}}`, "schema", "put", "Shop/Item")
	c.ok(`{"price":1}`, "put", "Shop/Item/a")
	c.ok("", "datastream", "create", "feed", "--database", "Shop", "--brokers", "127.0.0.1:1", "--topics", "per-database")

	t.Run("exit codes", func(t *testing.T) {
		for _, tc := range []struct {
			code  int
			stdin string
			args  []string
		}{
			{exitOK, "", []string{"get", "Shop/Item/a"}},
			{exitUsage, "", []string{"no-such-command"}},
			{exitUsage, "", []string{"get", "--no-such-flag", "Shop/Item/a"}},
			{exitUsage, "", []string{"get"}},
			{exitUsage, "", []string{"get", "Shop"}},
			{exitUsage, "", []string{"-o", "xml", "get", "Shop/Item/a"}},
			{exitNotFound, "", []string{"get", "Shop/Item/zz"}},
			{exitNotFound, "", []string{"get", "Nope/Item/a"}},
			{exitNotFound, "", []string{"check", "Nope"}},
			{exitNotFound, "", []string{"datastream", "get", "nope"}},
			{exitConflict, `{"price":2}`, []string{"put", "Shop/Item/a", "--if-none-match", "*"}},
			{exitConflict, `{"price":2}`, []string{"put", "Shop/Item/a", "--if-match", `"0"`}},
			{exitUnavailable, "", []string{"--server", "http://127.0.0.1:1", "--retry", "0", "get", "Shop/Item/a"}},
			{exitUnavailable, "", []string{"--server", "http://127.0.0.1:1", "check", "Shop"}},
			{exitFailure, "{", []string{"put", "Shop/Item/b"}},
		} {
			_, errs, code := c.run(tc.stdin, tc.args...)
			if code != tc.code {
				t.Errorf("doppio %s: exit %d, want %d; stderr %q", strings.Join(tc.args, " "), code, tc.code, errs)
			}
		}
		if d, _, _ := c.run("", "get", "Shop/Item/a"); !strings.Contains(d, `"price": 1`) {
			t.Fatalf("a refused put changed the document: %s", d)
		}
	})

	t.Run("output formats", func(t *testing.T) {
		expect(t, "get (JSON by default)", c.ok("", "get", "Shop/Item/a"), "{\n  \"price\": 1\n}\n")
		expect(t, "get -o yaml", c.ok("", "-o", "yaml", "get", "Shop/Item/a"), "price: 1\n")
		expect(t, "get -o table", c.ok("", "get", "Shop/Item/a", "-o", "table"), "FIELD  VALUE\nprice  1\n")
		expect(t, "schema get -o json (list)", c.ok("", "schema", "get", "-o", "json"), `{
  "databases": [
    {
      "name": "Shop",
      "partitions": 2,
      "replicas": 1,
      "partitioner": "hash",
      "tables": [
        {
          "name": "Item",
          "key": [
            {
              "name": "sku",
              "type": "string"
            }
          ],
          "version": 1
        }
      ]
    }
  ]
}
`)
		if out := c.ok("", "schema", "get"); !strings.HasPrefix(out, "NAME  PARTITIONER  PARTITIONS  REPLICAS  TABLES\nShop  hash") {
			t.Errorf("schema get (a table by default):\n%s", out)
		}
		if out := c.ok("", "cluster", "status"); !strings.Contains(out, "NODE  STATE") {
			t.Errorf("cluster status (a table by default):\n%s", out)
		}
		var info struct {
			Nodes []struct {
				ID string `json:"id"`
			} `json:"nodes"`
		}
		raw, _, _ := c.run("", "cluster", "status", "-o", "json")
		if err := json.Unmarshal([]byte(raw), &info); err != nil || len(info.Nodes) != 1 || info.Nodes[0].ID != "dev" {
			t.Errorf("cluster status -o json: %+v, %v", info, err)
		}
		if out := c.ok("", "datastream", "list"); !strings.HasPrefix(out, "NAME  DATABASE  STATE") {
			t.Errorf("datastream list:\n%s", out)
		}
		yml := c.ok("", "datastream", "list", "-o", "yaml")
		if !strings.HasPrefix(yml, "- ") || !strings.Contains(yml, "\n  database: Shop\n") || !strings.Contains(yml, "\n  name: feed\n") {
			t.Errorf("datastream list -o yaml:\n%s", yml)
		}
		// --json stays the alias it was.
		if a, b := c.ok("", "datastream", "status", "feed", "--json"), c.ok("", "datastream", "status", "feed", "-o", "json"); !strings.HasPrefix(a, "{\n  \"name\": \"feed\"") || !strings.HasPrefix(b, "{\n  \"name\": \"feed\"") {
			t.Errorf("datastream status --json:\n%s\n-o json:\n%s", a, b)
		}
		c.env = []string{"DOPPIO_OUTPUT=yaml"}
		expect(t, "get with DOPPIO_OUTPUT=yaml", c.ok("", "get", "Shop/Item/a"), "price: 1\n")
		c.env = nil
	})

	t.Run("completion", func(t *testing.T) {
		for _, tc := range []struct {
			args []string
			want string
		}{
			{[]string{"get", ""}, "Shop/\n:6\n"},
			{[]string{"get", "Shop/"}, "Shop/Item/\n:6\n"},
			{[]string{"schema", "get", "Sh"}, "Shop/\n:6\n"},
			{[]string{"schema", "get", "Shop/I"}, "Shop/Item\n:4\n"},
			{[]string{"check", ""}, "Shop\n:4\n"},
			{[]string{"cluster", "drain", ""}, "dev\n:4\n"},
			{[]string{"datastream", "status", ""}, "feed\n:4\n"},
			{[]string{"datastream", "status", "feed", ""}, ":4\n"},
		} {
			out, errs, code := c.run("", append([]string{"__complete"}, tc.args...)...)
			if code != 0 || out != tc.want {
				t.Errorf("doppio __complete %q: exit %d, stdout %q, want %q; stderr %q", tc.args, code, out, tc.want, errs)
			}
		}
		// A server that does not answer completes nothing, with an error
		// directive, rather than hanging the shell.
		out, _, _ := c.run("", "__complete", "--server", "http://127.0.0.1:1", "get", "")
		if out != fmt.Sprintf(":%d\n", 1) {
			t.Errorf("completion without a server: %q", out)
		}
	})
}
