package fsutil

import (
	"os"
	"path/filepath"
	"testing"
)

func TestWriteFileSyncReplacesTheFileWhole(t *testing.T) {
	p := filepath.Join(t.TempDir(), "f")
	if err := WriteFileSync(p, []byte("a longer first content")); err != nil {
		t.Fatal(err)
	}
	if err := WriteFileSync(p, []byte("second")); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(p); err != nil || string(b) != "second" {
		t.Fatalf("read %q, %v", b, err)
	}
	if err := WriteFileSync(filepath.Join(p, "under-a-file"), nil); err == nil {
		t.Fatal("a file under a regular file was written")
	}
}
