package backupdir

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/doppio-db/doppio/client"
	"github.com/doppio-db/doppio/internal/backup"
	"github.com/doppio-db/doppio/internal/fsutil"
)

// Options say how to reach the cluster and report progress.
type Options struct {
	// Server is the base URL of any node (or router).
	Server string
	// Retry bounds how long a partition's transfer is retried while the
	// cluster answers 503 or refuses connections (default 1 min).
	Retry time.Duration
	// Parallel partitions at a time (default 2).
	Parallel int
	// Progress, when set, is called after each partition and each file.
	Progress func(Progress)
	// HTTP is the client to use (default: one without a timeout).
	HTTP *http.Client
}

// Progress is how far a backup or restore is.
type Progress struct {
	PartitionsDone, Partitions int
	Bytes                      int64
	// Note describes the last event ("partition 3: full (the change log
	// no longer holds …)").
	Note string
}

func (o *Options) defaults() {
	if o.Retry <= 0 {
		o.Retry = time.Minute
	}
	if o.Parallel <= 0 {
		o.Parallel = 2
	}
	if o.HTTP == nil {
		o.HTTP = &http.Client{}
	}
	o.Server = strings.TrimSuffix(o.Server, "/")
}

// tracker reports progress from concurrent partition transfers.
type tracker struct {
	o     *Options
	mu    sync.Mutex
	done  int
	total int
	bytes atomic.Int64
}

func (t *tracker) add(n int64) { t.bytes.Add(n) }

func (t *tracker) report(partitionDone bool, note string) {
	if t.o.Progress == nil {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if partitionDone {
		t.done++
	}
	t.o.Progress(Progress{PartitionsDone: t.done, Partitions: t.total, Bytes: t.bytes.Load(), Note: note})
}

// forEach runs fn for partitions 0..n-1, Parallel at a time, and returns
// the first error.
func (o *Options) forEach(ctx context.Context, n int, fn func(ctx context.Context, p int) error) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	sem := make(chan struct{}, o.Parallel)
	var (
		wg    sync.WaitGroup
		once  sync.Once
		first error
	)
	for p := range n {
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
		}
		if ctx.Err() != nil {
			break
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			if err := fn(ctx, p); err != nil {
				once.Do(func() { first = err; cancel() })
			}
		}()
	}
	wg.Wait()
	if first == nil {
		first = ctx.Err()
	}
	return first
}

// retryable reports whether a failed exchange changed nothing and may run
// again: refused connections, 503s, and broken backup streams.
func retryable(err error) bool {
	var ce *client.Error
	if errors.As(err, &ce) {
		return ce.Status == http.StatusServiceUnavailable
	}
	var ue *url.Error
	return errors.As(err, &ue) || errors.Is(err, backup.ErrTruncated) || errors.Is(err, io.ErrUnexpectedEOF)
}

// retry runs fn until it succeeds, fails for good, or Retry passes.
func (o *Options) retry(ctx context.Context, fn func() error) error {
	deadline := time.Now().Add(o.Retry)
	backoff := 50 * time.Millisecond
	for {
		err := fn()
		if err == nil || !retryable(err) || time.Now().Add(backoff).After(deadline) {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, time.Second)
	}
}

// call sends one request; an answer other than 200 is a *client.Error.
func (o *Options) call(ctx context.Context, method, path string, body []byte) (*http.Response, error) {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, o.Server+path, rd)
	if err != nil {
		return nil, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/octet-stream")
	}
	resp, err := o.HTTP.Do(req)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		defer resp.Body.Close()
		ce := &client.Error{Status: resp.StatusCode}
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
		if json.Unmarshal(b, ce) != nil || ce.Status == 0 {
			ce.Status, ce.Detail = resp.StatusCode, strings.TrimSpace(string(b))
		}
		return nil, ce
	}
	return resp, nil
}

func partitionPath(kind, db string, p int) string {
	return fmt.Sprintf("/_cluster/%s/%s/%d", kind, url.PathEscape(db), p)
}

// NewID names a backup taken now.
func NewID(now time.Time) string { return now.UTC().Format("20060102T150405.000Z") }

const tmpSuffix = ".partial"

