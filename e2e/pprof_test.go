package e2e

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestDebugListenerServesTheStorageReport: with --pprof, the node's debug
// listener serves its storage engine's LSM report at /debug/pebble next to
// the profiles, and the REST listener does not.
func TestDebugListenerServesTheStorageReport(t *testing.T) {
	debug := freePort(t)
	n := runNode(t, []string{"dev", "--data", t.TempDir(), "--http", "127.0.0.1:0", "--pprof", debug})
	get := func(url string) (int, string) {
		t.Helper()
		resp, err := http.Get(url)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	// The node logs that it is ready just before the command registers it
	// with the debug listener, which answers 503 until then (make test
	// failed once on that window).
	var status int
	var body string
	waitFor(t, 10*time.Second, "/debug/pebble answers", func() (bool, string) {
		status, body = get("http://" + debug + "/debug/pebble")
		return status == 200, fmt.Sprintf("%d %q", status, body)
	})
	for _, want := range []string{"level", "WAL:", "Flushes:", "Compactions:", "Block cache:"} {
		if !strings.Contains(body, want) {
			t.Errorf("the report lacks %q:\n%s", want, body)
		}
	}
	if status, _ := get(n.addr + "/debug/pebble"); status != http.StatusNotFound {
		t.Errorf("the REST listener answers /debug/pebble with %d, want 404", status)
	}
}
