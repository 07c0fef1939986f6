package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestSystemdUnitVerifiesAndItsCommandRuns: packaging/doppio.service
// passes systemd-analyze verify (installed from Debian's packages when
// absent) with the built binary in its place, and its ExecStart is a
// command line doppio accepts.
func TestSystemdUnitVerifiesAndItsCommandRuns(t *testing.T) {
	if _, err := exec.LookPath("systemd-analyze"); err != nil {
		install := exec.Command("sh", "-c", "apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends systemd")
		if out, err := install.CombinedOutput(); err != nil {
			t.Fatalf("systemd-analyze is missing and installing systemd failed: %v\n%s", err, out)
		}
	}
	unit, err := os.ReadFile("../packaging/doppio.service")
	if err != nil {
		t.Fatal(err)
	}
	const installed = "/usr/local/bin/doppio"
	dir := t.TempDir()
	path := filepath.Join(dir, "doppio.service")
	if err := os.WriteFile(path, []byte(strings.ReplaceAll(string(unit), installed, binary)), 0o644); err != nil {
		t.Fatal(err)
	}
	verify := exec.Command("systemd-analyze", "verify", path)
	verify.Dir = dir
	if out, err := verify.CombinedOutput(); err != nil || len(out) > 0 {
		t.Fatalf("systemd-analyze verify: %v\n%s", err, out)
	}
	var execStart string
	for _, line := range strings.Split(string(unit), "\n") {
		if v, ok := strings.CutPrefix(line, "ExecStart="); ok {
			execStart = v
		}
	}
	args := strings.Fields(strings.TrimPrefix(execStart, installed))
	if len(args) == 0 || !strings.HasPrefix(execStart, installed+" ") {
		t.Fatalf("ExecStart=%q does not run %s", execStart, installed)
	}
	config := filepath.Join(dir, "doppio.yaml")
	if err := os.WriteFile(config, []byte("id: db1\netcd: [http://127.0.0.1:2379]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for i, a := range args {
		if a == "/etc/doppio/doppio.yaml" {
			args[i] = config
		}
	}
	out, err := exec.Command(binary, append(args, "--print-config")...).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "id: db1  # file") || !strings.Contains(string(out), "log-format: json  # flag") {
		t.Fatalf("doppio %v --print-config: %v\n%s", args, err, out)
	}
}
