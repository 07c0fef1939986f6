package datastream

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/doppio-db/doppio/internal/changes"
	"github.com/doppio-db/doppio/internal/keys"
	"github.com/doppio-db/doppio/internal/partition"
	"github.com/doppio-db/doppio/internal/schema"
)

// Record headers. Every record carries its transaction's SCN, so a
// consumer can drop what an at-least-once redelivery sends again.
const (
	HeaderSCN           = "doppio-scn"            // "g:s" of the transaction
	HeaderTxnIndex      = "doppio-txn-index"      // the event's index within its transaction (as the stream carries it)
	HeaderTxnEnd        = "doppio-txn-end"        // "true" on the transaction's last event
	HeaderPartition     = "doppio-partition"      // the Doppio partition
	HeaderTable         = "doppio-table"          // the table
	HeaderOp            = "doppio-op"             // insert, update or delete
	HeaderSchemaVersion = "doppio-schema-version" // Avro values: the writer version of the value
	HeaderDatabase      = "doppio-database"
	HeaderSnapshot      = "doppio-snapshot" // "true" on the documents of a "from":"snapshot" stream's snapshot
)

// recordTimeout bounds how long a record may wait for Kafka (retried
// meanwhile by the client) before its task counts a failure. It bounds
// the produce call, not the client's delivery timeout, which franz-go
// measures from the record's timestamp: a commit or a document older
// than that timed out at once.
const recordTimeout = 15 * time.Second

// kafkaSink produces one datastream's records. One client serves every
// task of the stream on a node; its idempotent producer keeps records in
// order per Kafka partition across retries, and fails every record
// buffered for a partition after one that failed, so a partition never
// gets a later record without an earlier one.
type kafkaSink struct {
	def   Definition
	cl    *kgo.Client
	admin *kadm.Client

	mu     sync.Mutex
	topics map[string]bool // known to exist
}

func newKafkaSink(def Definition, clientID string) (*kafkaSink, error) {
	opts := []kgo.Opt{
		kgo.SeedBrokers(def.Sink.Brokers...),
		kgo.ClientID(clientID),
		kgo.RecordPartitioner(kgo.StickyKeyPartitioner(nil)), // murmur2 of the key, as Kafka's Java client
		kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.ProducerLinger(2 * time.Millisecond),
		kgo.ProduceRequestTimeout(10 * time.Second),
		kgo.UnknownTopicRetries(20),
	}
	if t := def.Sink.TLS; t != nil {
		cfg, err := t.config()
		if err != nil {
			return nil, err
		}
		opts = append(opts, kgo.DialTLSConfig(cfg))
	}
	if a := def.Sink.SASL; a != nil {
		mech, err := a.mechanism()
		if err != nil {
			return nil, err
		}
		opts = append(opts, kgo.SASL(mech))
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return nil, err
	}
	return &kafkaSink{def: def, cl: cl, admin: kadm.NewClient(cl), topics: map[string]bool{}}, nil
}

func (s *kafkaSink) close() { s.cl.Close() }

// ensureTopics creates the topics that do not exist yet.
func (s *kafkaSink) ensureTopics(ctx context.Context, topics []string) error {
	s.mu.Lock()
	var missing []string
	for _, t := range topics {
		if !s.topics[t] {
			missing = append(missing, t)
		}
	}
	s.mu.Unlock()
	if len(missing) == 0 {
		return nil
	}
	parts, rf := int32(-1), int16(-1)
	if s.def.Sink.TopicPartitions > 0 {
		parts = int32(s.def.Sink.TopicPartitions)
	}
	if s.def.Sink.ReplicationFactor > 0 {
		rf = int16(s.def.Sink.ReplicationFactor)
	}
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	resp, err := s.admin.CreateTopics(cctx, parts, rf, nil, missing...)
	if err != nil {
		return s.def.Sink.explain(fmt.Errorf("create topics %v: %w", missing, err))
	}
	for _, t := range missing {
		r, ok := resp[t]
		if !ok {
			return fmt.Errorf("create topic %s: no answer", t)
		}
		if r.Err != nil && !errors.Is(r.Err, kerr.TopicAlreadyExists) {
			return fmt.Errorf("create topic %s: %w %s", t, r.Err, r.ErrMessage)
		}
	}
	s.mu.Lock()
	for _, t := range missing {
		s.topics[t] = true
	}
	s.mu.Unlock()
	return nil
}

// deliver turns events into records and produces them.
func (s *kafkaSink) deliver(ctx context.Context, _ TaskID, evs []changes.Event, tables func(string) (*schema.Table, error)) error {
	recs, err := Records(&s.def, evs, tables)
	if err != nil {
		return err
	}
	return s.produce(ctx, recs)
}

