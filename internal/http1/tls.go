package http1

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"net/http"
	"slices"
	"time"
)

// handshake completes c's TLS handshake within ReadHeaderTimeout and
// reports whether the connection may carry requests. A client that sent
// plain HTTP is answered 400, as net/http answers it, rather than left
// to time out on bytes that are no handshake.
func (c *conn) handshake(tc *tls.Conn) bool {
	tc.SetDeadline(time.Now().Add(c.s.ReadHeaderTimeout))
	err := tc.HandshakeContext(context.Background())
	if err == nil {
		tc.SetDeadline(time.Time{})
		st := tc.ConnectionState()
		c.tls = &st
		return true
	}
	var re tls.RecordHeaderError
	if errors.As(err, &re) && re.Conn != nil && looksLikeHTTP(re.RecordHeader[:]) {
		answer(re.Conn, plainHTTPAnswer)
		re.Conn.Close()
	}
	return false
}

// plainHTTPAnswer is what a client speaking plain HTTP to a TLS port
// gets: net/http's answer, word for word, so both servers say the same.
const plainHTTPAnswer = "HTTP/1.0 400 Bad Request\r\n\r\nClient sent an HTTP request to an HTTPS server.\n"

// tlsToPlainAnswer is what a TLS client at a plain HTTP port gets: its
// TLS stack reads an HTTP answer where a handshake should be, and says
// so (Go's: "server gave HTTP response to HTTPS client"), rather than
// waiting for a header that never ends.
const tlsToPlainAnswer = "HTTP/1.0 400 Bad Request\r\n\r\nClient sent a TLS handshake to a plain HTTP server.\n"

// tlsHandshake is the first byte of a TLS connection (a handshake
// record); no HTTP request begins with it.
const tlsHandshake = 0x16

// errTLSToPlain: a TLS client connected to the plain HTTP port.
var errTLSToPlain = errors.New("http1: client sent a TLS handshake to a plain HTTP server")

// answer writes msg on c, then reads what the client still sends for a
// while (as lingeringClose), so that closing does not reset the
// connection before the client reads the answer.
func answer(c net.Conn, msg string) {
	c.SetWriteDeadline(time.Now().Add(time.Second))
	if _, err := c.Write([]byte(msg)); err != nil {
		return
	}
	if cw, ok := c.(interface{ CloseWrite() error }); ok {
		cw.CloseWrite()
	}
	c.SetReadDeadline(time.Now().Add(500 * time.Millisecond))
	io.CopyN(io.Discard, c, 64<<10)
}

// looksLikeHTTP reports whether the first five bytes of a connection
// begin an HTTP/1 request of a method the API serves.
func looksLikeHTTP(hdr []byte) bool {
	for _, p := range []string{"GET /", "HEAD ", "POST ", "PUT /", "PATCH", "DELET", "OPTIO"} {
		if bytes.Equal(hdr, []byte(p)) {
			return true
		}
	}
	return false
}

// offersH2 reports whether cfg offers HTTP/2 through ALPN.
func offersH2(cfg *tls.Config) bool { return slices.Contains(cfg.NextProtos, "h2") }

type tlsConnKey struct{}

// rememberTLS puts a TLS connection that fell back to net/http in the
// connection's context: net/http sees a prefixConn, not a *tls.Conn, and
// would leave r.TLS empty.
func rememberTLS(prev func(context.Context, net.Conn) context.Context) func(context.Context, net.Conn) context.Context {
	return func(ctx context.Context, c net.Conn) context.Context {
		if prev != nil {
			ctx = prev(ctx, c)
		}
		if p, ok := c.(*prefixConn); ok {
			if tc, ok := p.Conn.(*tls.Conn); ok {
				ctx = context.WithValue(ctx, tlsConnKey{}, tc)
			}
		}
		return ctx
	}
}

// withTLSState gives r.TLS to the requests of connections rememberTLS
// saw.
func withTLSState(h http.Handler) http.Handler {
	if h == nil {
		h = http.DefaultServeMux
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.TLS == nil {
			if tc, ok := r.Context().Value(tlsConnKey{}).(*tls.Conn); ok {
				st := tc.ConnectionState()
				r.TLS = &st
			}
		}
		h.ServeHTTP(w, r)
	})
}

// sniffListener gives net/http alone (FallbackOnly) the fast path's
// answers to a client speaking the other protocol: plain HTTP at a TLS
// port (net/http recognises fewer methods), a TLS handshake at a plain
// port (net/http waits for a header that never ends). With cfg it is
// tls.NewListener.
type sniffListener struct {
	net.Listener
	cfg *tls.Config // nil: a plain HTTP port
}

func (l *sniffListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	if l.cfg == nil {
		return &sniffConn{Conn: c, plain: true}, nil
	}
	return tls.Server(&sniffConn{Conn: c}, l.cfg), nil
}

// sniffConn answers a connection whose first bytes are of the other
// protocol, and fails the read of them.
type sniffConn struct {
	net.Conn
	plain bool   // a plain HTTP port
	first []byte // the first bytes, until read
	read  bool
}

// errPlainHTTP ends the handshake of a client speaking plain HTTP.
var errPlainHTTP = errors.New("client sent an HTTP request to an HTTPS server")

func (s *sniffConn) Read(b []byte) (int, error) {
	if !s.read && s.plain {
		// The first byte is enough, and costs no read of its own.
		n, err := s.Conn.Read(b)
		if n > 0 {
			s.read = true
			if b[0] == tlsHandshake {
				answer(s.Conn, tlsToPlainAnswer)
				return 0, errTLSToPlain
			}
		}
		return n, err
	}
	if !s.read {
		s.read = true
		hdr := make([]byte, 5)
		n, err := io.ReadFull(s.Conn, hdr)
		if err != nil {
			return copy(b, hdr[:n]), err
		}
		if looksLikeHTTP(hdr) {
			answer(s.Conn, plainHTTPAnswer)
			return 0, errPlainHTTP
		}
		s.first = hdr
	}
	if len(s.first) > 0 {
		n := copy(b, s.first)
		s.first = s.first[n:]
		return n, nil
	}
	return s.Conn.Read(b)
}

// CloseWrite keeps net/http's lingering close on the connection.
func (s *sniffConn) CloseWrite() error {
	if cw, ok := s.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}
