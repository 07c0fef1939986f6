package e2e

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/doppio-db/doppio/internal/pyvenv"
)

// contractTools are the third-party readers of the OpenAPI document,
// pinned so that a cached virtualenv is reused until the list changes.
const contractTools = "openapi-spec-validator==0.9.0\n"

// TestServedOpenAPIIsAValidContract hands the document a node serves at
// /_openapi to a validator nobody here wrote, as a client generator's
// user would before generating.
func TestServedOpenAPIIsAValidContract(t *testing.T) {
	venv := pyvenv.Prepare(t, "contract", contractTools)
	_, file := devWithOpenAPI(t)
	out := venv.Run(t, venv.Bin("openapi-spec-validator"), nil, file)
	t.Logf("openapi-spec-validator: %s", out)
}

// devWithOpenAPI starts a doppio dev and writes the document it serves at
// /_openapi to a file, as a generator's user would fetch it.
func devWithOpenAPI(t *testing.T) (*devNode, string) {
	n := startDev(t, t.TempDir())
	doc := n.must(200, "GET", "/_openapi", nil)
	file := filepath.Join(t.TempDir(), "openapi.yaml")
	if err := os.WriteFile(file, doc, 0o644); err != nil {
		t.Fatal(err)
	}
	return n, file
}
