package e2e

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/doppio-db/doppio/internal/pyvenv"
)

// pyClientRequirements are what the Python client (clients/python) and
// its tests need, pinned so a cached virtualenv is reused until they
// change; the client itself is put on PYTHONPATH, never installed.
const pyClientRequirements = "httpx==0.28.1\nxxhash==4.1.0\npytest==9.2.0\n"

// pytest runs the Python client's test files against the servers named
// in env (DOPPIO_* variables the files read) and fails with their output.
func pytest(t *testing.T, env []string, files ...string) {
	t.Helper()
	v := pyvenv.Prepare(t, "pyclient", pyClientRequirements)
	dir, err := filepath.Abs("../clients/python")
	if err != nil {
		t.Fatal(err)
	}
	env = append(env, "PYTHONPATH="+filepath.Join(dir, "src"), "PYTHONDONTWRITEBYTECODE=1")
	args := append([]string{"-q", "-p", "no:cacheprovider", "-x"}, files...)
	cmd := v.Command(t.Context(), v.Bin("pytest"), env, args...)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	t.Logf("pytest %s:\n%s", strings.Join(files, " "), pyvenv.Tail(string(out), 15))
	if err != nil {
		t.Fatalf("pytest %s: %v\n%s", strings.Join(files, " "), err, pyvenv.Tail(string(out), 120))
	}
}

// TestPythonClientAgainstOneNode runs the Python client's document,
// collection, query, transaction, schema, quota and change-stream tests
// against one `doppio dev` node.
func TestPythonClientAgainstOneNode(t *testing.T) {
	n := startDev(t, t.TempDir())
	env := []string{"DOPPIO_URL=" + n.addr}
	if mode.secure() {
		// The harness's secure mode: TLS, and root's client certificate.
		env = append(env, "DOPPIO_CA="+filepath.Join(mode.certsDir, "ca.crt"),
			"DOPPIO_CERT="+filepath.Join(mode.certsDir, "client.root.crt"), "DOPPIO_KEY="+filepath.Join(mode.certsDir, "client.root.key"))
	}
	pytest(t, env, "tests/test_node.py", "tests/test_errors.py")
}

// TestPythonClientRidesOutANodeKill runs the Python client with smart
// routing against `doppio dev --nodes 3`: its routes match the cluster
// view, and its writes keep succeeding when the test kills -9 a node
// leading partitions mid-run.
func TestPythonClientRidesOutANodeKill(t *testing.T) {
	d := startDevCluster(t)
	pidLine := regexp.MustCompile(`(?m)^node (n\d): (https?://\S+)\s+\(pid (\d+)\)`)
	var nodes []string
	for _, m := range pidLine.FindAllStringSubmatch(d.log(), -1) {
		nodes = append(nodes, m[1]+"="+m[2]+"="+m[3])
	}
	if len(nodes) != 3 {
		t.Fatalf("dev printed %d node lines with pids, want 3:\n%s", len(nodes), d.log())
	}
	pytest(t, []string{"DOPPIO_NODES=" + strings.Join(nodes, ",")}, "tests/test_cluster.py")
}

// TestPythonClientLogsInToASecureNode runs `doppio dev --secure`: the
// Python client logs in as root over TLS and reads with the token, and
// reads again with root's client certificate.
func TestPythonClientLogsInToASecureNode(t *testing.T) {
	data := t.TempDir()
	p := startProc(t, nil, binary, "dev", "--secure", "--data", data, "--http", "127.0.0.1:0")
	pwFile := filepath.Join(data, "root.password")
	var addr string
	waitFor(t, 45*time.Second, "a secure node ready with root's password set", func() (bool, string) {
		out := p.output()
		if m := readyLine.FindStringSubmatch(out); m != nil {
			addr = m[1]
		}
		_, err := os.Stat(pwFile)
		return addr != "" && err == nil && strings.Contains(out, "password is in"), out
	})
	pw, err := os.ReadFile(pwFile)
	if err != nil {
		t.Fatal(err)
	}
	certsDir := filepath.Join(data, "certs")
	pytest(t, []string{
		"DOPPIO_URL=https://" + addr,
		"DOPPIO_CA=" + filepath.Join(certsDir, "ca.crt"),
		"DOPPIO_CERT=" + filepath.Join(certsDir, "client.root.crt"),
		"DOPPIO_KEY=" + filepath.Join(certsDir, "client.root.key"),
		"DOPPIO_ROOT_PASSWORD=" + strings.TrimSpace(string(pw)),
	}, "tests/test_secure.py")
}
