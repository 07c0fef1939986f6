package http1

import (
	"bytes"
	"fmt"
	"io"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/datadriven"
)

// TestRefusals runs testdata/refusals: raw requests in, the status and
// body of the answer out. With BadRequest set ("refuse"), a request
// net/http would refuse before its handler is answered by BadRequest
// with the status net/http gives it (the same input is sent to net/http
// alone to check), and the connection ends after the answer; what
// net/http accepts still falls back to it. Without BadRequest
// ("net-http-answers"), net/http answers the malformed requests itself.
func TestRefusals(t *testing.T) {
	fallbackFor := func(target []byte) bool { return bytes.HasPrefix(target, []byte("/_stream/")) }
	refusingAddr, _ := start(t, echo, func(s *Server) { s.FallbackFor = fallbackFor; refusing(s) })
	plainAddr, _ := start(t, echo, nil)
	theirs := netHTTP(t, echo)
	datadriven.RunTest(t, "testdata/refusals", func(t *testing.T, d *datadriven.TestData) string {
		raw := rawRequest(t, d)
		switch d.Cmd {
		case "refuse":
			// net/http answers a header too long while the client still
			// sends it, and resets the connection: its answer may be lost.
			resps, bodies, c := exchange(t, refusingAddr, raw, 1)
			if !d.HasArg("long-field") {
				if want, _, _ := exchange(t, theirs, raw, 1); want[0].StatusCode != resps[0].StatusCode {
					t.Errorf("status %d here, %d from net/http", resps[0].StatusCode, want[0].StatusCode)
				}
			}
			if strings.HasPrefix(bodies[0], "http1 refused ") {
				if !resps[0].Close {
					t.Error("the answer does not say Connection: close")
				}
				c.SetReadDeadline(time.Now().Add(5 * time.Second))
				if n, err := c.Read(make([]byte, 1)); err != io.EOF {
					t.Errorf("after the refusal: read %d, %v; want the connection closed", n, err)
				}
			}
			return fmt.Sprintf("%d %s\n", resps[0].StatusCode, bodies[0])
		case "net-http-answers":
			resps, _, _ := exchange(t, plainAddr, raw, 1)
			return fmt.Sprintf("%d\n", resps[0].StatusCode)
		}
		d.Fatalf(t, "unknown directive %s", d.Cmd)
		return ""
	})
}

// rawRequest is a case's input: Go-quoted lines, concatenated, with a
// field of long-field=N bytes added at the header's end.
func rawRequest(t *testing.T, d *datadriven.TestData) string {
	var b strings.Builder
	for _, l := range strings.Split(d.Input, "\n") {
		s, err := strconv.Unquote(l)
		if err != nil {
			d.Fatalf(t, "input line %s: %v", l, err)
		}
		b.WriteString(s)
	}
	raw := b.String()
	if d.HasArg("long-field") {
		var n int
		d.ScanArgs(t, "long-field", &n)
		end := strings.Index(raw, "\r\n\r\n") + 2
		raw = raw[:end] + "X: " + strings.Repeat("a", n) + "\r\n" + raw[end:]
	}
	return raw
}
