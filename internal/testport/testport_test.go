package testport

import (
	"net"
	"strconv"
	"testing"
)

// TestFreePortsLieBelowTheEphemeralRangeAndAreNeverRepeated: every port
// handed out is below the kernel's ephemeral range, on the host asked,
// bindable, and different from every other handed out.
func TestFreePortsLieBelowTheEphemeralRangeAndAreNeverRepeated(t *testing.T) {
	lo := ephemeralStart()
	seen := map[string]bool{}
	for _, host := range []string{"127.0.0.1", "127.0.0.2", "127.0.0.1"} {
		for range 200 {
			addr, err := Free(host)
			if err != nil {
				t.Fatal(err)
			}
			h, p, _ := net.SplitHostPort(addr)
			port, _ := strconv.Atoi(p)
			if h != host || port < lowest || port >= lo {
				t.Fatalf("Free(%s) = %s: want %s with a port in [%d, %d)", host, addr, host, lowest, lo)
			}
			if seen[addr] {
				t.Fatalf("%s handed out twice", addr)
			}
			seen[addr] = true
			l, err := net.Listen("tcp", addr)
			if err != nil {
				t.Fatalf("%s cannot be bound: %v", addr, err)
			}
			l.Close()
		}
	}
}
