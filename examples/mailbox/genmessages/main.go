// Command genmessages writes MailboxDB Message documents as JSON Lines,
// the input of `doppio bulk build` in the README's worked example and,
// scaled up, of the bulk load benchmark. The output is a function of the
// flags alone, so examples/mailbox/messages.jsonl is regenerated with
//
//	go run ./examples/mailbox/genmessages > examples/mailbox/messages.jsonl
package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"strings"
)

func main() {
	n := flag.Int("n", 300, "messages to write")
	mailboxes := flag.Int("mailboxes", 20, "mailboxes the messages are spread over")
	seed := flag.Uint64("seed", 1, "random seed")
	flag.Parse()
	if *n < 0 || *mailboxes < 1 {
		fmt.Fprintln(os.Stderr, "genmessages: want -n >= 0 and -mailboxes >= 1")
		os.Exit(2)
	}
	w := bufio.NewWriterSize(os.Stdout, 1<<20)
	if err := write(w, *n, *mailboxes, *seed); err != nil {
		fmt.Fprintln(os.Stderr, "genmessages:", err)
		os.Exit(1)
	}
	if err := w.Flush(); err != nil {
		fmt.Fprintln(os.Stderr, "genmessages:", err)
		os.Exit(1)
	}
}

// message is one line: the key parts of Message, then its fields.
type message struct {
	MailboxID string `json:"mailboxId"`
	MessageID int64  `json:"messageId"`
	Subject   string `json:"subject"`
	Body      string `json:"body"`
	SenderID  string `json:"senderId"`
	Folder    string `json:"folder"`
	IsInbox   bool   `json:"isInbox"`
	Unread    bool   `json:"unread"`
	CreatedOn int64  `json:"createdOn"`
}

var (
	topics  = []string{"lunch", "release", "budget", "offsite", "review", "invoice", "hiring", "roadmap", "incident", "launch"}
	verbs   = []string{"about", "re:", "fwd:", "question on", "update on", "notes from", "plan for"}
	words   = []string{"the", "team", "meets", "on", "friday", "draft", "attached", "please", "see", "numbers", "for", "next", "quarter", "thanks", "we", "shipped", "fixed", "bug", "in", "replication", "agenda", "follow", "up", "tomorrow"}
	folders = []string{"inbox", "inbox", "inbox", "archive", "sent"}
)

// write writes n messages; message ids count up from 1 in each mailbox.
func write(w io.Writer, n, mailboxes int, seed uint64) error {
	r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	next := make([]int64, mailboxes)
	enc := json.NewEncoder(w)
	const start = 1767225600000 // 2026-01-01T00:00:00Z in milliseconds
	for i := range n {
		mb := r.IntN(mailboxes)
		next[mb]++
		body := make([]string, 8+r.IntN(24))
		for j := range body {
			body[j] = words[r.IntN(len(words))]
		}
		folder := folders[r.IntN(len(folders))]
		m := message{
			MailboxID: fmt.Sprintf("user%04d", mb),
			MessageID: next[mb],
			Subject:   verbs[r.IntN(len(verbs))] + " " + topics[r.IntN(len(topics))],
			Body:      strings.Join(body, " "),
			SenderID:  fmt.Sprintf("user%04d", r.IntN(mailboxes*5)),
			Folder:    folder,
			IsInbox:   folder == "inbox",
			Unread:    r.IntN(3) == 0,
			CreatedOn: start + int64(i)*60_000 + int64(r.IntN(60_000)),
		}
		if err := enc.Encode(m); err != nil {
			return err
		}
	}
	return nil
}
