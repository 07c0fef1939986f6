package benchutil

import (
	"bufio"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
)

// Machine describes where the benchmark ran.
type Machine struct {
	CPUs     int
	CPUModel string
	RAM      string
	Kernel   string
	Go       string
}

// DescribeMachine reads the CPUs, RAM, kernel and Go version.
func DescribeMachine() Machine {
	m := Machine{CPUs: runtime.NumCPU(), Go: runtime.Version()}
	m.CPUModel = procField("/proc/cpuinfo", "model name")
	if kb, err := strconv.ParseFloat(strings.Fields(procField("/proc/meminfo", "MemTotal") + " 0")[0], 64); err == nil {
		m.RAM = fmt.Sprintf("%.1f GiB", kb/(1<<20))
	}
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		m.Kernel = "Linux " + strings.TrimSpace(string(b))
	}
	return m
}

func procField(path, key string) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if ok && strings.TrimSpace(k) == key {
			return strings.TrimSpace(v)
		}
	}
	return ""
}

// LoadAvg returns the 1-minute load average from /proc/loadavg, or 0
// where it cannot be read.
func LoadAvg() float64 {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return 0
	}
	v, _ := strconv.ParseFloat(f[0], 64)
	return v
}
