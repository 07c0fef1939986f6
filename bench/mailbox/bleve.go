package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync"

	"github.com/blevesearch/bleve/v2"
	"github.com/blevesearch/bleve/v2/analysis/analyzer/keyword"
	"github.com/blevesearch/bleve/v2/analysis/analyzer/standard"
	"github.com/blevesearch/bleve/v2/mapping"
	"github.com/blevesearch/bleve/v2/search/query"

	"github.com/doppio-db/doppio/bench/internal/mailboxdata"
)

// bleveSystem keeps one Bleve (scorch) index per mailbox, as the paper kept
// one Lucene index per mailbox, called in-process: no HTTP, no JSON over a
// socket, which favours it.
//
// Durability: scorch's Batch (and Index, which is a one-document Batch)
// returns only after the persister has written the batch's segment
// (zap PersistSegmentBase: write, f.Sync) and committed the new root to its
// bolt file (bolt fsyncs on commit; scorch then calls rootBolt.Sync), unless
// the index config sets "unsafe_batch". We leave it unset, so every write
// here is on disk when it returns; the benchmark checks the config at open.
type bleveSystem struct {
	dir     string
	mapping mapping.IndexMapping

	mu      sync.RWMutex
	indexes map[string]bleve.Index
}

func openBleve(dir string) (*bleveSystem, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	return &bleveSystem{dir: dir, mapping: bleveMapping(), indexes: map[string]bleve.Index{}}, nil
}

// bleveMapping indexes the four fields and stores the whole document in
// one stored-only field, src, so a query returns documents like the others.
func bleveMapping() mapping.IndexMapping {
	body := mapping.NewTextFieldMapping()
	body.Analyzer = standard.Name
	body.Store = false
	body.IncludeInAll = false

	sender := mapping.NewTextFieldMapping()
	sender.Analyzer = keyword.Name
	sender.Store = false
	sender.IncludeInAll = false
	sender.IncludeTermVectors = false

	inbox := mapping.NewBooleanFieldMapping()
	inbox.Store = false
	inbox.IncludeInAll = false

	created := mapping.NewNumericFieldMapping()
	created.Store = false
	created.IncludeInAll = false

	src := mapping.NewTextFieldMapping()
	src.Index = false
	src.Store = true
	src.IncludeInAll = false
	src.IncludeTermVectors = false
	src.DocValues = false

	dm := mapping.NewDocumentStaticMapping()
	dm.AddFieldMappingsAt("body", body)
	dm.AddFieldMappingsAt("senderId", sender)
	dm.AddFieldMappingsAt("isInbox", inbox)
	dm.AddFieldMappingsAt("createdOn", created)
	dm.AddFieldMappingsAt("src", src)

	im := bleve.NewIndexMapping()
	im.DefaultMapping = dm
	im.IndexDynamic = false
	im.StoreDynamic = false
	im.DocValuesDynamic = false
	return im
}

func (s *bleveSystem) Name() string { return "Bleve" }

func (s *bleveSystem) index(mailbox string) (bleve.Index, error) {
	s.mu.RLock()
	idx := s.indexes[mailbox]
	s.mu.RUnlock()
	if idx == nil {
		return nil, fmt.Errorf("bleve: no index for mailbox %s", mailbox)
	}
	return idx, nil
}

// bleveDoc is what Bleve indexes: the four indexed fields and the document.
type bleveDoc struct {
	Body      string  `json:"body"`
	SenderID  string  `json:"senderId"`
	IsInbox   bool    `json:"isInbox"`
	CreatedOn float64 `json:"createdOn"`
	Src       string  `json:"src"`
}

func toBleve(m mailboxdata.Message) (bleveDoc, error) {
	src, err := json.Marshal(m)
	if err != nil {
		return bleveDoc{}, err
	}
	return bleveDocOf(m, src), nil
}

// bleveDocOf is what Bleve indexes of m, whose JSON is src.
func bleveDocOf(m mailboxdata.Message, src []byte) bleveDoc {
	return bleveDoc{Body: m.Body, SenderID: m.SenderID, IsInbox: m.IsInbox, CreatedOn: float64(m.CreatedOn), Src: string(src)}
}

// Load creates the mailbox's index and writes its messages in batches of
// at most 1000.
func (s *bleveSystem) Load(ctx context.Context, mailbox string, msgs []mailboxdata.Message) error {
	// The default index type (scorch) and config: durable batches.
	idx, err := bleve.New(filepath.Join(s.dir, mailbox), s.mapping)
	if err != nil {
		return fmt.Errorf("bleve: create index %s: %w", mailbox, err)
	}
	s.mu.Lock()
	s.indexes[mailbox] = idx
	s.mu.Unlock()
	for start := 0; start < len(msgs); start += 1000 {
		b := idx.NewBatch()
		for i := start; i < min(start+1000, len(msgs)); i++ {
			d, err := toBleve(msgs[i])
			if err != nil {
				return err
			}
			if err := b.Index(strconv.Itoa(i+1), d); err != nil {
				return err
			}
		}
		if err := idx.Batch(b); err != nil {
			return fmt.Errorf("bleve: batch into %s: %w", mailbox, err)
		}
	}
	return nil
}

func (s *bleveSystem) Ready(ctx context.Context) error { return nil }

func (s *bleveSystem) Insert(ctx context.Context, mailbox string, id int64, m mailboxdata.Message) error {
	idx, err := s.index(mailbox)
	if err != nil {
		return err
	}
	d, err := toBleve(m)
	if err != nil {
		return err
	}
	return s.insert(idx, id, d)
}

// insert writes d as one durable batch.
func (s *bleveSystem) insert(idx bleve.Index, id int64, d bleveDoc) error {
	b := idx.NewBatch()
	if err := b.Index(strconv.FormatInt(id, 10), d); err != nil {
		return err
	}
	return idx.Batch(b)
}

func (s *bleveSystem) Inbox(ctx context.Context, mailbox string, limit int) ([]Hit, error) {
	q := bleve.NewBoolFieldQuery(true)
	q.SetField("isInbox")
	return s.search(ctx, mailbox, q, limit)
}

func (s *bleveSystem) Search(ctx context.Context, mailbox, word string, limit int) ([]Hit, error) {
	q := bleve.NewMatchQuery(word)
	q.SetField("body")
	return s.search(ctx, mailbox, q, limit)
}

func (s *bleveSystem) search(ctx context.Context, mailbox string, q query.Query, limit int) ([]Hit, error) {
	idx, err := s.index(mailbox)
	if err != nil {
		return nil, err
	}
	req := bleve.NewSearchRequestOptions(q, limit, 0, false)
	req.SortBy([]string{"-createdOn"})
	req.Fields = []string{"src"}
	res, err := idx.SearchInContext(ctx, req)
	if err != nil {
		return nil, err
	}
	hits := make([]Hit, len(res.Hits))
	for i, h := range res.Hits {
		id, err := parseID(h.ID)
		if err != nil {
			return nil, err
		}
		src, _ := h.Fields["src"].(string)
		if src == "" {
			return nil, fmt.Errorf("bleve: hit %s of %s has no stored document", h.ID, mailbox)
		}
		hits[i] = Hit{ID: id, Doc: []byte(src)}
	}
	return hits, nil
}

func (s *bleveSystem) DiskBytes() int64 { return dirBytes(s.dir) }

func (s *bleveSystem) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	var first error
	for _, idx := range s.indexes {
		if err := idx.Close(); err != nil && first == nil {
			first = err
		}
	}
	s.indexes = nil
	return first
}
