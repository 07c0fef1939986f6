package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// walkthroughBlock is a README shell block the walkthrough test runs.
var walkthroughBlock = regexp.MustCompile("(?s)```sh walkthrough\n(.*?)```")

// walkthroughPrelude stops a block at its first failing command; exit 28
// (curl's --max-time) and 124 (timeout) are how the README ends the
// streams that never end on their own.
const walkthroughPrelude = `set -uo pipefail
trap 'rc=$?; if [ $rc -ne 28 ] && [ $rc -ne 124 ]; then echo "walkthrough: \"$BASH_COMMAND\" failed with status $rc" >&2; exit $rc; fi' ERR
`

// TestREADMEWalkthroughRuns runs each README block marked `sh walkthrough`
// top to bottom against a fresh `doppio dev` (the built binary on PATH),
// so the README cannot rot: a command that fails fails the test, and the
// walkthrough's outcomes are checked.
func TestREADMEWalkthroughRuns(t *testing.T) {
	for _, tool := range []string{"bash", "curl", "jq", "timeout"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("the walkthrough needs %s: %v", tool, err)
		}
	}
	readme, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	blocks := walkthroughBlock.FindAllStringSubmatch(string(readme), -1)
	if len(blocks) != 2 {
		t.Fatalf("%d walkthrough blocks in README.md, want 2 (curl, CLI)", len(blocks))
	}
	examples, err := filepath.Abs("../examples")
	if err != nil {
		t.Fatal(err)
	}
	var outputs []string
	for i, b := range blocks {
		addr := freePort(t)
		dev := startProc(t, nil, binary, "dev", "--data", t.TempDir(), "--http", addr)
		dev.await(t, 60*time.Second, `doppio node ready`)
		url := "http://" + addr
		work := t.TempDir() // the walkthrough's own files (changes.ndjson)
		if err := os.Symlink(examples, filepath.Join(work, "examples")); err != nil {
			t.Fatal(err)
		}
		script := walkthroughPrelude + strings.ReplaceAll(b[1], "http://127.0.0.1:8080", url) + "exit 0\n"
		cmd := exec.Command("bash", "-c", script)
		cmd.Dir = work
		cmd.Env = append(os.Environ(), "PATH="+filepath.Dir(binary)+":"+os.Getenv("PATH"), "DOPPIO_SERVER="+url)
		start := time.Now()
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("walkthrough block %d: %v\n%s", i+1, err, out)
		}
		t.Logf("walkthrough block %d ran in %s", i+1, time.Since(start).Round(time.Millisecond))
		outputs = append(outputs, string(out))
	}
	for _, want := range []string{
		"HTTP/1.1 412",        // the second conditional PATCH
		`"starred"`,           // the evolved schema, kept by the index step
		`"field":"folder"`,    // the index built online
		"X-Doppio-Deleted: 1", // the collection (one message left) deleted
		`"op":"insert"`,       // the bootstrapped change stream
	} {
		if !strings.Contains(outputs[0], want) {
			t.Errorf("the curl walkthrough's output lacks %q:\n%s", want, outputs[0])
		}
	}
	for _, want := range []string{
		"table MailboxDB/Message: created, version 1",
		`"results"`, // deliver-txn.json applied to alice
	} {
		if !strings.Contains(outputs[1], want) {
			t.Errorf("the CLI walkthrough's output lacks %q:\n%s", want, outputs[1])
		}
	}
}
