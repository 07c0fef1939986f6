// Package testport hands out TCP ports for processes a test (or a
// benchmark) starts, which bind them only later.
//
// A port from Listen(":0") comes from the kernel's ephemeral range: once
// released, any outgoing connection may take it before the process that
// was given it binds it ("bind: address already in use", seen in make
// test). The ports handed out here lie below that range, where the kernel
// never picks a connection's port, and none is handed out twice in one
// test process.
package testport

import (
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"sync"
)

var (
	mu    sync.Mutex
	given = map[string]bool{} // host:port handed out in this process
)

// lowest is the first port handed out: above the well-known ports and
// those local services usually take.
const lowest = 10000

// Free returns host:port with a port free on host now, below the
// kernel's ephemeral range.
func Free(host string) (string, error) {
	hi := ephemeralStart()
	mu.Lock()
	defer mu.Unlock()
	for range 1000 {
		addr := net.JoinHostPort(host, fmt.Sprint(lowest+rand.IntN(max(hi-lowest, 1000))))
		if given[addr] {
			continue
		}
		l, err := net.Listen("tcp", addr)
		if err != nil {
			continue
		}
		l.Close()
		given[addr] = true
		return addr, nil
	}
	return "", fmt.Errorf("no free port on %s below the ephemeral range (from %d)", host, hi)
}

// ephemeralStart is the first port of the kernel's ephemeral range
// (Linux's default when it cannot be read).
func ephemeralStart() int {
	lo := 32768
	if b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range"); err == nil {
		fmt.Sscan(string(b), &lo)
	}
	return lo
}
