package changes_test

import (
	"context"
	"fmt"
	"log"

	"github.com/doppio-db/doppio/client/changes"
)

// A consumer group of one or more instances keeping a search index up to
// date: each instance runs this; the partitions are split among them.
func ExampleConsumer() {
	etcd := []string{"http://127.0.0.1:2379"}
	c := &changes.Consumer{
		Servers:       []string{"http://127.0.0.1:8080", "http://127.0.0.1:8081"},
		DB:            "MailboxDB",
		Tables:        []string{"Message"},
		Bootstrap:     true, // a new group starts from a snapshot
		Store:         &changes.EtcdStore{Endpoints: etcd, Prefix: "/indexer/checkpoints"},
		EtcdEndpoints: etcd,
		Group:         "indexer",
		Handle: func(ctx context.Context, t changes.Txn) error {
			for _, e := range t.Events {
				fmt.Println(e.Partition, e.SCN, e.Op, e.Key) // index e.After, or drop e.Key when e.After is null
			}
			return nil // an error is retried: nothing is skipped
		},
	}
	if err := c.Run(context.Background()); err != nil {
		log.Fatal(err)
	}
}
