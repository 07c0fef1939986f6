package benchutil

import (
	"os"
	"strconv"
	"strings"
)

// ProcStat returns the fields of /proc/<pid>/stat after the command (which
// may hold spaces): the state first, the parent's pid second, utime and
// stime the 12th and 13th.
func ProcStat(pid int) ([]string, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return nil, err
	}
	s := string(b)
	return strings.Fields(s[strings.LastIndexByte(s, ')')+1:]), nil
}
