package benchutil

import (
	"os"
	"os/exec"
	"path/filepath"
)

// PostgresBin returns the directory holding PostgreSQL's initdb and pg_ctl:
// the one on PATH (through any symlink), else the newest
// /usr/lib/postgresql/*/bin; "" when PostgreSQL is not installed.
func PostgresBin() string {
	if p, err := exec.LookPath("initdb"); err == nil {
		if _, err := exec.LookPath("pg_ctl"); err == nil {
			if real, err := filepath.EvalSymlinks(p); err == nil {
				p = real
			}
			return filepath.Dir(p)
		}
	}
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	for i := len(dirs) - 1; i >= 0; i-- {
		if _, err := os.Stat(filepath.Join(dirs[i], "initdb")); err == nil {
			return dirs[i]
		}
	}
	return ""
}
