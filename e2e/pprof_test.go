package e2e

import (
	"io"
	"net/http"
	"strings"
	"testing"
)

// TestDebugListenerServesTheStorageReport: with --pprof, the node's debug
// listener serves its storage engine's LSM report at /debug/pebble next to
// the profiles, from the moment the node says it is ready, and the REST
// listener does not.
func TestDebugListenerServesTheStorageReport(t *testing.T) {
	debug := freePort(t)
	n := runNode(t, []string{"dev", "--data", t.TempDir(), "--http", "127.0.0.1:0", "--pprof", debug})
	get := func(url string) (int, string) {
		t.Helper()
		resp, err := mode.http.Get(url)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	// The command registers the node with the debug listener before the
	// node says it is ready (node.Config.Opened), so the first request
	// after the ready line is answered (it once answered 503 in between).
	status, body := get("http://" + debug + "/debug/pebble")
	if status != http.StatusOK {
		t.Fatalf("/debug/pebble answers %d once the node is ready, want 200: %s", status, body)
	}
	for _, want := range []string{"level", "WAL:", "Flushes:", "Compactions:", "Block cache:"} {
		if !strings.Contains(body, want) {
			t.Errorf("the report lacks %q:\n%s", want, body)
		}
	}
	if status, _ := get(n.addr + "/debug/pebble"); status != http.StatusNotFound {
		t.Errorf("the REST listener answers /debug/pebble with %d, want 404", status)
	}
}
