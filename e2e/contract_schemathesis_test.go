package e2e

import (
	"bufio"
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/doppio-db/doppio/internal/pyvenv"
)

// schemathesisTools pins the property-based tester of the contract.
const schemathesisTools = "schemathesis==4.32.5\n"

// schemathesisConfig is where the run departs from Schemathesis's
// defaults, each for a reason the document cannot state in JSON Schema.
const schemathesisConfig = `
# 422 answers a request of the right form whose meaning the server
# refuses (a role granted on a database it is not granted on, a source it
# cannot read): no schema can say which values those are.
[checks.positive_data_acceptance]
expected-statuses = ["2xx", "3xx", "401", "403", "404", "409", "422", "429", "5xx"]

# Served on the peer listener only; the REST listener answers 404.
[[operations]]
include-tag = "internal"
enabled = false

# The body's name must equal the path's; a restore's load step names the
# backup it loads; a change stream's bootstrap excludes a from: relations
# between members no schema states.
[[operations]]
include-path = "/_changes/{db}"
checks.positive_data_acceptance.expected-statuses = ["2xx", "3xx", "400", "401", "403", "404", "409", "422", "429", "5xx"]

[[operations]]
include-name = "PUT /_datastreams/{name}"
checks.positive_data_acceptance.expected-statuses = ["2xx", "3xx", "400", "401", "403", "404", "409", "422", "429", "5xx"]

[[operations]]
include-name = "POST /_cluster/restore/{db}/{partition}"
checks.positive_data_acceptance.expected-statuses = ["2xx", "3xx", "400", "401", "403", "404", "409", "422", "429", "5xx"]

# A key part's type and a projected field are its table's (a long, a
# record), an Avro schema's validity is Avro's, and a condition's time is
# RFC 3339 or an HTTP date: the document serves every table, and JSON
# Schema has no format for the last.
[[operations]]
include-path-regex = "^/\\{db\\}/\\{table\\}(/\\{key\\})?$"
checks.positive_data_acceptance.expected-statuses = ["2xx", "3xx", "400", "401", "403", "404", "409", "422", "429", "5xx"]

[[operations]]
include-name = "PUT /_schemas/{db}/{table}"
checks.positive_data_acceptance.expected-statuses = ["2xx", "3xx", "400", "401", "403", "404", "409", "422", "429", "5xx"]

[[operations]]
include-path-regex = "^/\\{db\\}/_(batch|txn)$"
checks.positive_data_acceptance.expected-statuses = ["2xx", "3xx", "400", "401", "403", "404", "409", "422", "429", "5xx"]
`

// schemathesisExamples bounds the generated cases per operation: the run
// must fit make test's budget on a shared two-core machine.
const schemathesisExamples = "3"

// TestSchemathesisFindsNoContractFailure lets Schemathesis generate
// requests from the document a node serves, valid and invalid, and check
// every answer against it with every check it has: a request the document
// allows must be served, one it forbids refused, and every answer must be
// of the status, headers and schema the document declares.
func TestSchemathesisFindsNoContractFailure(t *testing.T) {
	venv := pyvenv.Prepare(t, "schemathesis", schemathesisTools)
	n, file := devWithOpenAPI(t)
	config := filepath.Join(t.TempDir(), "schemathesis.toml")
	if err := os.WriteFile(config, []byte(schemathesisConfig), 0o644); err != nil {
		t.Fatal(err)
	}
	front := httptest.NewServer(boundedStreams(t, n.addr))
	defer front.Close()

	reports := t.TempDir()
	cmd := venv.Command(t.Context(), venv.Bin("schemathesis"), []string{"SCHEMATHESIS_HOOKS=", "NO_COLOR=1"},
		"--config-file", config, "run", file,
		"--url", front.URL,
		"--checks", "all",
		"--max-examples", schemathesisExamples,
		"--seed", "1",
		// One worker: Hypothesis's source cache is not safe across threads.
		"--workers", "1",
		"--request-timeout", "20",
		"--no-shrink",
		"--suppress-health-check", "all",
		"--report", "junit",
		"--report-dir", reports,
	)
	// Its example cache (.schemathesis/) goes to a temporary directory,
	// not into the repository.
	cmd.Dir = t.TempDir()
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	start := time.Now()
	err := cmd.Run()
	t.Logf("schemathesis ran for %s", time.Since(start).Round(time.Second))
	if err != nil {
		t.Fatalf("schemathesis: %v\n%s", err, pyvenv.Tail(out.String(), 400))
	}
	t.Logf("schemathesis:\n%s", pyvenv.Tail(out.String(), 30))
}

// boundedStreams proxies to the node at addr and ends each change stream
// after its first line (the checkpoint it sends first): the stream
// otherwise answers for as long as its reader reads, and Schemathesis
// reads every answer to its end.
func boundedStreams(t *testing.T, addr string) http.Handler {
	target, err := url.Parse(addr)
	if err != nil {
		t.Fatal(err)
	}
	p := httputil.NewSingleHostReverseProxy(target)
	p.FlushInterval = -1
	p.ModifyResponse = func(resp *http.Response) error {
		if strings.HasPrefix(resp.Request.URL.Path, "/_changes/") && resp.StatusCode == http.StatusOK {
			resp.Body = firstLine(resp.Body)
		}
		return nil
	}
	return p
}

// firstLine reads body up to and including its first newline, then
// closes it.
func firstLine(body io.ReadCloser) io.ReadCloser {
	line, _ := bufio.NewReader(body).ReadBytes('\n')
	body.Close()
	return io.NopCloser(bytes.NewReader(line))
}
