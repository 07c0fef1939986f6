package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os/exec"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/doppio-db/doppio/client/changes"
)

// changeLine is one line of GET /_changes: an event (the client's wire
// type), a checkpoint-only line or an error.
type changeLine struct {
	changes.Event
	Error *struct {
		Status int    `json:"status"`
		Detail string `json:"detail"`
	} `json:"error"`
	raw string
}

// short renders an event for exact comparison (no checkpoint, no time).
func (c changeLine) short() string {
	s := fmt.Sprintf("p%d %s %s %v %s before=%s after=%s", c.Partition, c.SCN, c.Table, c.Key, c.Op, c.Before, c.After)
	if c.TxnEnd {
		s += " end"
	}
	if c.Snapshot {
		s += " snapshot"
	}
	return s
}

func (c changeLine) seq() int {
	var g, s int
	fmt.Sscanf(c.SCN, "%d:%d", &g, &s)
	return s
}

// changeStream is an open GET /_changes read line by line.
type changeStream struct {
	t      *testing.T
	cancel context.CancelFunc
	lines  chan changeLine
	header http.Header
	last   string // the newest checkpoint read
}

// openChanges opens a stream on n and fails unless it answers 200.
func openChanges(t *testing.T, n *devNode, query string, headers ...string) *changeStream {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, "GET", n.addr+"/_changes/"+query, nil)
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := mode.http.Do(req)
	if err != nil {
		cancel()
		t.Fatalf("open %s: %v", query, err)
	}
	if resp.StatusCode != 200 {
		var b strings.Builder
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			b.WriteString(sc.Text())
		}
		resp.Body.Close()
		cancel()
		t.Fatalf("open %s: status %d: %s", query, resp.StatusCode, b.String())
	}
	s := &changeStream{t: t, cancel: cancel, lines: make(chan changeLine, 1<<16), header: resp.Header}
	go func() {
		defer resp.Body.Close()
		defer close(s.lines)
		br := bufio.NewReaderSize(resp.Body, 1<<20)
		for {
			line, err := br.ReadString('\n')
			if err != nil {
				return
			}
			var c changeLine
			if err := json.Unmarshal([]byte(line), &c); err != nil {
				c.Error = &struct {
					Status int    `json:"status"`
					Detail string `json:"detail"`
				}{0, "not JSON: " + line}
			}
			c.raw = line
			s.lines <- c
		}
	}()
	t.Cleanup(cancel)
	return s
}

// events reads until n events arrived (checkpoint-only lines are noted),
// failing after d.
func (s *changeStream) events(n int, d time.Duration) []changeLine {
	s.t.Helper()
	var out []changeLine
	timeout := time.After(d)
	for len(out) < n {
		select {
		case c, ok := <-s.lines:
			if !ok {
				s.t.Fatalf("stream ended after %d of %d events", len(out), n)
			}
			if c.Error != nil {
				s.t.Fatalf("stream error after %d events: %+v", len(out), *c.Error)
			}
			if c.Checkpoint != "" {
				s.last = c.Checkpoint
			}
			if c.SCN != "" {
				out = append(out, c)
			}
		case <-timeout:
			var got []string
			for _, c := range out {
				got = append(got, c.short())
			}
			s.t.Fatalf("%d of %d events within %v; got:\n%s", len(out), n, d, strings.Join(got, "\n"))
		}
	}
	return out
}

// checkpoint reads until a checkpoint-only line and returns it.
func (s *changeStream) checkpoint(d time.Duration) string {
	s.t.Helper()
	timeout := time.After(d)
	for {
		select {
		case c, ok := <-s.lines:
			if !ok || c.Error != nil {
				s.t.Fatalf("stream ended waiting for a checkpoint: %+v", c)
			}
			if c.SCN != "" {
				s.t.Fatalf("event before the first checkpoint: %s", c.raw)
			}
			if c.Checkpoint != "" {
				s.last = c.Checkpoint
				return c.Checkpoint
			}
		case <-timeout:
			s.t.Fatalf("no checkpoint within %v", d)
		}
	}
}

