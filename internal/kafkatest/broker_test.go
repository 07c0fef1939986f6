package kafkatest

import (
	"context"
	"encoding/base64"
	"fmt"
	"net"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// record is what the test compares: a record's place and content.
type record struct {
	partition int32
	offset    int64
	key       string
	value     string
	headers   string
}

func summarize(r *kgo.Record) record {
	var h string
	for _, x := range r.Headers {
		h += fmt.Sprintf("%s=%s;", x.Key, x.Value)
	}
	return record{r.Partition, r.Offset, string(r.Key), string(r.Value), h}
}

func TestBrokerProducesAndConsumes(t *testing.T) {
	const (
		topic      = "doppio.kafkatest"
		partitions = 3
		n          = 100
		group      = "kafkatest-reader"
	)
	b := Start(t)
	b.CreateTopic(t, topic, partitions, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	producer := b.Client(t, kgo.DefaultProduceTopic(topic))
	var sent []*kgo.Record
	for i := range n {
		sent = append(sent, &kgo.Record{
			Key:   fmt.Appendf(nil, "key-%02d", i%17),
			Value: fmt.Appendf(nil, "value-%03d", i),
			Headers: []kgo.RecordHeader{
				{Key: "seq", Value: fmt.Appendf(nil, "%d", i)},
				{Key: "origin", Value: []byte("kafkatest")},
			},
		})
	}
	if err := producer.ProduceSync(ctx, sent...).FirstErr(); err != nil {
		t.Fatalf("producing: %v", err)
	}
	// want holds, per partition, the records in the order they were produced,
	// at consecutive offsets from 0.
	want := map[int32][]record{}
	for _, r := range sent {
		if r.Offset != int64(len(want[r.Partition])) {
			t.Fatalf("record %s went to partition %d offset %d, want offset %d", r.Value, r.Partition, r.Offset, len(want[r.Partition]))
		}
		want[r.Partition] = append(want[r.Partition], summarize(r))
	}
	if len(want) < 2 {
		t.Fatalf("all %d records went to one partition; the per-partition order check needs several", n)
	}

	consumer := b.Client(t,
		kgo.ConsumeTopics(topic),
		kgo.ConsumerGroup(group),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.DisableAutoCommit(),
	)
	got := map[int32][]record{}
	for count := 0; count < n; {
		fetches := consumer.PollFetches(ctx)
		if err := fetches.Err(); err != nil {
			t.Fatalf("consuming after %d of %d records: %v", count, n, err)
		}
		fetches.EachRecord(func(r *kgo.Record) {
			got[r.Partition] = append(got[r.Partition], summarize(r))
			count++
		})
	}
	for p := range int32(partitions) {
		if !slices.Equal(got[p], want[p]) {
			t.Errorf("partition %d:\n got %v\nwant %v", p, got[p], want[p])
		}
	}

	// Committing goes through the group coordinator and its offsets topic,
	// which a single broker can host only with one replica.
	if err := consumer.CommitUncommittedOffsets(ctx); err != nil {
		t.Fatalf("committing: %v", err)
	}
	committed, err := kadm.NewClient(consumer).FetchOffsets(ctx, group)
	if err == nil {
		err = committed.Error()
	}
	if err != nil {
		t.Fatalf("fetching committed offsets: %v", err)
	}
	for p := range int32(partitions) {
		o, _ := committed.Lookup(topic, p)
		if want := int64(len(want[p])); o.At != want {
			t.Errorf("partition %d: committed offset %d, want %d", p, o.At, want)
		}
	}
}

func TestRunOnStoppedBrokersDirRestartsItWithItsRecordsAndAddress(t *testing.T) {
	const topic = "auto-created"
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	dir := t.TempDir()
	b, err := Run(ctx, dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Stop()
	producer := b.Client(t, kgo.DefaultProduceTopic(topic), kgo.AllowAutoTopicCreation())
	if err := producer.ProduceSync(ctx, kgo.StringRecord("before the restart")).FirstErr(); err != nil {
		t.Fatalf("producing to an auto-created topic: %v", err)
	}
	producer.Close()

	if err := b.Stop(); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	if err := b.Stop(); err != nil {
		t.Fatalf("second Stop: %v", err)
	}
	if c, err := net.DialTimeout("tcp", b.Addr(), time.Second); err == nil {
		c.Close()
		t.Fatalf("%s accepts connections after Stop", b.Addr())
	}

	again, err := Run(ctx, dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer again.Stop()
	if again.Addr() != b.Addr() {
		t.Errorf("restarted on %s, want the previous address %s", again.Addr(), b.Addr())
	}
	consumer := again.Client(t, kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	fetches := consumer.PollFetches(ctx)
	if err := fetches.Err(); err != nil {
		t.Fatalf("consuming after the restart: %v", err)
	}
	var got []string
	fetches.EachRecord(func(r *kgo.Record) { got = append(got, string(r.Value)) })
	if want := []string{"before the restart"}; !slices.Equal(got, want) {
		t.Errorf("after the restart the topic holds %q, want %q", got, want)
	}
	if err := again.Stop(); err != nil {
		t.Errorf("Stop after the restart: %v", err)
	}
}

// TestClusterIDsNeverLookLikeAnOption: kafka-storage reads an id starting
// with '-' as an option; one in 64 random ids did, and the broker did not
// start.
func TestClusterIDsNeverLookLikeAnOption(t *testing.T) {
	for range 10_000 {
		id := newClusterID()
		raw, err := base64.RawURLEncoding.DecodeString(id)
		if err != nil || len(raw) != 16 {
			t.Fatalf("cluster id %q: %d bytes, %v", id, len(raw), err)
		}
		if strings.HasPrefix(id, "-") {
			t.Fatalf("cluster id %q starts with '-'", id)
		}
	}
}
