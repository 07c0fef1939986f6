package http1

import (
	"bytes"
	"errors"
	"io"
	"net/http"
	"net/textproto"
	"net/url"
	"strconv"
	"strings"
	"time"

	"golang.org/x/net/http/httpguts"
)

var crlfcrlf = []byte("\r\n\r\n")

// readRequest reads and parses the next request's header. It returns
// errFallback, with nothing consumed, for a request net/http must answer.
func (c *conn) readRequest() (*http.Request, error) {
	end := -1
	for {
		if i := bytes.Index(c.in[c.pos:c.lim], crlfcrlf); i >= 0 {
			end = c.pos + i
			break
		}
		if c.lim > c.pos && c.in[c.pos] == tlsHandshake && c.tls == nil {
			return nil, errTLSToPlain
		}
		if c.lim > c.pos {
			// Part of a header: the read timeout runs from here.
			if c.state.Load() != stateHeader {
				c.since.Store(time.Now().UnixNano())
				c.state.Store(stateHeader)
			}
			if bytes.Contains(c.in[c.pos:c.lim], []byte("\n\n")) || bytes.Contains(c.in[c.pos:c.lim], []byte("\n\r\n")) {
				return nil, errFallback // bare LF line ends: net/http's to judge
			}
		}
		if err := c.fill(c.s.MaxHeaderBytes); err != nil {
			if err == errFallback && c.lim > c.pos {
				return nil, errHeaderTooLarge
			}
			if err == io.EOF && c.lim > c.pos {
				return nil, errFallback // a header cut short: net/http answers it 400
			}
			return nil, err
		}
	}
	// A request has arrived: Shutdown no longer closes the connection as
	// idle (as net/http, once a request's first byte is read).
	c.state.Store(stateActive)
	head := c.in[c.pos:end]
	nl := bytes.Index(head, []byte("\r\n"))
	if nl < 0 {
		nl = len(head)
	}
	line := head[:nl]
	sp1 := bytes.IndexByte(line, ' ')
	if sp1 < 0 {
		return nil, errFallback
	}
	method := knownMethod(line[:sp1])
	rest := line[sp1+1:]
	sp2 := bytes.IndexByte(rest, ' ')
	if method == "" || sp2 <= 0 {
		return nil, errFallback
	}
	minor := 1
	switch string(rest[sp2+1:]) {
	case "HTTP/1.1":
	case "HTTP/1.0":
		minor = 0
	default:
		return nil, errFallback
	}
	target := rest[:sp2]
	if target[0] != '/' || (c.s.FallbackFor != nil && c.s.FallbackFor(target)) {
		return nil, errFallback
	}
	for _, b := range target {
		if b <= ' ' || b >= 0x7f {
			return nil, errFallback
		}
	}

	var block string
	if nl < len(head) {
		block = string(head[nl+2:])
	}
	hd, ok := parseHeader(block)
	// HTTP/1.1 requires a Host; HTTP/1.0 had no chunked coding and no
	// 100-continue, so net/http judges those requests.
	if !ok || (minor == 1 && !hd.hasHost) || (minor == 0 && (hd.chunked || hd.expectContinue)) {
		return nil, errFallback
	}
	raw := string(target)
	u, err := url.ParseRequestURI(raw)
	c.refused = refusal{}
	if err != nil {
		if c.s.BadRequest == nil {
			return nil, errFallback
		}
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		c.refused = refusal{http.StatusBadRequest, "request target is not a valid URI: " + err.Error()}
		u = &url.URL{Path: raw}
	}
	c.pos = end + 4
	req := &http.Request{
		Method: method, URL: u, Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: hd.fields, Host: hd.host, RemoteAddr: c.remote, RequestURI: raw, TLS: c.tls,
		ContentLength: hd.contentLength, Close: hd.close, Body: http.NoBody,
	}
	if minor == 0 {
		// An HTTP/1.0 connection persists only when the client asks.
		req.Proto, req.ProtoMinor = "HTTP/1.0", 0
		req.Close = hd.close || !hd.keepAlive
	}
	switch {
	case hd.chunked:
		// As net/http: the coding is in TransferEncoding, not the header.
		delete(hd.fields, "Transfer-Encoding")
		req.ContentLength = -1
		req.TransferEncoding = chunkedCoding
		req.Body = &body{c: c, chunked: true, expect: hd.expectContinue}
	case hd.contentLength > 0:
		req.Body = &body{c: c, left: hd.contentLength, expect: hd.expectContinue}
	}
	return req, nil
}

