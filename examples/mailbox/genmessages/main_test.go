package main

import (
	"bytes"
	"os"
	"testing"
)

// TestCommittedMessagesAreTheGeneratorsOutput keeps messages.jsonl what
// the README says regenerates it.
func TestCommittedMessagesAreTheGeneratorsOutput(t *testing.T) {
	want, err := os.ReadFile("../messages.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	var got bytes.Buffer
	if err := write(&got, 300, 20, 1); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got.Bytes(), want) {
		t.Fatal("examples/mailbox/messages.jsonl differs from `go run ./examples/mailbox/genmessages`: regenerate it")
	}
}
