package main

import (
	"strings"
	"testing"
)

// TestCLIDatastreamCommands drives `doppio datastream` against a dev node
// (the broker address is never reached: the commands only manage the
// definition and read the status).
func TestCLIDatastreamCommands(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	c := startDev(t)
	c.ok("", "schema", "put", "shop", "--partitions", "2")
	c.ok(`{"key":[{"name":"c","type":"string"},{"name":"id","type":"long"}],"schema":{"type":"record","name":"Order","fields":[{"name":"n","type":"long"}]}}`,
		"schema", "put", "shop/Order")

	// Refused definitions say what is wrong and exit non-zero.
	for _, bad := range []struct {
		args []string
		says string
	}{
		{[]string{"--database", "nope", "--brokers", "127.0.0.1:1"}, `database "nope" does not exist`},
		{[]string{"--database", "shop", "--brokers", "localhost"}, `broker 0 ("localhost") is not host:port`},
		{[]string{"--database", "shop", "--brokers", "h:1", "--format", "xml"}, `format must be "json" or "avro", not "xml"`},
		{[]string{"--database", "shop", "--brokers", "h:1", "--tables", "Order,Gone"}, `table "Gone" does not exist in database "shop"`},
	} {
		_, errs, code := c.run("", append([]string{"datastream", "create", "s"}, bad.args...)...)
		if code == 0 || !strings.Contains(errs, bad.says) {
			t.Errorf("create %v: exit %d, stderr %q; want an error saying %s", bad.args, code, errs, bad.says)
		}
	}

	out, errs, code := c.run("", "datastream", "create", "s", "--database", "shop", "--brokers", "127.0.0.1:1", "--topics", "per-database",
		"--topic-prefix", "cdc.", "--auto-pause-failures", "3", "--auto-pause-resume-after", "90s")
	if code != 0 || !strings.Contains(errs, "datastream s: created") {
		t.Fatalf("create: exit %d, stderr %s", code, errs)
	}
	for _, want := range []string{`"name": "s"`, `"topics": "per-database"`, `"topicPrefix": "cdc."`, `"format": "json"`, `"failures": 3`, `"resumeAfter": "1m30s"`, `"from": "now"`, `"state": "running"`} {
		if !strings.Contains(out, want) {
			t.Errorf("create printed no %s:\n%s", want, out)
		}
	}
	// The same definition from a file (stdin): an update.
	if _, errs, code := c.run(`{"database":"shop","sink":{"type":"kafka","brokers":["127.0.0.1:1"],"topics":"per-database","topicPrefix":"cdc."}}`,
		"datastream", "create", "s", "-f", "-"); code != 0 || !strings.Contains(errs, "datastream s: updated") {
		t.Fatalf("update from stdin: exit %d, stderr %s", code, errs)
	}

	expect(t, "list", c.ok("", "datastream", "list"),
		"NAME  DATABASE  STATE    TOPICS            FORMAT  BROKERS\n"+
			"s     shop      running  cdc.per-database  json    127.0.0.1:1\n")
	expect(t, "pause 1", c.ok("", "datastream", "pause", "s", "--partitions", "1"), "datastream s: partially-paused (paused partitions [1])\n")
	status := c.ok("", "datastream", "status", "s")
	lines := strings.Split(strings.TrimSpace(status), "\n")
	if len(lines) != 4 || lines[0] != "datastream s (database shop): running" || !strings.HasPrefix(lines[1], "PARTITION  STATE") ||
		!strings.HasPrefix(lines[2], "0 ") || !strings.HasPrefix(strings.Join(strings.Fields(lines[3]), " "), "1 paused") {
		t.Fatalf("status:\n%s", status)
	}
	expect(t, "resume", c.ok("", "datastream", "resume", "s"), "datastream s: running\n")
	if _, errs, code := c.run("", "datastream", "pause", "s", "--partitions", "7"); code == 0 || !strings.Contains(errs, "does not read partition 7") {
		t.Errorf("pause of a partition the stream does not read: exit %d, %s", code, errs)
	}
	expect(t, "delete", c.ok("", "datastream", "delete", "s"), "datastream s deleted\n")
	if _, errs, code := c.run("", "datastream", "get", "s"); code == 0 || !strings.Contains(errs, `datastream "s" does not exist`) {
		t.Errorf("get after delete: exit %d, %s", code, errs)
	}
}
