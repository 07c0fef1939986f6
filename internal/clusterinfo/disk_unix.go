//go:build unix

package clusterinfo

import "syscall"

// diskSpace returns the bytes available to unprivileged users and the
// size of the file system holding dir.
func diskSpace(dir string) (free, total uint64, ok bool) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return 0, 0, false
	}
	return uint64(st.Bavail) * uint64(st.Bsize), uint64(st.Blocks) * uint64(st.Bsize), true
}
