package changes_test

import (
	"context"
	"fmt"
	"log"

	"github.com/doppio-db/doppio/client"
	"github.com/doppio-db/doppio/client/changes"
)

// A consumer group of one or more instances keeping a search index up to
// date: each instance runs this; the partitions are split among them.
func ExampleConsumer() {
	etcd := []string{"http://127.0.0.1:2379"}
	c := changes.New(client.New("http://127.0.0.1:8080"), "MailboxDB", func(ctx context.Context, t changes.Txn) error {
		for _, e := range t.Events {
			fmt.Println(e.Partition, e.SCN, e.Op, e.Key) // index e.After, or drop e.Key when e.After is null
		}
		return nil // an error is retried: nothing is skipped
	})
	c.Servers = []string{"http://127.0.0.1:8081"} // failed over to, with the client's settings
	c.Tables = []string{"Message"}
	c.Bootstrap = true // a new group starts from a snapshot
	c.Store = &changes.EtcdStore{Endpoints: etcd, Prefix: "/indexer/checkpoints"}
	c.EtcdEndpoints, c.Group = etcd, "indexer"
	if err := c.Run(context.Background()); err != nil {
		log.Fatal(err)
	}
}