// Take backs up database db into a new backup in dir: incremental to the
// newest backup of db in dir, unless full is set or there is none. The
// cluster keeps serving. The backup appears in dir (its manifest written
// last, its directory renamed into place) only once complete.
func Take(ctx context.Context, o Options, db, dir string, full bool) (*Manifest, error) {
	o.defaults()
	c := client.New(o.Server, client.WithHTTPClient(o.HTTP), client.WithRetry(o.Retry))
	d, err := c.GetDatabase(ctx, db)
	if err != nil {
		return nil, err
	}
	m := &Manifest{Format: ManifestFormat, Database: db, Partitions: d.Partitions, Replicas: d.Replicas, Partitioner: d.Partitioner, Started: time.Now().UTC()}
	var prev *Manifest
	if !full {
		all, err := List(dir)
		if err != nil {
			return nil, err
		}
		for _, b := range all {
			if b.Database == db && b.Partitions == d.Partitions {
				prev = b
			}
		}
	}
	if prev != nil {
		m.IncrementalTo = prev.ID
	}
	m.ID = NewID(m.Started)
	if prev != nil && m.ID <= prev.ID {
		m.ID = NewID(prev.Finished.Add(time.Millisecond))
	}
	tmp := filepath.Join(dir, m.ID+tmpSuffix)
	if err := os.MkdirAll(tmp, 0o755); err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)
	m.Parts = make([]Part, d.Partitions)
	t := &tracker{o: &o, total: d.Partitions}
	err = o.forEach(ctx, d.Partitions, func(ctx context.Context, p int) error {
		var since *Part
		if prev != nil {
			since = &prev.Parts[p]
		}
		var part Part
		err := o.retry(ctx, func() (err error) {
			part, err = o.backupPartition(ctx, t, db, p, since, tmp)
			return err
		})
		if err != nil {
			return fmt.Errorf("partition %d: %w", p, err)
		}
		m.Parts[p] = part
		note := fmt.Sprintf("partition %d at SCN %s: full", p, part.SCN)
		switch {
		case part.Incremental:
			note = fmt.Sprintf("partition %d at SCN %s: incremental since %s", p, part.SCN, part.Since)
		case part.FullReason != "":
			note += " (" + part.FullReason + ")"
		}
		t.report(true, note)
		return nil
	})
	if err != nil {
		return nil, err
	}
	// Schemas last: every version a backed-up document was written with is
	// registered by now.
	if d, err = c.GetDatabase(ctx, db); err != nil {
		return nil, err
	}
	for _, ts := range d.Tables {
		tb, err := c.GetTable(ctx, db, ts.Name)
		if err != nil {
			return nil, err
		}
		table := Table{Name: tb.Name, Key: tb.Key}
		for _, v := range tb.Versions {
			def, err := c.GetTableVersion(ctx, db, tb.Name, v.Version)
			if err != nil {
				return nil, err
			}
			table.Versions = append(table.Versions, def)
		}
		m.Tables = append(m.Tables, table)
	}
	m.Finished = time.Now().UTC()
	b, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return nil, err
	}
	if err := fsutil.WriteFileSync(filepath.Join(tmp, ManifestName), append(b, '\n')); err != nil {
		return nil, err
	}
	if err := os.Rename(tmp, filepath.Join(dir, m.ID)); err != nil {
		return nil, err
	}
	return m, syncDir(dir)
}

// backupPartition streams partition p's backup into dir/p{p},
// incremental to since when set.
func (o *Options) backupPartition(ctx context.Context, t *tracker, db string, p int, since *Part, dir string) (Part, error) {
	path := partitionPath("backup", db, p)
	if since != nil {
		path += "?since=" + url.QueryEscape(since.SCN) + "&sinceEntry=" + url.QueryEscape(since.Entry)
	}
	part := Part{Partition: p}
	sub := fmt.Sprintf("p%d", p)
	if err := os.RemoveAll(filepath.Join(dir, sub)); err != nil {
		return part, err
	}
	if err := os.MkdirAll(filepath.Join(dir, sub), 0o755); err != nil {
		return part, err
	}
	resp, err := o.call(ctx, http.MethodGet, path, nil)
	if err != nil {
		return part, err
	}
	defer resp.Body.Close()
	fr := backup.NewFrameReader(resp.Body)
	var (
		buf    []byte
		cur    *os.File
		sum    hash.Hash
		size   int64
		gotInf bool
	)
	defer func() {
		if cur != nil {
			cur.Close()
		}
	}()
	for {
		kind, payload, err := fr.Next(buf)
		if err != nil {
			return part, err
		}
		buf = payload[:0]
		switch kind {
		case backup.FrameInfo:
			var info backup.PartitionInfo
			if err := json.Unmarshal(payload, &info); err != nil {
				return part, fmt.Errorf("backup stream: %w", err)
			}
			part.SCN, part.Entry, part.Incremental, part.Since, part.FullReason = info.SCN, info.Entry, info.Incremental, info.Since, info.FullReason
			gotInf = true
		case backup.FrameChunk:
			if !gotInf {
				return part, errors.New("backup stream: a table before the partition's info")
			}
			if cur == nil {
				name := filepath.Join(sub, fmt.Sprintf("%06d.sst", len(part.Files)))
				if cur, err = os.Create(filepath.Join(dir, name)); err != nil {
					return part, err
				}
				part.Files = append(part.Files, File{Name: filepath.ToSlash(name)})
				sum, size = sha256.New(), 0
			}
			if _, err := cur.Write(payload); err != nil {
				return part, err
			}
			sum.Write(payload)
			size += int64(len(payload))
			t.add(int64(len(payload)))
		case backup.FrameEnd:
			if cur == nil {
				return part, errors.New("backup stream: the end of a table that did not begin")
			}
			err := cur.Sync()
			if cerr := cur.Close(); err == nil {
				err = cerr
			}
			cur = nil
			if err != nil {
				return part, err
			}
			f := &part.Files[len(part.Files)-1]
			f.Bytes, f.SHA256 = size, hex.EncodeToString(sum.Sum(nil))
			t.report(false, "")
		case backup.FrameDone:
			if !gotInf || cur != nil {
				return part, backup.ErrTruncated
			}
			return part, syncDir(filepath.Join(dir, sub))
		default:
			return part, fmt.Errorf("backup stream: unknown frame %q", kind)
		}
	}
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
