package e2e

import (
	"strings"
	"testing"

	"github.com/doppio-db/doppio/internal/pyvenv"
)

// exportReaders are the Python packages that read exports in the tests:
// readers nobody here wrote, pinned so that a cached environment is
// reused until the list changes.
var exportReaders = []string{"pyarrow==26.0.1", "duckdb==2.0.1", "fastavro==1.13.1"}

// exportPython returns the python of the virtualenv holding exportReaders
// (internal/pyvenv).
func exportPython(t *testing.T) string {
	t.Helper()
	return pyvenv.Prepare(t, "export", strings.Join(exportReaders, "\n")+"\n").Bin("python")
}
