package export_test

import (
	"context"
	"fmt"
	"log"

	"github.com/doppio-db/doppio/client/export"
)

// Export MailboxDB's messages as JSON Lines, then a day later the changes
// since, from the first export's checkpoint.
func Example() {
	ctx := context.Background()
	m, err := export.Run(ctx, export.Options{
		Server: "http://127.0.0.1:8080", DB: "MailboxDB", Tables: []string{"Message"},
		Dir: "/tmp/mail", Format: export.JSONLines, Parallel: 4, Throttle: 50e6,
	})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(m.Rows, "messages as of", len(m.Partitions), "partition SCNs")

	changes, err := export.Run(ctx, export.Options{
		Server: "http://127.0.0.1:8080", DB: "MailboxDB", Tables: []string{"Message"},
		Dir: "/tmp/mail-1", Format: export.JSONLines, Since: m.Checkpoint,
	})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(changes.Rows, "changes; next time since", changes.Checkpoint)
}