const noteSchema = `{"key":[{"name":"group","type":"string"}],
 "schema":{"type":"record","name":"Note","fields":[{"name":"text","type":"string","default":""}]}}`

// TestChangeStreamAcrossACluster runs three nodes: writes and
// transactions are streamed in commit order with images and boundaries;
// a stream resumes from any event's checkpoint through another node with
// no gap or duplicate; bootstrap returns the exact snapshot and then the
// log; and a leader killed -9 under load leaves every stream (the one on
// a survivor, and the one on the victim resumed elsewhere) without gap or
// duplicate.
func TestChangeStreamAcrossACluster(t *testing.T) {
	t.Parallel()
	const partitions = 4
	nodes := startCluster(t)
	nodes[0].must(201, "PUT", "/_schemas/cdc", map[string]any{"partitions": partitions, "replicas": 3})
	nodes[0].must(201, "PUT", "/_schemas/cdc/Counter", counterSchema)
	nodes[0].must(201, "PUT", "/_schemas/cdc/Note", noteSchema)
	groups := groupsByPartition(partitions)
	for p, g := range groups {
		mustRetrying503(t, nodes[0].devNode, 201, "PUT", "/cdc/Note/"+g, map[string]any{"text": fmt.Sprint("p", p)}, "X-Doppio-Timeout", "5s")
	}
	waitFor(t, 15*time.Second, "settled", func() (bool, string) { return settled(clusterInfo(t, nodes[0]), partitions, 3) })

	live := openChanges(t, nodes[1].devNode, "cdc")
	live.checkpoint(10 * time.Second)
	// Followers serve the stream: for the partitions this node leads, a
	// follower on another node.
	sources := strings.Split(live.header.Get("X-Doppio-Change-Sources"), ",")
	if len(sources) != partitions {
		t.Fatalf("X-Doppio-Change-Sources: %q", live.header.Get("X-Doppio-Change-Sources"))
	}
	for p, src := range sources {
		if !strings.HasPrefix(src, fmt.Sprintf("%d=", p)) || !strings.HasSuffix(src, "/follower") {
			t.Fatalf("partition %d is read from %q, not a follower (%v)", p, src, sources)
		}
	}

	// Writes through every node; expected events built from the answers.
	var want []string
	scnOf := func(h http.Header) string { return h.Get("X-Doppio-SCN") }
	for p, g := range groups {
		through := nodes[p%3].devNode
		st, h, b := through.do("PUT", "/cdc/Counter/"+g+"/1", map[string]any{"n": 1}, "X-Doppio-Timeout", "5s")
		if st != 201 {
			t.Fatalf("put: %d %s", st, b)
		}
		want = append(want, fmt.Sprintf(`p%d %s Counter [%s 1] insert before=null after={"n":1,"writer":""} end`, p, scnOf(h), g))
		st, h, b = through.do("PATCH", "/cdc/Counter/"+g+"/1", map[string]any{"$inc": map[string]any{"n": 5}}, "X-Doppio-Timeout", "5s")
		if st != 200 {
			t.Fatalf("patch: %d %s", st, b)
		}
		want = append(want, fmt.Sprintf(`p%d %s Counter [%s 1] update before={"n":1,"writer":""} after={"n":6,"writer":""} end`, p, scnOf(h), g))
		txn := map[string]any{"partitionKey": g, "ops": []any{
			map[string]any{"op": "put", "table": "Counter", "key": []any{g, 2}, "document": map[string]any{"n": 2}},
			map[string]any{"op": "delete", "table": "Counter", "key": []any{g, 1}},
			map[string]any{"op": "put", "table": "Note", "key": []any{g}, "document": map[string]any{"text": "x"}},
		}}
		st, _, b = through.do("POST", "/cdc/_txn", txn, "X-Doppio-Timeout", "5s")
		if st != 200 {
			t.Fatalf("txn: %d %s", st, b)
		}
		var res struct{ SCN string }
		json.Unmarshal(b, &res)
		want = append(want,
			fmt.Sprintf(`p%d %s Counter [%s 2] insert before=null after={"n":2,"writer":""}`, p, res.SCN, g),
			fmt.Sprintf(`p%d %s Counter [%s 1] delete before={"n":6,"writer":""} after=null`, p, res.SCN, g),
			fmt.Sprintf(`p%d %s Note [%s] update before={"text":"p%d"} after={"text":"x"} end`, p, res.SCN, g, p))
	}
	got := live.events(len(want), 20*time.Second)
	// Partitions interleave; within one, the order is the commit order.
	byPart := func(ls []string) string {
		sorted := append([]string(nil), ls...)
		sort.SliceStable(sorted, func(i, j int) bool { return sorted[i][:2] < sorted[j][:2] })
		return strings.Join(sorted, "\n")
	}
	var gotShort []string
	for _, c := range got {
		gotShort = append(gotShort, c.short())
	}
	if byPart(gotShort) != byPart(want) {
		t.Fatalf("events:\n%s\nwant:\n%s", byPart(gotShort), byPart(want))
	}

	// Resume from each event's checkpoint through another node: exactly
	// the events after it.
	for _, i := range []int{0, 3, 7, len(got) - 2} {
		rest := openChanges(t, nodes[(i+2)%3].devNode, "cdc?from="+url.QueryEscape(got[i].Checkpoint))
		again := rest.events(len(got)-i-1, 10*time.Second)
		var a, w []string
		for j, c := range again {
			a = append(a, c.short())
			w = append(w, got[i+1+j].short())
		}
		if byPart(a) != byPart(w) {
			t.Fatalf("resumed after event %d:\n%s\nwant:\n%s", i, byPart(a), byPart(w))
		}
		rest.cancel()
	}

	// Filters: one table, one partition.
	only := openChanges(t, nodes[2].devNode, "cdc?tables=Note&partitions=1&from="+url.QueryEscape(live.last))
	mustRetrying503(t, nodes[0].devNode, 200, "PUT", "/cdc/Note/"+groups[1], map[string]any{"text": "only"}, "X-Doppio-Timeout", "5s")
	mustRetrying503(t, nodes[0].devNode, 201, "PUT", "/cdc/Counter/"+groups[1]+"/9", map[string]any{"n": 9}, "X-Doppio-Timeout", "5s")
	mustRetrying503(t, nodes[0].devNode, 200, "PUT", "/cdc/Note/"+groups[0], map[string]any{"text": "other"}, "X-Doppio-Timeout", "5s")
	mustRetrying503(t, nodes[0].devNode, 200, "PUT", "/cdc/Note/"+groups[1], map[string]any{"text": "only2"}, "X-Doppio-Timeout", "5s")
	fe := only.events(2, 10*time.Second)
	if fe[0].Table != "Note" || string(fe[0].After) != `{"text":"only"}` || fe[1].Partition != 1 || string(fe[1].After) != `{"text":"only2"}` || fe[1].seq() != fe[0].seq()+2 {
		t.Fatalf("filtered events: %s / %s", fe[0].raw, fe[1].raw)
	}
	only.cancel()

	// Bootstrap: every current document of the selected table at one SCN
	// per partition, then the log from there.
	boot := openChanges(t, nodes[0].devNode, "cdc?bootstrap=true&tables=Counter")
	snap := boot.events(partitions+1, 10*time.Second) // [g 2] everywhere, [g 9] in partition 1
	var snapShort []string
	for _, c := range snap {
		if !c.Snapshot || c.Checkpoint != "" || c.Op != "insert" || c.Before == nil || string(c.Before) != "null" {
			t.Fatalf("snapshot event: %s", c.raw)
		}
		snapShort = append(snapShort, fmt.Sprintf("p%d %v %s %v", c.Partition, c.Key, c.After, c.TxnEnd))
	}
	sort.Strings(snapShort)
	var wantSnap []string
	for p, g := range groups {
		if p == 1 {
			wantSnap = append(wantSnap, fmt.Sprintf(`p1 [%s 2] {"n":2,"writer":""} false`, g), fmt.Sprintf(`p1 [%s 9] {"n":9,"writer":""} true`, g))
			continue
		}
		wantSnap = append(wantSnap, fmt.Sprintf(`p%d [%s 2] {"n":2,"writer":""} true`, p, g))
	}
	sort.Strings(wantSnap)
	if strings.Join(snapShort, "\n") != strings.Join(wantSnap, "\n") {
		t.Fatalf("snapshot:\n%s\nwant:\n%s", strings.Join(snapShort, "\n"), strings.Join(wantSnap, "\n"))
	}
	boot.checkpoint(10 * time.Second) // the bootstrap is complete
	mustRetrying503(t, nodes[0].devNode, 201, "PUT", "/cdc/Counter/"+groups[2]+"/3", map[string]any{"n": 3}, "X-Doppio-Timeout", "5s")
	after := boot.events(1, 10*time.Second)[0]
	if after.Snapshot || after.Checkpoint == "" || after.short() != fmt.Sprintf(`p2 %s Counter [%s 3] insert before=null after={"n":3,"writer":""} end`, after.SCN, groups[2]) {
		t.Fatalf("after the bootstrap: %s", after.raw)
	}
	boot.cancel()

	// Kill -9 the node leading the most partitions while writers run; a
	// stream on a survivor and a stream on the victim (resumed elsewhere)
	// must both carry every acknowledged write exactly once, in order.
	info := clusterInfo(t, nodes[0])
	led := map[string]int{}
	for _, p := range info.Partitions {
		led[p.Leader]++
	}
	victim := nodes[0]
	for _, n := range nodes {
		if led[n.id] > led[victim.id] {
			victim = n
		}
	}
	var survivors []*clusterNode
	for _, n := range nodes {
		if n != victim {
			survivors = append(survivors, n)
		}
	}
	// The survivor's stream starts with a bootstrap: once it is complete,
	// a source failing must not start it again.
	onSurvivor := openChanges(t, survivors[0].devNode, "cdc?tables=Counter&bootstrap=true")
	startSurv := ""
	for timeout := time.After(10 * time.Second); startSurv == ""; {
		select {
		case c := <-onSurvivor.lines:
			if c.Error != nil || (c.SCN != "" && !c.Snapshot) {
				t.Fatalf("bootstrap: %s", c.raw)
			}
			startSurv = c.Checkpoint
		case <-timeout:
			t.Fatal("bootstrap did not complete within 10s")
		}
	}
	onVictim := openChanges(t, victim.devNode, "cdc?tables=Counter")
	onVictim.checkpoint(10 * time.Second)
	_ = startSurv

	var (
		mu    sync.Mutex
		acked = map[string]bool{}
		wg    sync.WaitGroup
	)
	ctx, stop := context.WithCancel(context.Background())
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ctx.Err() == nil; i++ {
				g := groups[(i+w)%partitions]
				key := fmt.Sprint(1000*(w+1) + i)
				through := survivors[(i+w)%2]
				for ctx.Err() == nil {
					rctx, rcancel := context.WithTimeout(ctx, 2*time.Second)
					st, _, _, err := through.try(rctx, "PUT", "/cdc/Counter/"+g+"/"+key, map[string]any{"n": i}, "X-Doppio-Timeout", "1s")
					rcancel()
					if err == nil && (st == 201 || st == 200) { // 200: a retry of a write that was applied
						mu.Lock()
						acked[g+" "+key] = true
						mu.Unlock()
						break
					}
					time.Sleep(20 * time.Millisecond)
				}
			}
		}()
	}
	// Read the victim's stream concurrently so that its last checkpoint is
	// as late as possible when it dies.
	var victimEvents []changeLine
	victimDone := make(chan struct{})
	go func() {
		defer close(victimDone)
		for c := range onVictim.lines {
			if c.Checkpoint != "" {
				onVictim.last = c.Checkpoint
			}
			if c.SCN != "" {
				victimEvents = append(victimEvents, c)
			}
		}
	}()
	time.Sleep(time.Second)
	t.Logf("killing %s (leads %d partitions)", victim.id, led[victim.id])
	victim.kill()
	<-victimDone
	time.Sleep(2 * time.Second)
	stop()
	wg.Wait()
	mu.Lock()
	n := len(acked)
	mu.Unlock()
	if n == 0 {
		t.Fatal("no write was acknowledged")
	}

	// Every acknowledged write appears exactly once, and each partition's
	// sequence has no gap, on the survivor's stream...
	checkAll := func(name string, evs []changeLine) {
		t.Helper()
		seen := map[string]int{}
		lastSeq := map[int]int{}
		for _, c := range evs {
			if c.Snapshot {
				t.Fatalf("%s: a snapshot event after the bootstrap: %s", name, c.raw)
			}
			// Every transaction here writes one Counter: one event each.
			if l, ok := lastSeq[c.Partition]; ok && c.seq() != l+1 {
				t.Fatalf("%s: partition %d jumps from sequence %d to %d", name, c.Partition, l, c.seq())
			}
			lastSeq[c.Partition] = c.seq()
			if c.Op != "insert" || len(c.Key) != 2 {
				continue // a retried write that had been applied: an update
			}
			k := fmt.Sprintf("%v %v", c.Key[0], c.Key[1])
			seen[k]++
			if seen[k] > 1 {
				t.Fatalf("%s: %s delivered twice", name, c.raw)
			}
		}
		for k := range acked {
			if seen[k] != 1 {
				t.Fatalf("%s: acknowledged write %s seen %d times", name, k, seen[k])
			}
		}
	}
	var survEvents []changeLine
	deadline := time.After(30 * time.Second)
	for missing := true; missing; {
		select {
		case c, ok := <-onSurvivor.lines:
			if !ok || c.Error != nil {
				t.Fatalf("survivor's stream ended: %+v", c)
			}
			if c.SCN != "" {
				survEvents = append(survEvents, c)
			}
			if c.Checkpoint != "" && c.SCN == "" {
				missing = false // a heartbeat: the stream is idle, so caught up
				for k := range acked {
					if !containsKey(survEvents, k) {
						missing = true
						break
					}
				}
			}
		case <-deadline:
			t.Fatalf("survivor's stream: not every acknowledged write within 30s (%d events)", len(survEvents))
		}
	}
	checkAll("survivor's stream", survEvents)

	// ...and on the victim's stream resumed from its last checkpoint.
	resumed := openChanges(t, survivors[1].devNode, "cdc?tables=Counter&from="+url.QueryEscape(onVictim.last))
	deadline = time.After(30 * time.Second)
	all := victimEvents
	for missing := true; missing; {
		select {
		case c, ok := <-resumed.lines:
			if !ok || c.Error != nil {
				t.Fatalf("resumed stream ended: %+v", c)
			}
			if c.SCN != "" {
				all = append(all, c)
			}
			if c.Checkpoint != "" && c.SCN == "" {
				missing = false
				for k := range acked {
					if !containsKey(all, k) {
						missing = true
						break
					}
				}
			}
		case <-deadline:
			t.Fatalf("resumed stream: not every acknowledged write within 30s")
		}
	}
	// Events after the victim's last checkpoint were delivered again by
	// design (the consumer had not checkpointed them): drop them.
	var upTo []changeLine
	for _, c := range victimEvents {
		upTo = append(upTo, c)
		if c.Checkpoint == onVictim.last {
			break
		}
	}
	if len(victimEvents) > 0 && upTo[len(upTo)-1].Checkpoint != onVictim.last {
		upTo = nil // the last checkpoint was a heartbeat after every event
		upTo = victimEvents
	}
	checkAll("victim's stream resumed elsewhere", append(upTo, all[len(victimEvents):]...))
	t.Logf("%d acknowledged writes across the kill; survivor's stream %d events, victim's %d + resumed %d",
		n, len(survEvents), len(victimEvents), len(all)-len(victimEvents))
}

