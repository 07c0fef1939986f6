// Package cachecheck compares the cache tier with the source of truth:
// every entry of a table's current cache generation against the state a
// linearizable read of the document answers now. It is a test tool: the
// cache tier's tests and benchmarks run it after a quiet period (one
// bootstrap period), when no entry may show another state.
package cachecheck

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/doppio-db/doppio/internal/cache"
	"github.com/doppio-db/doppio/internal/keys"
	"github.com/doppio-db/doppio/internal/scn"
)

// Source answers a document's current state: its SCN, or that it does
// not exist.
type Source interface {
	Current(ctx context.Context, db, table string, key keys.Tuple) (s scn.SCN, found bool, err error)
}

// Table is one cacheable table to check, at the generation the catalog
// gives it now.
type Table struct {
	Name       string
	Generation int64
}

// Divergence is an entry that shows another state than the source.
type Divergence struct {
	Table     string
	Key       keys.Tuple
	Partition int
	Cached    cache.Entry
	// Source is the document's SCN now; Found false when it does not
	// exist.
	Source scn.SCN
	Found  bool
	// Age is the age bound the tier claims for the entry
	// (now - max(as-of, watermark)).
	Age time.Duration
}

func (d Divergence) String() string {
	cached := "document " + d.Cached.SCN.String()
	if d.Cached.Tombstone() {
		cached = "tombstone " + d.Cached.SCN.String()
	}
	source := "absent"
	if d.Found {
		source = "document " + d.Source.String()
	}
	return fmt.Sprintf("%s %v (partition %d): cached %s, claimed age %s; source %s", d.Table, d.Key, d.Partition, cached, d.Age, source)
}

// Report is the outcome of a check.
type Report struct {
	Checked  int
	Diverged []Divergence
}

// Check compares every entry of tables of database db (of partitions
// partitions) in st with src.
func Check(ctx context.Context, st *cache.Store, src Source, db string, partitions int, tables []Table) (Report, error) {
	var r Report
	for _, tb := range tables {
		err := st.Keys(ctx, db, tb.Generation, tb.Name, func(key []byte) error {
			tuple, err := keys.DecodeTuple(key)
			if err != nil || len(tuple) == 0 {
				return fmt.Errorf("entry key %x of %s: %v", key, tb.Name, err)
			}
			pk, err := keys.EncodeTuple(tuple[:1])
			if err != nil {
				return err
			}
			ref := cache.Ref{DB: db, Generation: tb.Generation, Table: tb.Name, Partition: keys.PartitionOf(pk, partitions), Key: key}
			e, wm, err := st.Get(ctx, ref)
			if errors.Is(err, cache.ErrMiss) {
				return nil // expired since the scan
			}
			if err != nil {
				return err
			}
			cur, found, err := src.Current(ctx, db, tb.Name, tuple)
			if err != nil {
				return err
			}
			r.Checked++
			same := (e.Tombstone() && !found) || (!e.Tombstone() && found && cur == e.SCN)
			if !same {
				r.Diverged = append(r.Diverged, Divergence{
					Table: tb.Name, Key: tuple, Partition: ref.Partition, Cached: e, Source: cur, Found: found, Age: e.Age(time.Now(), e.Vouched(wm, 0)),
				})
			}
			return nil
		})
		if err != nil {
			return r, err
		}
	}
	return r, nil
}

// HTTPSource reads documents with GET /{db}/{table}/{key…} from a node
// or router: a linearizable read, whose X-Doppio-SCN is the document's.
type HTTPSource struct {
	// URL is the base, http://host:port.
	URL    string
	Client *http.Client // nil: http.DefaultClient
}

// Current implements Source.
func (h HTTPSource) Current(ctx context.Context, db, table string, key keys.Tuple) (scn.SCN, bool, error) {
	var b strings.Builder
	b.WriteString(h.URL + "/" + db + "/" + table)
	for _, part := range key {
		b.WriteByte('/')
		switch v := part.(type) {
		case string:
			b.WriteString(url.PathEscape(v))
		case int64:
			b.WriteString(strconv.FormatInt(v, 10))
		default:
			return scn.SCN{}, false, fmt.Errorf("key part %v of type %T", part, part)
		}
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, b.String(), nil)
	if err != nil {
		return scn.SCN{}, false, err
	}
	cl := h.Client
	if cl == nil {
		cl = http.DefaultClient
	}
	resp, err := cl.Do(req)
	if err != nil {
		return scn.SCN{}, false, err
	}
	resp.Body.Close()
	switch resp.StatusCode {
	case http.StatusNotFound:
		return scn.SCN{}, false, nil
	case http.StatusOK:
	default:
		return scn.SCN{}, false, fmt.Errorf("GET %s: %s", b.String(), resp.Status)
	}
	s, err := parseSCN(resp.Header.Get("X-Doppio-SCN"))
	return s, true, err
}

func parseSCN(v string) (scn.SCN, error) {
	g, s, ok := strings.Cut(v, ":")
	gen, err1 := strconv.ParseUint(g, 10, 64)
	seq, err2 := strconv.ParseUint(s, 10, 64)
	if !ok || err1 != nil || err2 != nil {
		return scn.SCN{}, fmt.Errorf("X-Doppio-SCN %q is not g:s", v)
	}
	return scn.SCN{Generation: gen, Sequence: seq}, nil
}
