package http1

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/textproto"
	"net/url"
	"strings"
	"unicode/utf8"

	"golang.org/x/net/http/httpguts"
)

// refusal is why BadRequest answers a request.
type refusal struct {
	status int
	detail string
}

// refuse judges a request that is not plain, as net/http would (cause is
// errFallback or errHeaderTooLarge): when net/http would refuse it before
// any handler, and BadRequest is set, it returns the request for
// BadRequest to answer (c.refused says why), having consumed what was
// read; otherwise nil, and the request falls back untouched.
func (c *conn) refuse(cause error) *http.Request {
	if c.s.BadRequest == nil {
		return nil
	}
	in := c.in[c.pos:c.lim]
	var why refusal
	if cause == errHeaderTooLarge {
		why = refusal{http.StatusRequestHeaderFieldsTooLarge, fmt.Sprintf("the request header is longer than %d bytes", c.s.MaxHeaderBytes)}
	} else if why = judge(in); why.status == 0 {
		return nil
	}
	// The method and target as far as the request line reads; the
	// request is answered as HTTP/1.1, and the connection closes.
	r := &http.Request{Method: "OTHER", URL: &url.URL{}, Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: http.Header{}, Body: http.NoBody, RemoteAddr: c.remote, TLS: c.tls, Close: true}
	line, _, _ := bytes.Cut(in, []byte("\n"))
	if method, rest, ok := bytes.Cut(line, []byte(" ")); ok {
		if m := knownMethod(method); m != "" {
			r.Method = m
		}
		target, _, _ := bytes.Cut(rest, []byte(" "))
		if utf8.Valid(target) && len(target) <= 8<<10 {
			r.URL.Path, r.RequestURI = string(target), string(target)
		}
	}
	c.refused = why
	c.pos = c.lim
	return r
}

// judge returns why net/http's server would refuse the request whose
// header block (and possibly more) in holds, or a zero refusal when it
// would serve it or cannot tell yet. It parses with http.ReadRequest, as
// net/http's server does, then makes the checks that server adds
// (Go 1.26 net/http/server.go, conn.readRequest and conn.serve).
func judge(in []byte) refusal {
	req, err := http.ReadRequest(bufio.NewReaderSize(bytes.NewReader(in), max(len(in), 16)))
	switch {
	case err == io.EOF || errors.Is(err, io.ErrUnexpectedEOF):
		return refusal{}
	case err != nil && strings.Contains(err.Error(), "transfer encoding"):
		// net/http's unsupportedTEError: "unsupported transfer encoding"
		// or "too many transfer encodings", answered 501.
		return refusal{http.StatusNotImplemented, "transfer coding not supported (only chunked is)"}
	case err != nil:
		return refusal{http.StatusBadRequest, "the request cannot be parsed: " + err.Error()}
	}
	if req.ProtoMajor != 1 && !(req.ProtoMajor == 2 && req.ProtoMinor == 0 && req.Method == "PRI" && req.RequestURI == "*") {
		return refusal{http.StatusHTTPVersionNotSupported, fmt.Sprintf("HTTP/%d.%d is not supported: use HTTP/1.1", req.ProtoMajor, req.ProtoMinor)}
	}
	// ReadRequest drops the Host field from req.Header; net/http's server
	// judges the fields as read (the parse cannot fail the second time).
	tp := textproto.NewReader(bufio.NewReader(bytes.NewReader(in)))
	tp.ReadLine()
	fields, _ := tp.ReadMIMEHeader()
	hosts := fields["Host"]
	h2c := req.Method == "PRI" && len(req.Header) == 0 && req.URL.Path == "*" && req.Proto == "HTTP/2.0"
	if req.ProtoAtLeast(1, 1) && len(hosts) == 0 && !h2c && req.Method != http.MethodConnect {
		return refusal{http.StatusBadRequest, "the request has no Host header (HTTP/1.1 requires one)"}
	}
	if len(hosts) == 1 && !httpguts.ValidHostHeader(hosts[0]) {
		return refusal{http.StatusBadRequest, fmt.Sprintf("the Host header %q is malformed", hosts[0])}
	}
	for k, vv := range req.Header {
		if !httpguts.ValidHeaderFieldName(k) {
			return refusal{http.StatusBadRequest, fmt.Sprintf("the header field name %q is not valid", k)}
		}
		for _, v := range vv {
			if !httpguts.ValidHeaderFieldValue(v) {
				return refusal{http.StatusBadRequest, fmt.Sprintf("the value of header field %s holds a character not allowed there", k)}
			}
		}
	}
	if e := req.Header.Get("Expect"); e != "" && !expectsContinue(e) {
		return refusal{http.StatusExpectationFailed, "only Expect: 100-continue is supported"}
	}
	return refusal{}
}

// expectsContinue reports whether an Expect value asks for 100-continue
// as net/http's server reads it: the word bounded by spaces, tabs,
// commas or the value's ends, in any case.
func expectsContinue(v string) bool {
	for _, w := range strings.FieldsFunc(v, func(r rune) bool { return r == ' ' || r == ',' || r == '\t' }) {
		if strings.EqualFold(w, "100-continue") {
			return true
		}
	}
	return false
}
