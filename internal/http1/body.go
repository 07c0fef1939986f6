package http1

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"net/textproto"
)

// body reads a request body, of declared length or chunked, from the
// connection's buffer, then from the connection.
type body struct {
	c       *conn
	left    int64 // bytes left: of the body, or of the current chunk
	chunked bool
	started bool // chunked: a chunk-size line has been read
	done    bool // chunked: the last chunk and the trailer section are read
	expect  bool // a 100 Continue is owed before the first read
	eof     bool // the handler was given io.EOF
	err     error
}

// errBadChunked: a chunked body that breaks RFC 9112's framing. The
// connection cannot be read further.
var errBadChunked = errors.New("http1: malformed chunked request body")

// maxChunkLine bounds a chunk-size line (extensions included) and each
// trailer field line.
const maxChunkLine = 4096

func (b *body) Read(p []byte) (int, error) {
	if b.err != nil {
		return 0, b.err
	}
	if b.expect {
		b.expect = false
		if err := b.c.sendContinue(); err != nil {
			b.err = err
			return 0, err
		}
	}
	for b.chunked && b.left == 0 && !b.done {
		if err := b.nextChunk(); err != nil {
			if err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			b.err = err
			return 0, err
		}
	}
	if b.left == 0 {
		if !b.eof {
			b.eof = true
			b.c.ctx.bodyDone()
		}
		return 0, io.EOF
	}
	if len(p) == 0 {
		return 0, nil
	}
	c := b.c
	if c.pos == c.lim {
		if int64(len(p)) >= b.left || len(p) >= len(c.in) {
			// Large reads go straight into p.
			n, err := c.rwc.Read(p[:min(int64(len(p)), b.left)])
			b.left -= int64(n)
			if err == io.EOF && b.left > 0 {
				err = io.ErrUnexpectedEOF
			}
			if err != nil && n == 0 {
				b.err = err
				return 0, err
			}
			return n, nil
		}
		c.pos, c.lim = 0, 0
		if err := c.fill(len(c.in)); err != nil {
			if err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			b.err = err
			return 0, err
		}
	}
	n := copy(p[:min(int64(len(p)), b.left)], c.in[c.pos:c.lim])
	c.pos += n
	b.left -= int64(n)
	return n, nil
}

// nextChunk reads the line break that ends the chunk before (if any) and
// the next chunk-size line, whose extensions are ignored; after the last
// chunk, it reads the trailer section and drops its fields, refusing one
// net/http would not parse.
func (b *body) nextChunk() error {
	c := b.c
	if b.started {
		l, err := c.line()
		if err != nil {
			return err
		}
		if len(l) != 0 {
			return errBadChunked
		}
	}
	b.started = true
	l, err := c.line()
	if err != nil {
		return err
	}
	size, _, _ := bytes.Cut(l, []byte(";"))
	n, ok := parseChunkSize(bytes.TrimRight(size, " \t"))
	if !ok {
		return errBadChunked
	}
	if n > 0 {
		b.left = n
		return nil
	}
	var trailer []byte
	for {
		l, err := c.line()
		if err != nil {
			return err
		}
		if len(l) == 0 {
			break
		}
		if trailer = append(append(trailer, l...), "\r\n"...); len(trailer) > c.s.MaxHeaderBytes {
			return errBadChunked
		}
	}
	if trailer != nil {
		// Dropped, but judged by net/http's parser of trailer fields.
		tp := textproto.NewReader(bufio.NewReader(bytes.NewReader(append(trailer, "\r\n"...))))
		if _, err := tp.ReadMIMEHeader(); err != nil {
			return errBadChunked
		}
	}
	b.done = true
	return nil
}

// parseChunkSize parses a chunk size: 1 to 15 hexadecimal digits.
func parseChunkSize(b []byte) (int64, bool) {
	if len(b) == 0 || len(b) > 15 {
		return 0, false
	}
	var n int64
	for _, d := range b {
		switch {
		case '0' <= d && d <= '9':
			d -= '0'
		case 'a' <= d && d <= 'f':
			d -= 'a' - 10
		case 'A' <= d && d <= 'F':
			d -= 'A' - 10
		default:
			return 0, false
		}
		n = n<<4 | int64(d)
	}
	return n, true
}

// line returns the next line of a chunked body's framing without its
// CRLF, reading more as needed. The line aliases the connection's buffer
// until the next read. A line ended by a bare LF, holding a CR before
// its end, or longer than maxChunkLine, is malformed.
func (c *conn) line() ([]byte, error) {
	for {
		if i := bytes.IndexByte(c.in[c.pos:c.lim], '\n'); i >= 0 {
			l := c.in[c.pos : c.pos+i]
			c.pos += i + 1
			if len(l) == 0 || bytes.IndexByte(l, '\r') != len(l)-1 || len(l) > maxChunkLine+1 {
				return nil, errBadChunked // a bare LF, or a CR before the end (as net/http)
			}
			return l[:len(l)-1], nil
		}
		if c.lim-c.pos > maxChunkLine {
			return nil, errBadChunked
		}
		if err := c.fill(max(len(c.in), 2*maxChunkLine)); err != nil {
			if err == errFallback {
				err = errBadChunked
			}
			return nil, err
		}
	}
}

// sendContinue sends the interim 100 Continue that a request with
// Expect: 100-continue waits for, unless the handler has chosen its
// answer already (as net/http).
func (c *conn) sendContinue() error {
	if w := &c.resp; w.status != 0 || w.sent {
		return nil
	}
	_, err := io.WriteString(c.rwc, "HTTP/1.1 100 Continue\r\n\r\n")
	return err
}

func (b *body) Close() error { return nil }

// discard consumes what the handler left of the body: at most 256 KiB,
// as net/http; it reports whether the connection can take another
// request. It cannot when a 100 Continue was owed and never sent: the
// client may send the body or not.
func (b *body) discard() bool {
	if b.err != nil || b.expect {
		return false
	}
	if !b.chunked && b.left > 256<<10 {
		return false
	}
	_, err := io.CopyN(io.Discard, b, 256<<10+1)
	return err == io.EOF
}
