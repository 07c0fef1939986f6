package main

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"

	"github.com/doppio-db/doppio/bench/internal/mailboxdata"
)

// bleveHTTP is the Bleve system behind a loopback HTTP server that takes
// the same requests as Doppio's REST API and answers a query with the same
// page, {"documents":[{"key":[mailbox, id],"document":{...}},...]}, which
// the client reads with the same code. The paper compared Lucene and the
// prefix index as two index implementations inside Espresso's storage
// node, behind one REST interface; this is that comparison, where the
// in-process bleveSystem spares Bleve the HTTP and JSON that Doppio pays.
// The server is Go's net/http, as a Go service built on Bleve would use.
// The load (not measured) goes straight to the indexes.
type bleveHTTP struct {
	*bleveSystem
	srv *http.Server
	restClient
}

func openBleveHTTP(dir string, clients int) (*bleveHTTP, error) {
	b, err := openBleve(dir)
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	s := &bleveHTTP{bleveSystem: b, restClient: newRESTClient("http://"+ln.Addr().String(), clients)}
	mux := http.NewServeMux()
	mux.HandleFunc("PUT /m/{mailbox}/{id}", s.servePut)
	mux.HandleFunc("GET /m/{mailbox}", s.serveQuery)
	s.srv = &http.Server{Handler: mux}
	go func() { _ = s.srv.Serve(ln) }()
	return s, nil
}

func (s *bleveHTTP) Name() string { return "Bleve over HTTP" }

func (s *bleveHTTP) Insert(ctx context.Context, mailbox string, id int64, m mailboxdata.Message) error {
	body, err := json.Marshal(m)
	if err != nil {
		return err
	}
	_, err = s.do(ctx, "PUT", "/m/"+url.PathEscape(mailbox)+"/"+strconv.FormatInt(id, 10), body, 201)
	return err
}

func (s *bleveHTTP) Inbox(ctx context.Context, mailbox string, limit int) ([]Hit, error) {
	return s.query(ctx, mailbox, url.Values{"inbox": {"true"}, "limit": {strconv.Itoa(limit)}})
}

func (s *bleveHTTP) Search(ctx context.Context, mailbox, word string, limit int) ([]Hit, error) {
	return s.query(ctx, mailbox, url.Values{"body": {word}, "limit": {strconv.Itoa(limit)}})
}

func (s *bleveHTTP) query(ctx context.Context, mailbox string, v url.Values) ([]Hit, error) {
	b, err := s.do(ctx, "GET", "/m/"+url.PathEscape(mailbox)+"?"+v.Encode(), nil, 200)
	if err != nil {
		return nil, err
	}
	return pageHits(b)
}

func (s *bleveHTTP) servePut(w http.ResponseWriter, r *http.Request) {
	id, err := strconv.ParseInt(r.PathValue("id"), 10, 64)
	if err != nil {
		http.Error(w, "bad id", http.StatusBadRequest)
		return
	}
	src, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	var m mailboxdata.Message
	if err := json.Unmarshal(src, &m); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	idx, err := s.index(r.PathValue("mailbox"))
	if err != nil {
		http.Error(w, err.Error(), http.StatusNotFound)
		return
	}
	if err := s.insert(idx, id, bleveDocOf(m, src)); err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.WriteHeader(http.StatusCreated)
}

func (s *bleveHTTP) serveQuery(w http.ResponseWriter, r *http.Request) {
	mailbox := r.PathValue("mailbox")
	q := r.URL.Query()
	limit, err := strconv.Atoi(q.Get("limit"))
	if err != nil || limit < 1 {
		http.Error(w, "bad limit", http.StatusBadRequest)
		return
	}
	var hits []Hit
	if word := q.Get("body"); word != "" {
		hits, err = s.bleveSystem.Search(r.Context(), mailbox, word, limit)
	} else if q.Get("inbox") == "true" {
		hits, err = s.bleveSystem.Inbox(r.Context(), mailbox, limit)
	} else {
		err = errors.New("want body=word or inbox=true")
	}
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	mb, _ := json.Marshal(mailbox)
	size := 16
	for _, h := range hits {
		size += len(h.Doc) + len(mb) + 48
	}
	page := make([]byte, 0, size)
	page = append(page, `{"documents":[`...)
	for i, h := range hits {
		if i > 0 {
			page = append(page, ',')
		}
		page = append(page, `{"key":[`...)
		page = append(page, mb...)
		page = append(page, ',')
		page = strconv.AppendInt(page, h.ID, 10)
		page = append(page, `],"document":`...)
		page = append(page, h.Doc...)
		page = append(page, '}')
	}
	page = append(page, "]}"...)
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(page)))
	_, _ = w.Write(page)
}

func (s *bleveHTTP) Close() error {
	s.restClient.close()
	_ = s.srv.Close()
	return s.bleveSystem.Close()
}