// produce delivers records and waits until Kafka acknowledged them all;
// the first failure is returned.
func (s *kafkaSink) produce(ctx context.Context, recs []*kgo.Record) error {
	topics := map[string]bool{}
	var list []string
	for _, r := range recs {
		if !topics[r.Topic] {
			topics[r.Topic] = true
			list = append(list, r.Topic)
		}
	}
	if err := s.ensureTopics(ctx, list); err != nil {
		return err
	}
	var first error
	pctx, cancel := context.WithTimeout(ctx, recordTimeout)
	defer cancel()
	for _, res := range s.cl.ProduceSync(pctx, recs...) {
		if res.Err != nil {
			if first == nil {
				first = s.def.Sink.explain(fmt.Errorf("kafka: produce to %s: %w", res.Record.Topic, res.Err))
			}
			// The topic may have been deleted: check again next round.
			s.mu.Lock()
			delete(s.topics, res.Record.Topic)
			s.mu.Unlock()
		}
	}
	return first
}

// Records turns a batch of change events into Kafka records as def says:
// keyed by the document group (the partition key, as text; Debezium's
// key struct in debezium-json), with the doppio-* headers, valued by the
// event's JSON, the post-image in Avro, or Debezium's envelope. A batch
// holds whole transactions. tables resolves a table's schema.
func Records(def *Definition, evs []changes.Event, tables func(string) (*schema.Table, error)) ([]*kgo.Record, error) {
	return records(def, evs, tables, 0)
}

// records is Records for a batch whose first event has transaction index
// first: a chunk of a snapshot goes on from the previous chunk.
func records(def *Definition, evs []changes.Event, tables func(string) (*schema.Table, error), first int) ([]*kgo.Record, error) {
	out := make([]*kgo.Record, 0, len(evs))
	index := 0
	var (
		dbz     *debezium
		inTable map[string]int // events of the transaction so far, per table
	)
	if def.Sink.Format == FormatDebezium {
		dbz, inTable = newDebezium(def, time.Now().UnixMilli()), map[string]int{}
	}
	for i := range evs {
		ev := &evs[i]
		switch {
		case i == 0:
			index = first
		case evs[i-1].SCN == ev.SCN && !evs[i-1].TxnEnd:
			index++
		default:
			index = 0
			clear(inTable)
		}
		// A table's drop or replace has no key (and a dropped table is
		// gone from the catalog): its record is unkeyed and carries the
		// event's JSON.
		drop := ev.Op == partition.OpDrop || ev.Op == partition.OpReplace
		var (
			t   *schema.Table
			key []byte
			err error
		)
		if !drop {
			if t, err = tables(ev.Table); err != nil {
				return nil, err
			}
			if key, err = groupKey(ev.Key); err != nil {
				return nil, err
			}
		}
		r := &kgo.Record{
			Topic:     def.Topic(ev.Table),
			Key:       key,
			Timestamp: time.UnixMilli(ev.Mtime),
			Headers: []kgo.RecordHeader{
				{Key: HeaderSCN, Value: []byte(ev.SCN.String())},
				{Key: HeaderTxnIndex, Value: []byte(strconv.Itoa(index))},
				{Key: HeaderDatabase, Value: []byte(def.Database)},
				{Key: HeaderPartition, Value: []byte(strconv.Itoa(ev.Partition))},
				{Key: HeaderTable, Value: []byte(ev.Table)},
				{Key: HeaderOp, Value: []byte(ev.Op.String())},
			},
		}
		if ev.TxnEnd {
			r.Headers = append(r.Headers, kgo.RecordHeader{Key: HeaderTxnEnd, Value: []byte("true")})
		}
		if ev.Snapshot {
			r.Headers = append(r.Headers, kgo.RecordHeader{Key: HeaderSnapshot, Value: []byte("true")})
		}
		switch {
		case drop:
			if r.Value, err = ev.AppendJSON(nil, nil); err != nil {
				return nil, err
			}
		case def.Sink.Format == FormatDebezium:
			inTable[ev.Table]++
			if r.Key, r.Value, err = dbz.record(ev, t, txnOrder{total: index + 1, table: inTable[ev.Table]}); err != nil {
				return nil, err
			}
		case def.Sink.Format == FormatAvro:
			if ev.After != nil {
				if r.Value, err = avroAtLatest(t, ev.After, int(ev.AfterVersion)); err != nil {
					return nil, err
				}
				r.Headers = append(r.Headers, kgo.RecordHeader{Key: HeaderSchemaVersion, Value: []byte(strconv.Itoa(t.Latest()))})
			}
		default:
			if r.Value, err = ev.AppendJSON(nil, t); err != nil {
				return nil, err
			}
		}
		out = append(out, r)
	}
	return out, nil
}

// groupKey is the record key of an event: its document group's partition
// key (the first key part) as text, so one group's records share a Kafka
// partition, in order.
func groupKey(encoded []byte) ([]byte, error) {
	v, _, err := keys.DecodeOne(encoded)
	if err != nil {
		return nil, fmt.Errorf("event key: %w", err)
	}
	switch x := v.(type) {
	case string:
		return []byte(x), nil
	case int64:
		return strconv.AppendInt(nil, x, 10), nil
	}
	return nil, fmt.Errorf("event key: partition key of type %T", v)
}

// avroAtLatest re-encodes an image written with version as the table's
// latest version.
func avroAtLatest(t *schema.Table, data []byte, version int) ([]byte, error) {
	if version == t.Latest() {
		return data, nil
	}
	doc, err := t.Decode(data, version, t.Latest())
	if err != nil {
		return nil, err
	}
	return t.Encode(doc)
}
