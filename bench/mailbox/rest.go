package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"time"
)

// restClient is the benchmark's HTTP client of a system behind a REST
// interface (Doppio's node, and Bleve behind bleveHTTP): keep-alive
// connections, a few per benchmark client.
type restClient struct {
	base string
	hc   *http.Client
}

func newRESTClient(base string, clients int) restClient {
	return restClient{base: base, hc: &http.Client{Timeout: 2 * time.Minute, Transport: &http.Transport{
		MaxIdleConns: 4 * clients, MaxIdleConnsPerHost: 4 * clients, IdleConnTimeout: time.Minute,
	}}}
}

// do sends one request and returns the body, or an error naming the status
// and the problem document when the status is not one of ok.
func (c restClient) do(ctx context.Context, method, path string, body []byte, ok ...int) ([]byte, error) {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, rd)
	if err != nil {
		return nil, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var b []byte
	if n := resp.ContentLength; n >= 0 && n <= 64<<20 {
		// One allocation of the announced size (io.ReadAll doubles its way
		// up: 64 KiB of garbage for a 27 KiB query page).
		b = make([]byte, n)
		_, err = io.ReadFull(resp.Body, b)
	} else {
		b, err = io.ReadAll(resp.Body)
	}
	if err != nil {
		return nil, err
	}
	for _, st := range ok {
		if resp.StatusCode == st {
			return b, nil
		}
	}
	return nil, fmt.Errorf("%s %s: %d %s", method, path, resp.StatusCode, bytes.TrimSpace(b))
}

// pageHits reads a query answer, {"documents":[{"key":[mailbox, id],
// "document":{...}},...]}, as hits.
func pageHits(b []byte) ([]Hit, error) {
	keys, docs, err := parsePage(b)
	if err != nil {
		return nil, err
	}
	hits := make([]Hit, len(docs))
	for i, doc := range docs {
		if len(keys[i]) != 2 {
			return nil, fmt.Errorf("query answer: key %q has %d parts", keys[i], len(keys[i]))
		}
		id, err := parseID(string(bytes.Trim(keys[i][1], `"`)))
		if err != nil {
			return nil, err
		}
		hits[i] = Hit{ID: id, Doc: doc}
	}
	return hits, nil
}

func (c restClient) close() { c.hc.CloseIdleConnections() }