// header is what parseHeader reads of a request's header block.
type header struct {
	fields        http.Header
	host          string
	contentLength int64
	hasHost       bool
	close         bool // Connection: close
	keepAlive     bool // Connection: keep-alive (HTTP/1.0's way to persist)
	chunked       bool // Transfer-Encoding: chunked
	// expectContinue: Expect: 100-continue.
	expectContinue bool
}

var chunkedCoding = []string{"chunked"}

// parseHeader parses the header fields of a plain request: block is the
// block after the request line, without its final empty line; names and
// values are slices of it. ok is false for anything net/http must judge:
// a malformed field, a folded line, a repeated or malformed Host, a
// Content-Length that is not one decimal number, a Transfer-Encoding
// other than one "chunked" (or with a Content-Length), an Expect other
// than one "100-continue", Upgrade, TE or Trailer.
func parseHeader(block string) (hd header, ok bool) {
	n := strings.Count(block, "\n") + 1
	hd.fields = make(http.Header, n)
	values := make([]string, n) // one allocation for every field's value slice
	hasLength := false
	for len(block) > 0 {
		l, rest, _ := strings.Cut(block, "\r\n")
		block = rest
		colon := strings.IndexByte(l, ':')
		if colon <= 0 {
			return hd, false
		}
		for i := 0; i < colon; i++ {
			if !isTokenByte(l[i]) {
				return hd, false // obs-fold, space before the colon, a bad name
			}
		}
		v := strings.Trim(l[colon+1:], " \t")
		for i := 0; i < len(v); i++ {
			if b := v[i]; (b < ' ' && b != '\t') || b == 0x7f {
				return hd, false
			}
		}
		name := textproto.CanonicalMIMEHeaderKey(l[:colon])
		switch name {
		case "Host":
			if hd.hasHost || !httpguts.ValidHostHeader(v) {
				return hd, false
			}
			hd.host, hd.hasHost = v, true
		case "Content-Length":
			if hasLength || v == "" || len(v) > 18 || strings.Trim(v, "0123456789") != "" {
				return hd, false
			}
			hd.contentLength, _ = strconv.ParseInt(v, 10, 64)
			hasLength = true
		case "Transfer-Encoding":
			if hd.chunked || !strings.EqualFold(v, "chunked") {
				return hd, false
			}
			hd.chunked = true
		case "Expect":
			if hd.expectContinue || !strings.EqualFold(v, "100-continue") {
				return hd, false
			}
			hd.expectContinue = true
		case "Upgrade", "Te", "Trailer":
			return hd, false
		case "Connection":
			if hasToken(v, "upgrade") {
				return hd, false
			}
			hd.close = hd.close || hasToken(v, "close")
			hd.keepAlive = hd.keepAlive || hasToken(v, "keep-alive")
		}
		values[0] = v
		if old, ok := hd.fields[name]; ok {
			hd.fields[name] = append(old, v)
		} else {
			hd.fields[name] = values[:1:1]
		}
		values = values[1:]
	}
	return hd, !(hd.chunked && hasLength)
}

// knownMethod returns the method as a constant string (no allocation),
// or "" for a method the API does not serve.
func knownMethod(b []byte) string {
	for _, m := range apiMethods {
		if string(b) == m {
			return m
		}
	}
	return ""
}

var apiMethods = [...]string{http.MethodGet, http.MethodHead, http.MethodPut, http.MethodPost, http.MethodPatch, http.MethodDelete}

// hasToken reports whether the comma-separated list v holds token, in any
// case.
func hasToken(v, token string) bool {
	for item := range strings.SplitSeq(v, ",") {
		if strings.EqualFold(strings.Trim(item, " \t"), token) {
			return true
		}
	}
	return false
}

// isTokenByte: RFC 9110 tchar.
func isTokenByte(b byte) bool {
	switch {
	case 'a' <= b && b <= 'z', 'A' <= b && b <= 'Z', '0' <= b && b <= '9':
		return true
	}
	return b < 0x80 && strings.IndexByte("!#$%&'*+-.^_`|~", b) >= 0
}
