package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

func TestCertCommandsAndSecureDev(t *testing.T) {
	bin := buildBinary(t)
	c := &cli{t: t, bin: bin, server: "http://127.0.0.1:1"}
	dir := filepath.Join(t.TempDir(), "certs")
	c.env = []string{"DOPPIO_CERTS_DIR=" + dir}

	expect(t, "create-ca", c.ok("", "cert", "create-ca"), "wrote "+filepath.Join(dir, "ca.crt")+"\n")
	if _, errs, code := c.run("", "cert", "create-ca"); code != 1 || !strings.Contains(errs, "file exists (use --overwrite to replace it)") {
		t.Fatalf("second create-ca: exit %d, %s", code, errs)
	}
	c.ok("", "cert", "create-node", "db1.example.com", "10.0.0.7", "--lifetime", "720h")
	c.ok("", "cert", "create-client", "alice")
	if _, errs, code := c.run("", "cert", "create-client", "node"); code != 1 || !strings.Contains(errs, `user name "node" is reserved`) {
		t.Fatalf("create-client node: exit %d, %s", code, errs)
	}
	if _, errs, code := c.run("", "cert", "create-node"); code != exitUsage || !strings.Contains(errs, "requires at least 1 arg") {
		t.Fatalf("create-node without a host: exit %d, %s", code, errs)
	}
	list := c.ok("", "cert", "list")
	lines := strings.Split(strings.TrimSpace(list), "\n")
	want := []*regexp.Regexp{
		regexp.MustCompile(`^FILE +KIND +SUBJECT +NAMES +EXPIRES$`),
		regexp.MustCompile(`^ca\.crt +ca +CN=Doppio CA,O=Doppio +- +\d{4}-`),
		regexp.MustCompile(`^client\.alice\.crt +client +CN=alice,O=Doppio +- +\d{4}-`),
		regexp.MustCompile(`^node\.crt +node +CN=node,O=Doppio +db1\.example\.com,10\.0\.0\.7 +` + time.Now().Add(720*time.Hour).UTC().Format("2006-01-02")),
	}
	if len(lines) < len(want) {
		t.Fatalf("cert list:\n%s", list)
	}
	for i, re := range want {
		if !re.MatchString(lines[i]) {
			t.Errorf("cert list line %d = %q, want %v", i, lines[i], re)
		}
	}

	// A secure dev node: certificates made on first start, every
	// command over TLS as root.
	data := filepath.Join(t.TempDir(), "data")
	d := startDevWith(t, bin, data, "--secure")
	addr := strings.TrimPrefix(d.server, "http://")
	certsDir := filepath.Join(data, "certs")
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(d.devOut.String(), "curl --cacert") && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	printed := d.devOut.String()
	for _, w := range []string{
		"doppio --certs-dir " + certsDir + " --server https://" + addr + " cluster",
		"export DOPPIO_CERTS_DIR=" + certsDir + " DOPPIO_SERVER=https://" + addr,
		"curl --cacert " + filepath.Join(certsDir, "ca.crt") + " --cert " + filepath.Join(certsDir, "client.root.crt") + " --key " + filepath.Join(certsDir, "client.root.key") + " https://" + addr + "/_cluster",
	} {
		if !strings.Contains(printed, w) {
			t.Errorf("dev --secure does not print %q; it printed:\n%s", w, printed)
		}
	}
	d.env = []string{"DOPPIO_CERTS_DIR=" + certsDir}
	// http:// in DOPPIO_SERVER becomes https with a certs directory.
	d.ok("", "schema", "put", "shop", "--partitions", "1", "--replicas", "1")
	if out := d.ok("", "schema", "get", "shop"); !strings.Contains(out, `"partitions": 1`) {
		t.Errorf("schema get over TLS:\n%s", out)
	}
	if out := d.ok("", "cluster", "status"); !strings.Contains(out, "alive") {
		t.Errorf("cluster status over TLS:\n%s", out)
	}
	// root's generated password: saved owner-only, and a login with it
	// (over TLS) prints a session token that the next command uses.
	pwFile := filepath.Join(data, rootPasswordFile)
	if fi, err := os.Stat(pwFile); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("root password file: %v %v", fi, err)
	}
	if !strings.Contains(printed, "password is in "+pwFile) {
		t.Errorf("dev --secure does not say where root's password is:\n%s", printed)
	}
	pw, _ := os.ReadFile(pwFile)
	token := strings.TrimSpace(d.ok("", "login", "--user", "root", "--password", strings.TrimSpace(string(pw))))
	if !strings.HasPrefix(token, "dpt1.") {
		t.Fatalf("login printed %q", token)
	}
	if _, errs, code := d.run("", "login", "--user", "root", "--password", "not-the-password", "--retry", "0"); code != 1 || !strings.Contains(errs, "wrong user name or password") {
		t.Errorf("login with a wrong password: exit %d, %s", code, errs)
	}
	// Neither a certificate nor a credential: 401.
	d.env = []string{"DOPPIO_CERTS_DIR=" + certsDir, "DOPPIO_USER=nobody"}
	if _, errs, code := d.run("", "cluster", "status", "--retry", "0"); code != 1 || !strings.Contains(errs, "this node requires authentication") {
		t.Errorf("no credential: exit %d, %s", code, errs)
	}
	d.env = []string{"DOPPIO_CERTS_DIR=" + certsDir, "DOPPIO_USER=nobody", "DOPPIO_TOKEN=" + token}
	if out := d.ok("", "cluster", "status"); !strings.Contains(out, "alive") {
		t.Errorf("cluster status with root's token:\n%s", out)
	}
	// Without the certs directory the CLI speaks plain HTTP: refused
	// with the server's clear answer.
	d.env = []string{"DOPPIO_CERTS_DIR="}
	if _, errs, code := d.run("", "cluster", "status", "--retry", "0"); code != 1 || !strings.Contains(errs, "Client sent an HTTP request to an HTTPS server") {
		t.Errorf("plain HTTP CLI: exit %d, %s", code, errs)
	}
}
