package client_test

import (
	"context"
	"fmt"

	"github.com/doppio-db/doppio/client"
)

// serverURL points at the node TestMain starts; in a program it is the
// server's address, such as "http://127.0.0.1:8080".

func Example() {
	ctx := context.Background()
	c := client.New(serverURL)

	// Store a mailbox summary, read it back, then update it only if no one
	// else wrote it in between.
	w, err := c.Put(ctx, "MailboxDB", "Mailbox", client.Key{"ex-alice"}, map[string]any{"owner": "alice"})
	if err != nil {
		panic(err)
	}
	fmt.Println("created:", w.Created)

	d, err := c.Get(ctx, "MailboxDB", "Mailbox", client.Key{"ex-alice"})
	if err != nil {
		panic(err)
	}
	fmt.Println("document:", string(d.Body))

	_, err = c.Patch(ctx, "MailboxDB", "Mailbox", client.Key{"ex-alice"},
		client.Patch{Inc: map[string]any{"unreadCount": 1}}, client.IfMatch(d.ETag))
	fmt.Println("patch error:", err)

	_, err = c.Patch(ctx, "MailboxDB", "Mailbox", client.Key{"ex-alice"},
		client.Patch{Inc: map[string]any{"unreadCount": 1}}, client.IfMatch(d.ETag))
	fmt.Println("stale patch fails its precondition:", client.IsPreconditionFailed(err))
	// Output:
	// created: true
	// document: {"owner":"alice","unreadCount":0,"totalCount":0}
	// patch error: <nil>
	// stale patch fails its precondition: true
}

func ExampleClient_Txn() {
	ctx := context.Background()
	c := client.New(serverURL)
	if _, err := c.Put(ctx, "MailboxDB", "Mailbox", client.Key{"ex-bob"}, map[string]any{"owner": "bob"}); err != nil {
		panic(err)
	}

	// Deliver a message: insert it with an auto-increment key and count it
	// in the mailbox summary, atomically.
	res, err := c.Txn(ctx, "MailboxDB", client.Txn{PartitionKey: "ex-bob", Ops: []client.TxnOp{
		client.InsertOp("Message", client.Key{"ex-bob"}, map[string]any{"subject": "Hello"}),
		client.PatchOp("Mailbox", client.Key{"ex-bob"}, client.Patch{Inc: map[string]any{"unreadCount": 1, "totalCount": 1}}),
	}})
	if err != nil {
		panic(err)
	}
	fmt.Println("message key:", res.Results[0].Key)

	d, _ := c.Get(ctx, "MailboxDB", "Mailbox", client.Key{"ex-bob"}, client.Fields("unreadCount", "totalCount"))
	fmt.Println("summary:", string(d.Body))
	// Output:
	// message key: [ex-bob 1]
	// summary: {"unreadCount":1,"totalCount":1}
}

func ExampleClient_ListAll() {
	ctx := context.Background()
	c := client.New(serverURL)
	for _, s := range []string{"one", "two", "three"} {
		if _, err := c.Insert(ctx, "MailboxDB", "Message", client.Key{"ex-carol"}, map[string]any{"subject": s}); err != nil {
			panic(err)
		}
	}
	// Pages of two, followed transparently.
	for d, err := range c.ListAll(ctx, "MailboxDB", "Message", client.Key{"ex-carol"}, client.ListOptions{Limit: 2, Fields: []string{"subject"}}) {
		if err != nil {
			panic(err)
		}
		fmt.Println(d.Key, string(d.Body))
	}
	// Output:
	// [ex-carol 1] {"subject":"one"}
	// [ex-carol 2] {"subject":"two"}
	// [ex-carol 3] {"subject":"three"}
}

func ExampleIsNotFound() {
	_, err := client.New(serverURL).Get(context.Background(), "MailboxDB", "Mailbox", client.Key{"nobody"})
	fmt.Println(client.IsNotFound(err))
	fmt.Println(err)
	// Output:
	// true
	// doppio: 404 Not found: document Mailbox ["nobody"] does not exist
}
