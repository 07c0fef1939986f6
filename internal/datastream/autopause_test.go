package datastream_test

import (
	"context"
	"encoding/binary"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/doppio-db/doppio/internal/datastream"
	"github.com/doppio-db/doppio/internal/datastream/streamcheck"
	"github.com/doppio-db/doppio/internal/kafkatest"
)

// TestFailingPartitionIsAutoPausedAndResumed: one partition's records are
// refused by Kafka (a document larger than its topic's max.message.bytes).
// That partition is auto-paused after the policy's 3 consecutive failures,
// with the broker's error in the status, while the other partitions keep
// delivering; once the topic accepts the record, the partition resumes by
// itself after resumeAfter and delivers everything it held, in order.
// The stream uses per-table topics that it creates itself and Avro values
// (deletes are tombstones).
func TestFailingPartitionIsAutoPausedAndResumed(t *testing.T) {
	broker := kafkatest.Start(t)
	n := startNode(t)
	const partitions = 4
	setupShop(n, partitions)
	n.must(201, "PUT", "/_schemas/shop/Blob", strings.Replace(orderSchema, `"Order"`, `"Blob"`, 1))
	groups := streamcheck.GroupsPer(partitions, 2)
	const bad = 1 // the partition whose Blob will not fit
	limit := "1024"
	broker.CreateTopic(t, "blob.shop.Blob", 1, map[string]*string{"max.message.bytes": &limit})

	def := fmt.Sprintf(`{"database":"shop","sink":{"type":"kafka","brokers":[%q],"topicPrefix":"blob.","format":"avro","topicPartitions":2},
		"autoPause":{"failures":3,"resumeAfter":"4s"}}`, broker.Addr())
	n.must(201, "PUT", "/_datastreams/blobs", def)
	c := consume(t, broker.Addr(), "blob.shop.Order", "blob.shop.Item", "blob.shop.Blob")

	var nextID int64
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	txns := writeRound(n, groups, 2, seed, &nextID)
	// A delete of an Order the group wrote: its record is a tombstone.
	for _, tx := range txns {
		if tx.Group == groups[0][0] {
			txns = append(txns, n.commit(tx.Group, []op{{Table: "Order", ID: tx.Ops[0].ID, Delete: true}}, 0))
			break
		}
	}
	c.WaitFor(30*time.Second, "first round delivered", func(evs []event) (bool, string) { return deliveredAs(evs, txns, true) })

	// The poison: a 4 KB Blob in partition bad, in a transaction with an
	// Order, and more transactions after it everywhere.
	poison := n.commit(groups[bad][0], []op{{Table: "Order", ID: 900_000}, {Table: "Blob", ID: 900_001}}, 4096)
	after := writeRound(n, groups, 1, seed+1, &nextID)
	pausedAt := time.Now()
	st := waitPartition(t, n, "blobs", bad, 20*time.Second, func(p datastream.PartitionStatus) bool {
		return p.State == datastream.StateAutoPaused
	})
	if st.Failures != 3 || st.LastError == nil || !strings.Contains(st.LastError.Message, "MESSAGE_TOO_LARGE") ||
		st.AutoPausedUntil == nil || st.AutoPausedUntil.Before(time.Now()) || st.AutoPausedUntil.After(time.Now().Add(4*time.Second)) {
		t.Fatalf("auto-paused partition status %+v (error %+v)", st, st.LastError)
	}
	t.Logf("partition %d auto-paused %v after the poison, until %v: %s", bad, time.Since(pausedAt).Round(time.Millisecond), st.AutoPausedUntil.Format(time.StampMilli), st.LastError.Message)

	// The other partitions deliver meanwhile.
	var others []txn
	for _, tx := range after {
		if !contains(groups[bad], tx.Group) {
			others = append(others, tx)
		}
	}
	c.WaitFor(10*time.Second, "other partitions deliver while one is auto-paused", func(evs []event) (bool, string) {
		return deliveredAs(evs, append(txns, others...), true)
	})
	for _, p := range n.status("blobs").Partitions {
		if p.Partition != bad && (p.State != datastream.StateRunning || p.Failures != 0) {
			t.Fatalf("partition %d: %+v while partition %d is auto-paused", p.Partition, p, bad)
		}
	}
	for _, e := range c.Events() {
		if e.Group == poison.Group && e.SCN == poison.SCN && e.Table == "Blob" {
			t.Fatalf("the refused Blob record was delivered")
		}
	}

	// The topic now takes the record: the partition resumes after its
	// pause and delivers the poison transaction and what followed it.
	adm := kadm.NewClient(broker.Client(t))
	big := "1048576"
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Op: kadm.SetConfig, Name: "max.message.bytes", Value: &big}}, "blob.shop.Blob"); err != nil {
		t.Fatal(err)
	}
	all := append(append(txns, poison), after...)
	c.WaitFor(30*time.Second, "the auto-paused partition delivers after resumeAfter", func(evs []event) (bool, string) {
		return deliveredAs(evs, all, true)
	})
	resumedBy := time.Now()
	if resumedBy.Before(*st.AutoPausedUntil) {
		t.Fatalf("delivered at %v, before the auto-pause ended at %v", resumedBy, st.AutoPausedUntil)
	}
	evs := c.Events()
	d, err := streamcheck.Dedupe(evs)
	if err == nil {
		err = streamcheck.Check(d, all, true, true)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d records, %d redelivered after the failures", len(evs), d.Dups)
	waitPartition(t, n, "blobs", bad, 10*time.Second, func(p datastream.PartitionStatus) bool {
		return p.State == datastream.StateRunning && p.Failures == 0 && p.Lag.Transactions == 0 && p.LastError != nil
	})

	// Avro values: the post-image at the latest version; a delete is a
	// tombstone.
	for _, e := range evs {
		if e.Op == "delete" {
			if e.Value != nil || e.Version != "" {
				t.Fatalf("delete record %s has value %x, version %q: want a tombstone", e.SCN, e.Value, e.Version)
			}
			continue
		}
		n, pad, err := decodeDoc(e.Value)
		if err != nil || e.Version != "1" || n != int64(e.Index) || (e.Group == poison.Group && e.SCN == poison.SCN) != (len(pad) == 4096) {
			t.Fatalf("record %s #%d of %s: n=%d pad %d bytes version %q err %v", e.SCN, e.Index, e.Table, n, len(pad), e.Version, err)
		}
	}
}

// decodeDoc decodes the Avro binary of {n: long, pad: string}.
func decodeDoc(b []byte) (int64, string, error) {
	n, k := binary.Varint(b)
	if k <= 0 {
		return 0, "", fmt.Errorf("bad n")
	}
	b = b[k:]
	l, k := binary.Varint(b)
	if k <= 0 || int64(len(b)-k) != l {
		return 0, "", fmt.Errorf("bad pad length")
	}
	return n, string(b[k:]), nil
}

// waitPartition polls one partition's status until ok holds.
func waitPartition(t *testing.T, n *testNode, name string, p int, d time.Duration, ok func(datastream.PartitionStatus) bool) datastream.PartitionStatus {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		for _, ps := range n.status(name).Partitions {
			if ps.Partition == p && ok(ps) {
				return ps
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("partition %d of %s not as expected within %v: %+v", p, name, d, n.status(name).Partitions)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
