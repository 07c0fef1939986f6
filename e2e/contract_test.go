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

// generatorTools is the client generator the split-key form is tested
// with, pinned like contractTools.
const generatorTools = "openapi-python-client==0.29.1\n"

// TestServedOpenAPIIsAValidContract hands both forms of the document a
// node serves, /_openapi and /_openapi?keys=split, to a validator nobody
// here wrote, as a client generator's user would before generating.
func TestServedOpenAPIIsAValidContract(t *testing.T) {
	venv := pyvenv.Prepare(t, "contract", contractTools)
	n, file := devWithOpenAPI(t)
	out := venv.Run(t, venv.Bin("openapi-spec-validator"), nil, file)
	t.Logf("openapi-spec-validator: %s", out)
	out = venv.Run(t, venv.Bin("openapi-spec-validator"), nil, openAPIFile(t, n, "/_openapi?keys=split"))
	t.Logf("openapi-spec-validator, keys=split: %s", out)
}

// TestGeneratedPythonClientAddressesKeys generates a Python client with
// openapi-python-client from /_openapi?keys=split, as its user would, and
// runs testdata/generated_client.py through it: puts, gets, a collection
// read, an index query and a delete of one- and two-part keys, a key
// part holding a slash among them.
func TestGeneratedPythonClientAddressesKeys(t *testing.T) {
	venv := pyvenv.Prepare(t, "generator", generatorTools)
	n := startDev(t, t.TempDir())
	doc := openAPIFile(t, n, "/_openapi?keys=split")
	dir := t.TempDir()
	cfg := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(cfg, []byte("package_name_override: doppio_gen\nproject_name_override: doppio-gen\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out := venv.Run(t, venv.Bin("openapi-python-client"), nil, "generate", "--path", doc, "--config", cfg,
		"--meta", "none", "--output-path", filepath.Join(dir, "pkg", "doppio_gen"))
	t.Logf("openapi-python-client: %s", pyvenv.Tail(out, 5))
	script, err := filepath.Abs("testdata/generated_client.py")
	if err != nil {
		t.Fatal(err)
	}
	env := []string{"DOPPIO_URL=" + n.addr, "DOPPIO_DB=generated", "PYTHONPATH=" + filepath.Join(dir, "pkg"), "PYTHONDONTWRITEBYTECODE=1"}
	if mode.secure() {
		env = append(env, "DOPPIO_CA="+filepath.Join(mode.certsDir, "ca.crt"),
			"DOPPIO_CERT="+filepath.Join(mode.certsDir, "client.root.crt"), "DOPPIO_KEY="+filepath.Join(mode.certsDir, "client.root.key"))
	}
	t.Logf("generated client:\n%s", venv.Run(t, venv.Bin("python"), env, script))
}

// devWithOpenAPI starts a doppio dev and writes the document it serves at
// /_openapi to a file, as a generator's user would fetch it.
func devWithOpenAPI(t *testing.T) (*devNode, string) {
	n := startDev(t, t.TempDir())
	return n, openAPIFile(t, n, "/_openapi")
}

// openAPIFile writes the document n serves at path to a file.
func openAPIFile(t *testing.T, n *devNode, path string) string {
	doc := n.must(200, "GET", path, nil)
	file := filepath.Join(t.TempDir(), "openapi.yaml")
	if err := os.WriteFile(file, doc, 0o644); err != nil {
		t.Fatal(err)
	}
	return file
}
