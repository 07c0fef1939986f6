package kafkatest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Client returns a franz-go client bootstrapped from the broker, with opts
// applied after the seed address. It is closed when t ends.
func (b *Broker) Client(t testing.TB, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(b.addr)}, opts...)...)
	if err != nil {
		t.Fatalf("kafkatest: %v", err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// CreateTopic creates a topic with the given partitions, one replica each,
// and topic-level configs (e.g. "max.message.bytes"; nil for none), and
// returns once every partition has a leader, so that producing to it
// succeeds at once. It fails t if the topic cannot be created.
func (b *Broker) CreateTopic(t testing.TB, name string, partitions int32, configs map[string]*string) {
	t.Helper()
	if err := b.createTopic(name, partitions, configs); err != nil {
		t.Fatalf("kafkatest: creating topic %q: %v", name, err)
	}
}

func (b *Broker) createTopic(name string, partitions int32, configs map[string]*string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.addr))
	if err != nil {
		return err
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	if _, err := adm.CreateTopic(ctx, partitions, 1, configs, name); err != nil {
		return err
	}
	// The controller has committed the topic; wait for the broker to serve it.
	for {
		topics, err := adm.ListTopics(ctx, name)
		if err == nil {
			err = topics.Error()
		}
		if err == nil {
			err = leaderless(topics[name], partitions)
		}
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("created but not served: %w", err)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// leaderless reports a partition of topic that has no leader yet.
func leaderless(topic kadm.TopicDetail, partitions int32) error {
	if len(topic.Partitions) != int(partitions) {
		return fmt.Errorf("metadata shows %d of %d partitions", len(topic.Partitions), partitions)
	}
	for _, p := range topic.Partitions {
		if p.Err != nil {
			return fmt.Errorf("partition %d: %w", p.Partition, p.Err)
		}
		if p.Leader < 0 {
			return fmt.Errorf("partition %d has no leader", p.Partition)
		}
	}
	return nil
}
