package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/doppio-db/doppio/internal/node"

	"github.com/doppio-db/doppio/bench/internal/mailboxdata"
)

// doppioSystem is a real in-process node (embedded etcd, Pebble with synced
// writes) driven through its REST API over loopback HTTP, as users run it.
type doppioSystem struct {
	dir  string
	node *node.Node
	restClient
}

const doppioDB = "MailboxDB"

func openDoppio(ctx context.Context, dir string, clients, partitions int) (*doppioSystem, error) {
	n, err := node.Start(ctx, node.Config{DataDir: dir, HTTPAddr: "127.0.0.1:0"})
	if err != nil {
		return nil, fmt.Errorf("start doppio node: %w", err)
	}
	s := &doppioSystem{dir: dir, node: n, restClient: newRESTClient("http://"+n.Addr(), clients)}
	if err := s.waitReady(ctx); err != nil {
		s.Close()
		return nil, err
	}
	db := fmt.Sprintf(`{"partitions":%d,"replicas":1}`, partitions)
	if _, err := s.do(ctx, "PUT", "/_schemas/"+doppioDB, []byte(db), 200, 201); err != nil {
		s.Close()
		return nil, err
	}
	if _, err := s.do(ctx, "PUT", "/_schemas/"+doppioDB+"/Message", []byte(mailboxdata.Schema), 200, 201); err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}

func (s *doppioSystem) waitReady(ctx context.Context) error {
	deadline := time.Now().Add(time.Minute)
	for time.Now().Before(deadline) {
		if _, err := s.do(ctx, "GET", "/readyz", nil, 200); err == nil {
			return nil
		}
		time.Sleep(50 * time.Millisecond)
	}
	return fmt.Errorf("doppio node at %s not ready after a minute", s.base)
}

func (s *doppioSystem) Name() string { return "Doppio" }

type doppioOp struct {
	Op       string              `json:"op"`
	Table    string              `json:"table"`
	Key      []any               `json:"key"`
	Document mailboxdata.Message `json:"document"`
}

// Load writes a mailbox in transactions of at most 500 puts.
func (s *doppioSystem) Load(ctx context.Context, mailbox string, msgs []mailboxdata.Message) error {
	for start := 0; start < len(msgs); start += 500 {
		end := min(start+500, len(msgs))
		ops := make([]doppioOp, 0, end-start)
		for i := start; i < end; i++ {
			ops = append(ops, doppioOp{Op: "put", Table: "Message", Key: []any{mailbox, i + 1}, Document: msgs[i]})
		}
		body, err := json.Marshal(map[string]any{"partitionKey": mailbox, "ops": ops})
		if err != nil {
			return err
		}
		if err := s.idempotent(ctx, "POST", "/"+doppioDB+"/_txn", body); err != nil {
			return err
		}
	}
	return nil
}

// idempotent sends a request that may be repeated (the load's transactions
// put fixed keys), again after a 503 (not applied) or a 504 (outcome
// unknown), as a client of the documented contract may; a loaded machine
// can make a 500-document transaction outlast the server's deadline.
func (s *doppioSystem) idempotent(ctx context.Context, method, path string, body []byte) error {
	var err error
	for attempt := 0; attempt < 5; attempt++ {
		if _, err = s.do(ctx, method, path, body, 200, 201); err == nil || !(strings.Contains(err.Error(), ": 503 ") || strings.Contains(err.Error(), ": 504 ")) {
			return err
		}
		time.Sleep(time.Second)
	}
	return err
}

// Ready flushes the node's memtables, as PostgreSQL's Ready ends with a
// CHECKPOINT, and waits until the storage engine's background compactions
// have settled (none running and none started for two seconds), as
// PostgreSQL's runs VACUUM ANALYZE: every system starts the measured mixes
// settled after its load. Without the flush, the first mix's writes filled
// the memtable the load had left most of the way full, and that mix
// carried the load's flush and the compactions after it.
func (s *doppioSystem) Ready(ctx context.Context) error {
	if err := s.node.FlushStorage(); err != nil {
		return fmt.Errorf("doppio: flush after load: %w", err)
	}
	deadline := time.Now().Add(3 * time.Minute)
	lastCount, quietSince := -1.0, time.Now()
	for {
		b, err := s.do(ctx, "GET", "/metrics", nil, 200)
		if err != nil {
			return err
		}
		running, count := metricValue(b, "doppio_storage_compactions_in_progress"), metricValue(b, "doppio_storage_compactions_total")
		if running != 0 || count != lastCount {
			lastCount, quietSince = count, time.Now()
		} else if time.Since(quietSince) >= 2*time.Second {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("doppio: compactions still running after 3 minutes")
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// metricValue reads an unlabelled metric's value from a Prometheus text
// exposition; -1 when it is absent.
func metricValue(exposition []byte, name string) float64 {
	for _, line := range bytes.Split(exposition, []byte("\n")) {
		rest, ok := bytes.CutPrefix(line, []byte(name+" "))
		if !ok {
			continue
		}
		v, err := strconv.ParseFloat(string(bytes.TrimSpace(rest)), 64)
		if err == nil {
			return v
		}
	}
	return -1
}

func (s *doppioSystem) Insert(ctx context.Context, mailbox string, id int64, m mailboxdata.Message) error {
	body, err := json.Marshal(m)
	if err != nil {
		return err
	}
	_, err = s.do(ctx, "PUT", "/"+doppioDB+"/Message/"+url.PathEscape(mailbox)+"/"+strconv.FormatInt(id, 10), body, 201)
	return err
}

func (s *doppioSystem) Inbox(ctx context.Context, mailbox string, limit int) ([]Hit, error) {
	return s.query(ctx, mailbox, "isInbox:true", limit)
}

func (s *doppioSystem) Search(ctx context.Context, mailbox, word string, limit int) ([]Hit, error) {
	return s.query(ctx, mailbox, "body:"+word, limit)
}

func (s *doppioSystem) query(ctx context.Context, mailbox, q string, limit int) ([]Hit, error) {
	v := url.Values{"query": {q}, "sort": {"-createdOn"}, "limit": {strconv.Itoa(limit)}}
	b, err := s.do(ctx, "GET", "/"+doppioDB+"/Message/"+url.PathEscape(mailbox)+"?"+v.Encode(), nil, 200)
	if err != nil {
		return nil, err
	}
	return pageHits(b)
}

func (s *doppioSystem) DiskBytes() int64 { return dirBytes(s.dir) }

func (s *doppioSystem) Close() error {
	s.restClient.close()
	return s.node.Close()
}
