// Package fsutil holds the file-system steps that durable files share:
// a file written and synced before anyone may rely on it.
package fsutil

import "os"

// WriteFileSync creates (or truncates) path, writes b and syncs it, so
// that a rename or a manifest naming it afterwards never points at
// bytes a crash could lose.
func WriteFileSync(path string, b []byte) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := f.Write(b); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
