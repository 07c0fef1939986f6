package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/doppio-db/doppio/internal/certs"
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
		{[]string{"--database", "shop", "--brokers", "h:1", "--format", "xml"}, `format must be "json", "avro" or "debezium-json", not "xml"`},
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

// TestCLIDatastreamSinkSecurityFlags: `doppio datastream create` reads
// the sink's CA, SASL mechanism, user and password from its flags and
// files; the answer shows the password as "***"; an update without the
// password file keeps it; bad settings are refused with the server's
// reason (or the flag's file error) and exit non-zero.
func TestCLIDatastreamSinkSecurityFlags(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	dir := t.TempDir()
	if err := certs.CreateCA(dir, certs.Options{}); err != nil {
		t.Fatal(err)
	}
	ca := filepath.Join(dir, certs.CAFile)
	pwd, junk := filepath.Join(dir, "password"), filepath.Join(dir, "junk.pem")
	if err := os.WriteFile(pwd, []byte("pa55word\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(junk, []byte("not a certificate"), 0o600); err != nil {
		t.Fatal(err)
	}
	c := startDev(t)
	c.ok("", "schema", "put", "shop", "--partitions", "2")
	base := []string{"datastream", "create", "s", "--database", "shop", "--brokers", "127.0.0.1:1"}

	for _, bad := range []struct {
		args []string
		says string
	}{
		{[]string{"--sink-sasl-mechanism", "PLAIN", "--sink-sasl-user", "u", "--sink-sasl-password-file", pwd}, "SASL PLAIN sends the password in clear"},
		{[]string{"--sink-tls-ca", junk}, "sink.tls.ca is not PEM certificates"},
		{[]string{"--sink-tls-ca", filepath.Join(dir, "absent.pem")}, "--sink-tls-ca: open"},
		{[]string{"--sink-sasl-mechanism", "GSSAPI", "--sink-sasl-user", "u", "--sink-sasl-password-file", pwd}, `SASL mechanism "GSSAPI" is not supported`},
		{[]string{"--sink-sasl-mechanism", "SCRAM-SHA-256", "--sink-sasl-user", "u"}, `SASL needs the password of user "u"`},
	} {
		_, errs, code := c.run("", append(base, bad.args...)...)
		if code == 0 || !strings.Contains(errs, bad.says) {
			t.Errorf("create %v: exit %d, stderr %q; want an error saying %s", bad.args, code, errs, bad.says)
		}
	}
	expect(t, "nothing created", c.ok("", "datastream", "list"), "NAME  DATABASE  STATE  TOPICS  FORMAT  BROKERS\n")

	out := c.ok("", append(base, "--sink-tls-ca", ca, "--sink-tls-server-name", "kafka.internal",
		"--sink-sasl-mechanism", "SCRAM-SHA-512", "--sink-sasl-user", "app", "--sink-sasl-password-file", pwd)...)
	for _, want := range []string{`"ca": "-----BEGIN CERTIFICATE-----\n`, `"serverName": "kafka.internal"`, `"mechanism": "SCRAM-SHA-512"`, `"username": "app"`, `"password": "***"`} {
		if !strings.Contains(out, want) {
			t.Errorf("create printed no %s:\n%s", want, out)
		}
	}
	// An update without the password file keeps the password: accepted.
	if _, errs, code := c.run("", append(base, "--sink-tls", "--sink-sasl-mechanism", "SCRAM-SHA-256", "--sink-sasl-user", "app")...); code != 0 || !strings.Contains(errs, "datastream s: updated") {
		t.Fatalf("update keeping the password: exit %d, stderr %s", code, errs)
	}
	got := c.ok("", "datastream", "get", "s")
	if strings.Contains(got, "pa55word") || !strings.Contains(got, `"password": "***"`) || !strings.Contains(got, `"mechanism": "SCRAM-SHA-256"`) || strings.Contains(got, `"ca"`) {
		t.Fatalf("get after the update:\n%s", got)
	}
}
