package sparktest

import (
	"strings"
	"testing"
)

// TestVenvHasTheJobsPackages: the virtualenv imports what the job and the
// input writers need, at the pinned versions.
func TestVenvHasTheJobsPackages(t *testing.T) {
	env := Prepare(t)
	got := env.Python(t, "-c", "import pyspark, xxhash, fastavro, pyarrow; print(pyspark.__version__, xxhash.VERSION, fastavro.__version__, pyarrow.__version__)")
	if want := "4.3.0 4.1.0 1.13.1 26.0.1"; strings.TrimSpace(got) != want {
		t.Fatalf("versions = %q, want %q", strings.TrimSpace(got), want)
	}
}