func containsKey(evs []changeLine, k string) bool {
	for _, c := range evs {
		if len(c.Key) == 2 && fmt.Sprintf("%v %v", c.Key[0], c.Key[1]) == k {
			return true
		}
	}
	return false
}

// TestChangeStreamOnOneNode covers what needs no cluster: SSE framing and
// Last-Event-ID, precise errors for bad parameters, and the 410 a
// checkpoint gets once retention trimmed past it.
func TestChangeStreamOnOneNode(t *testing.T) {
	t.Parallel()
	cmd := []string{"dev", "--data", t.TempDir(), "--http", freePort(t), "--changelog-max-entries", "3"}
	n := runNode(t, cmd)
	n.must(201, "PUT", "/_schemas/cdc", map[string]any{"partitions": 2, "replicas": 1})
	n.must(201, "PUT", "/_schemas/cdc/Counter", counterSchema)
	groups := groupsByPartition(2)

	// SSE: change events carry the checkpoint as their id.
	sse := openSSE(t, n, "cdc?partitions=0", "")
	n.must(201, "PUT", "/cdc/Counter/"+groups[0]+"/1", map[string]any{"n": 1})
	ev := sse.next(t, "change")
	if !strings.Contains(ev.data, `"op":"insert"`) || ev.id == "" || !strings.Contains(ev.data, `"checkpoint":"`+ev.id+`"`) {
		t.Fatalf("SSE event: %+v", ev)
	}
	sse.close()
	n.must(201, "PUT", "/cdc/Counter/"+groups[0]+"/2", map[string]any{"n": 2})
	again := openSSE(t, n, "cdc?partitions=0", ev.id) // Last-Event-ID resumes
	ev2 := again.next(t, "change")
	if !strings.Contains(ev2.data, `"key":["`+groups[0]+`",2]`) {
		t.Fatalf("SSE resumed with Last-Event-ID: %+v", ev2)
	}
	again.close()

	// Bad input: precise problems, nothing streamed.
	cp := ev.id
	for _, c := range []struct {
		query  string
		status int
		detail string
	}{
		{"nope", 404, `database \"nope\" does not exist`},
		{"cdc?tables=Nope", 404, `table \"Nope\" does not exist`},
		{"cdc?partitions=2", 404, "has no partition 2"},
		{"cdc?partitions=-1", 400, "not a partition number"},
		{"cdc?partitions=", 400, "not a partition number"},
		{"cdc?from=garbage", 400, "not a checkpoint"},
		{"cdc?from=" + cp[:len(cp)-2], 400, "not a checkpoint"},
		{"cdc?from=" + cp + "&partitions=1", 400, "no position in partition 1"},
		{"cdc?bootstrap=yes", 400, "must be true or false"},
		{"cdc?bootstrap=true&from=" + cp, 400, "cannot be combined"},
		{"cdc?limit=3", 400, "unknown parameter"},
	} {
		st, h, b := n.do("GET", "/_changes/"+c.query, nil)
		if st != c.status || h.Get("Content-Type") != "application/problem+json" || !strings.Contains(string(b), c.detail) {
			t.Fatalf("GET /_changes/%s: %d %s %s, want %d %q", c.query, st, h.Get("Content-Type"), b, c.status, c.detail)
		}
	}
	n.must(201, "PUT", "/_schemas/other", map[string]any{"partitions": 2, "replicas": 1})
	if st, _, b := n.do("GET", "/_changes/other?from="+cp, nil); st != 400 || !strings.Contains(string(b), `of database \"cdc\"`) {
		t.Fatalf("checkpoint of another database: %d %s", st, b)
	}

	// Retention: with 3 entries kept, a checkpoint 10 transactions back
	// is gone once the node trims (every 30 s).
	for i := range 10 {
		n.must(201, "PUT", fmt.Sprintf("/cdc/Counter/%s/%d", groups[0], 10+i), map[string]any{"n": i})
	}
	waitFor(t, 45*time.Second, "410 for a trimmed checkpoint", func() (bool, string) {
		// Until the trim, the request streams: give it a moment only.
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		st, h, b, _ := n.try(ctx, "GET", "/_changes/cdc?partitions=0&from="+cp, nil)
		return st == 410 && h.Get("Content-Type") == "application/problem+json" && strings.Contains(string(b), "bootstrap=true"), fmt.Sprintf("%d %s", st, b)
	})
	// Bootstrapping instead works, and is resumable afterwards.
	boot := openChanges(t, n, "cdc?bootstrap=true&partitions=0")
	if evs := boot.events(12, 10*time.Second); !evs[11].TxnEnd || !evs[0].Snapshot {
		t.Fatalf("bootstrap after 410: %v", evs)
	}
	if c := boot.checkpoint(10 * time.Second); c == "" {
		t.Fatal("no checkpoint after the bootstrap")
	}

	// The CLI prints the same stream.
	out, err := exec.Command(binary, mode.args([]string{"changes", "tail", "cdc", "--server", n.addr, "--partitions", "0", "--bootstrap", "--count", "12"})...).Output()
	if err != nil {
		t.Fatalf("doppio changes tail: %v", err)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(lines) != 12 || !strings.Contains(lines[0], `"snapshot":true`) || !strings.Contains(lines[11], `"txnEnd":true`) {
		t.Fatalf("doppio changes tail printed:\n%s", out)
	}
	if out, err := exec.Command(binary, mode.args([]string{"changes", "tail", "nope", "--server", n.addr})...).CombinedOutput(); err == nil || !strings.Contains(string(out), `database "nope" does not exist`) {
		t.Fatalf("doppio changes tail nope: %v %s", err, out)
	}
}

type sseEvent struct{ event, id, data string }

type sseStream struct {
	cancel context.CancelFunc
	events chan sseEvent
}

func openSSE(t *testing.T, n *devNode, query, lastID string) *sseStream {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, "GET", n.addr+"/_changes/"+query, nil)
	req.Header.Set("Accept", "text/event-stream")
	if lastID != "" {
		req.Header.Set("Last-Event-ID", lastID)
	}
	resp, err := mode.http.Do(req)
	if err != nil || resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/event-stream" {
		cancel()
		t.Fatalf("open SSE: %v %v", err, resp)
	}
	s := &sseStream{cancel: cancel, events: make(chan sseEvent, 1024)}
	go func() {
		defer resp.Body.Close()
		defer close(s.events)
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(nil, 1<<20)
		var ev sseEvent
		for sc.Scan() {
			line := sc.Text()
			switch {
			case line == "":
				s.events <- ev
				ev = sseEvent{}
			case strings.HasPrefix(line, "event: "):
				ev.event = line[7:]
			case strings.HasPrefix(line, "id: "):
				ev.id = line[4:]
			case strings.HasPrefix(line, "data: "):
				ev.data = line[6:]
			default:
				s.events <- sseEvent{event: "bad line: " + line}
			}
		}
	}()
	t.Cleanup(cancel)
	return s
}

func (s *sseStream) next(t *testing.T, kind string) sseEvent {
	t.Helper()
	timeout := time.After(10 * time.Second)
	for {
		select {
		case ev, ok := <-s.events:
			if !ok {
				t.Fatal("SSE stream ended")
			}
			if ev.event == "checkpoint" && (ev.id == "" || !strings.Contains(ev.data, ev.id)) {
				t.Fatalf("SSE checkpoint: %+v", ev)
			}
			if ev.event == kind {
				return ev
			}
			if ev.event != "checkpoint" {
				t.Fatalf("SSE: unexpected %+v", ev)
			}
		case <-timeout:
			t.Fatalf("no SSE %s event within 10s", kind)
		}
	}
}

func (s *sseStream) close() { s.cancel() }
