package etcdhttp

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"time"
)

// Event is one change of a watched key.
type Event struct {
	Delete bool // otherwise a put
	KV     KeyValue
}

// WatchResponse is a batch of events, or the error that ended the watch.
type WatchResponse struct {
	Events []Event
	Err    error
}

// ErrCompacted ends a watch whose next revision etcd has compacted away:
// events were lost, so the watcher must read the state afresh.
var ErrCompacted = errors.New("etcd: watch revision compacted")

// requireLeader makes etcd refuse the watch while its member has no
// leader, rather than serve a stream that may never deliver.
var requireLeader = http.Header{"Grpc-Metadata-Hasleader": {"true"}}

// Watch sends the changes of every key starting with prefix, from now on,
// until ctx ends; a broken stream is reopened from the revision after the
// last one seen, so no event is lost or repeated. The channel closes when
// ctx ends or after a response carrying ErrCompacted.
func (c *Client) Watch(ctx context.Context, prefix string) <-chan WatchResponse {
	ch := make(chan WatchResponse)
	go func() {
		defer close(ch)
		var rev int64 // last revision delivered; 0 until the first stream opens
		for ctx.Err() == nil {
			err := c.watchOnce(ctx, prefix, &rev, ch)
			if errors.Is(err, ErrCompacted) {
				select {
				case ch <- WatchResponse{Err: err}:
				case <-ctx.Done():
				}
				return
			}
			select {
			case <-ctx.Done():
			case <-time.After(200 * time.Millisecond):
			}
		}
	}()
	return ch
}

// watchOnce reads one watch stream until it breaks, advancing *rev.
func (c *Client) watchOnce(ctx context.Context, prefix string, rev *int64, ch chan<- WatchResponse) error {
	type create struct {
		Key           []byte `json:"key"`
		RangeEnd      []byte `json:"range_end"`
		StartRevision int64  `json:"start_revision,omitempty,string"`
	}
	req := struct {
		Create create `json:"create_request"`
	}{create{Key: []byte(prefix), RangeEnd: prefixEnd(prefix)}}
	if *rev > 0 {
		req.Create.StartRevision = *rev + 1
	}
	resp, err := c.post(ctx, "/v3/watch", req, requireLeader)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	dec := json.NewDecoder(resp.Body)
	for {
		var msg struct {
			Result *struct {
				Header          header `json:"header"`
				Created         bool   `json:"created"`
				Canceled        bool   `json:"canceled"`
				CompactRevision int64  `json:"compact_revision,string"`
				CancelReason    string `json:"cancel_reason"`
				Events          []struct {
					Type string `json:"type"` // PUT is the default and so omitted
					KV   kv     `json:"kv"`
				} `json:"events"`
			} `json:"result"`
			Error *Error `json:"error"`
		}
		if err := dec.Decode(&msg); err != nil {
			return err
		}
		if msg.Error != nil {
			return msg.Error
		}
		r := msg.Result
		if r == nil {
			continue
		}
		if r.CompactRevision > 0 {
			return ErrCompacted
		}
		if r.Canceled {
			return &Error{Message: "watch canceled: " + r.CancelReason}
		}
		if r.Created && *rev == 0 {
			*rev = r.Header.Revision
		}
		if len(r.Events) == 0 {
			continue
		}
		out := WatchResponse{}
		for _, e := range r.Events {
			out.Events = append(out.Events, Event{Delete: e.Type == "DELETE", KV: e.KV.public()})
			*rev = max(*rev, e.KV.ModRevision)
		}
		select {
		case ch <- out:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}
