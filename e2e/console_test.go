package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"image/png"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/doppio-db/doppio/client/wire"
)

// chromiumPath is where Debian's chromium package puts the browser.
const chromiumPath = "/usr/bin/chromium"

// screenshotsEnv, set to 1, makes the console tests write their
// screenshots into docs/console (the README shows them); otherwise they
// go to a temporary directory.
const screenshotsEnv = "DOPPIO_CONSOLE_SCREENSHOTS"

// ensureChromium installs Debian's chromium when it is missing.
func ensureChromium(t *testing.T) {
	t.Helper()
	if _, err := os.Stat(chromiumPath); err == nil {
		return
	}
	for _, args := range [][]string{
		{"-o", "DPkg::Lock::Timeout=300", "update"},
		{"-o", "DPkg::Lock::Timeout=300", "install", "-y", "--no-install-recommends", "chromium"},
	} {
		cmd := exec.Command("apt-get", args...)
		cmd.Env = append(os.Environ(), "DEBIAN_FRONTEND=noninteractive")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("apt-get %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
}

// browser starts a headless Chromium for the test; the returned context
// drives one tab of it.
func browser(t *testing.T) context.Context {
	t.Helper()
	ensureChromium(t)
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chromiumPath),
		chromedp.NoSandbox, // the tests may run as root
		chromedp.Flag("ignore-certificate-errors", true),
		chromedp.WindowSize(1400, 1000),
	)
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(actx)
	t.Cleanup(func() { cancel(); cancelAlloc() })
	if err := chromedp.Do(ctx, chromedp.Navigate("about:blank")); err != nil {
		t.Fatalf("start chromium: %v", err)
	}
	return ctx
}

// consolePage is one page of the console the tests walk.
type consolePage struct {
	name string // as data-ready names it
	path string // the fragment after /_console
}

// open loads the console afresh at page (a full page load, not a
// fragment change), waits until the page has rendered its data, and
// returns how long that took in the browser since navigation began.
func open(t *testing.T, ctx context.Context, base string, p consolePage) time.Duration {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	err := chromedp.Do(ctx,
		chromedp.Navigate("about:blank"),
		chromedp.Navigate(base+"/_console"+p.path),
	)
	if err != nil {
		t.Fatalf("open %s: %v", p.path, err)
	}
	waitIn(t, ctx, fmt.Sprintf(`document.body.dataset.ready === %q`, p.name), "page "+p.name+" rendered")
	ms, err := chromedp.Run(ctx, chromedp.Evaluate[float64](`window.doppioConsole.loads.at(-1).ms`))
	if err != nil {
		t.Fatal(err)
	}
	return time.Duration(ms * float64(time.Millisecond))
}

// waitIn evaluates a JavaScript condition in the page until it holds; on
// a timeout it fails with the page's text. An evaluation that fails
// (the page is between documents) counts as not yet.
func waitIn(t *testing.T, ctx context.Context, cond, what string) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	var last error
	for time.Now().Before(deadline) {
		ectx, cancel := context.WithTimeout(ctx, 5*time.Second)
		ok, err := chromedp.Run(ectx, chromedp.Evaluate[bool](`!!(`+cond+`)`))
		cancel()
		if err == nil && ok {
			return
		}
		last = err
		time.Sleep(50 * time.Millisecond)
	}
	tctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	text, _ := chromedp.Run(tctx, chromedp.Evaluate[string](`document.body.innerText`))
	t.Fatalf("%s (%s): not within 20s (last error %v)\npage:\n%s", what, cond, last, text)
}

// eval evaluates a JavaScript expression in the page.
func eval[T any](t *testing.T, ctx context.Context, expr string) T {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](expr))
	if err != nil {
		t.Fatalf("%s: %v", expr, err)
	}
	return v
}

// do runs browser actions (typing, clicks).
func do(t *testing.T, ctx context.Context, what string, steps ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	if err := chromedp.Do(ctx, steps...); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

// screenshot saves the page as name.png and checks it is an image of
// the window's width.
func screenshot(t *testing.T, ctx context.Context, dir, name string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	b, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatalf("screenshot %s: %v", name, err)
	}
	cfg, err := png.DecodeConfig(bytes.NewReader(b))
	if err != nil || cfg.Width != 1400 {
		t.Fatalf("screenshot %s: %v, %d px wide", name, err, cfg.Width)
	}
	if err := os.WriteFile(filepath.Join(dir, name+".png"), b, 0o644); err != nil {
		t.Fatal(err)
	}
}

func screenshotDir(t *testing.T) string {
	if os.Getenv(screenshotsEnv) == "1" {
		return filepath.Join("..", "docs", "console")
	}
	return t.TempDir()
}

const orderTable = `{"key":[{"name":"customer","type":"string"},{"name":"id","type":"long"}],
 "schema":{"type":"record","name":"Order","fields":[
  {"name":"total","type":"long","index":"attribute"},
  {"name":"status","type":"string","index":"attribute"},
  {"name":"note","type":"string","default":""}]}}`

// TestConsoleShowsALiveClusterInABrowser walks every page of the web
// console in headless Chromium against a 3-node `doppio dev` holding
// 1,000 partitions: the overview counts the nodes, the document browser
// fetches a document's field, pages a collection and sorts an index
// query, the change stream shows a write made while it tails, a
// datastream paused from its page is paused, a consistency check started
// from the operations page reports its result, the charts fill, and a
// router serves the console and its calls as a node does. Each
// page's load time in the browser is logged (not asserted).
func TestConsoleShowsALiveClusterInABrowser(t *testing.T) {
	ctx := browser(t)
	d := startDevCluster(t)
	base := "http://" + d.nodes["n1"]
	n1 := &devNode{t: t, addr: base}

	// 1,000 partitions in all: 8 in shop, the documents' database, and
	// 992 in big.
	n1.must(201, "PUT", "/_schemas/shop", map[string]any{"partitions": 8, "replicas": 3})
	n1.must(201, "PUT", "/_schemas/shop/Order", orderTable)
	n1.must(201, "PUT", "/_schemas/big", map[string]any{"partitions": 992, "replicas": 1})
	waitFor(t, 60*time.Second, "every partition led", func() (bool, string) {
		var info wire.ClusterInfo
		if err := json.Unmarshal(n1.must(200, "GET", "/_cluster", nil), &info); err != nil {
			return false, err.Error()
		}
		led := 0
		for _, p := range info.Partitions {
			if p.Leader != "" {
				led++
			}
		}
		return len(info.Partitions) == 1000 && led == 1000, fmt.Sprintf("%d partitions, %d led", len(info.Partitions), led)
	})
	for i := 1; i <= 12; i++ {
		status := "open"
		if i%3 == 0 {
			status = "shipped"
		}
		n1.must(201, "PUT", fmt.Sprintf("/shop/Order/alice/%d", i), map[string]any{"total": i * 10, "status": status})
	}
	n1.must(201, "PUT", "/shop/Order/bob/1", map[string]any{"total": 5, "status": "open"})
	// A datastream to a broker that is not there: its status shows the
	// failures, and pause and resume work on it all the same.
	n1.must(201, "PUT", "/_datastreams/orders", map[string]any{
		"database": "shop", "sink": map[string]any{"type": "kafka", "brokers": []string{"127.0.0.1:9"}}})

	shots := screenshotDir(t)
	loads := map[string]time.Duration{}

	// What the pages wait for on the server, for the report beside the
	// load times.
	for _, path := range []string{"/_cluster", "/metrics"} {
		start := time.Now()
		b := n1.must(200, "GET", path, nil)
		t.Logf("GET %-9s answers %7d bytes in %4d ms", path, len(b), time.Since(start).Milliseconds())
	}

	// Overview: three nodes, 1,000 partitions, every one led. The first
	// load warms the browser's cache; the second is measured.
	open(t, ctx, base, consolePage{"overview", "#/overview"})
	loads["overview"] = open(t, ctx, base, consolePage{"overview", "#/overview"})
	if got := eval[string](t, ctx, `document.getElementById('card-nodes').dataset.count`); got != "3" {
		t.Errorf("overview shows %s nodes, want 3", got)
	}
	if got := eval[int](t, ctx, `document.querySelectorAll('#nodes tbody tr').length`); got != 3 {
		t.Errorf("overview lists %d nodes, want 3", got)
	}
	if got := eval[string](t, ctx, `document.getElementById('card-partitions').dataset.count`); got != "1000" {
		t.Errorf("overview shows %s partitions, want 1000", got)
	}
	if got := eval[int](t, ctx, `[...document.querySelectorAll('#partitions canvas.grid')].reduce((n, c) => n + Number(c.dataset.cells), 0)`); got != 1000 {
		t.Errorf("overview draws %d partition cells, want 1000", got)
	}
	// A click on the grid's first cell opens partition 0 of shop.
	xy := eval[[]float64](t, ctx, `(() => {
		const c = document.querySelector('canvas.grid[data-db="shop"]');
		c.scrollIntoView({ block: 'center' });
		const b = c.getBoundingClientRect();
		return [b.left + 3, b.top + 3];
	})()`)
	do(t, ctx, "open a partition", chromedp.MouseClickXY(xy[0], xy[1]))
	waitIn(t, ctx, `document.querySelector('#partition-detail h2')?.textContent === 'Partition shop/0'`, "partition shop/0 opened")
	waitIn(t, ctx, `document.querySelectorAll('#partition-detail tbody tr').length === 3`, "the partition's three replicas listed")
	screenshot(t, ctx, shots, "overview")

	// Databases and tables: fields, their indexes built.
	loads["databases"] = open(t, ctx, base, consolePage{"databases", "#/databases"})
	if got := eval[string](t, ctx, `document.querySelector('section[data-db="shop"] tr[data-key="Order"]').innerText`); !strings.Contains(got, "customer:string, id:long") {
		t.Errorf("databases page, shop.Order row: %q", got)
	}
	loads["table"] = open(t, ctx, base, consolePage{"databases", "#/databases/shop/Order"})
	waitIn(t, ctx, `document.querySelector('#indexes tr[data-key="total"]')?.innerText.includes('ready')`, "the total index shown ready")
	if got := eval[int](t, ctx, `document.querySelectorAll('#fields tbody tr').length`); got != 3 {
		t.Errorf("table page lists %d fields, want 3", got)
	}
	screenshot(t, ctx, shots, "table")

	// Documents: one by key, a collection a page at a time, a sorted
	// index query.
	loads["documents"] = open(t, ctx, base, consolePage{"documents", "#/documents/shop/Order"})
	do(t, ctx, "get alice/7",
		chromedp.SetValue(chromedp.CSS("#key-0"), "alice"),
		chromedp.SetValue(chromedp.CSS("#key-1"), "7"),
		chromedp.Click(chromedp.CSS("#doc-go")))
	waitIn(t, ctx, `document.querySelector('#document td[data-field="total"]')?.innerText === '70'`, "alice/7's total of 70")
	eval[string](t, ctx, `document.getElementById('key-1').value = ''`)
	do(t, ctx, "list alice's orders",
		chromedp.SetValue(chromedp.CSS("#doc-limit"), "5"),
		chromedp.Click(chromedp.CSS("#doc-go")))
	waitIn(t, ctx, `document.getElementById('doc-count')?.dataset.count === '5'`, "a first page of five")
	firstPage := eval[string](t, ctx, `[...document.querySelectorAll('#doc-result tbody tr')].map(r => r.dataset.key).join(' ')`)
	if firstPage != "alice/1 alice/2 alice/3 alice/4 alice/5" {
		t.Errorf("first page %q", firstPage)
	}
	do(t, ctx, "next page", chromedp.Click(chromedp.CSS("#doc-next")))
	waitIn(t, ctx, `document.querySelector('#doc-result tbody tr')?.dataset.key === 'alice/6'`, "the second page from alice/6")
	do(t, ctx, "query alice's open orders by total, largest first",
		chromedp.SetValue(chromedp.CSS("#doc-query"), "status:open"),
		chromedp.SetValue(chromedp.CSS("#doc-sort"), "-total"),
		chromedp.SetValue(chromedp.CSS("#doc-limit"), "3"),
		chromedp.Click(chromedp.CSS("#doc-go")))
	waitIn(t, ctx, `[...document.querySelectorAll('#doc-result tbody tr')].map(r => r.dataset.key).join(' ') === 'alice/11 alice/10 alice/8'`, "the three largest open orders")
	screenshot(t, ctx, shots, "documents")

	// Changes: a write made while the page tails appears in it.
	loads["changes"] = open(t, ctx, base, consolePage{"changes", "#/changes/shop"})
	n1.must(201, "PUT", "/shop/Order/carol/1", map[string]any{"total": 555, "status": "open", "note": "from the test"})
	waitIn(t, ctx, `document.querySelector('#changes tr[data-key="carol/1"] .after')?.innerText.includes('555')`, "carol/1 in the change tail")
	screenshot(t, ctx, shots, "changes")

	// Datastreams: pause from the page, and the cluster has it paused.
	loads["datastreams"] = open(t, ctx, base, consolePage{"datastreams", "#/datastreams/orders"})
	if got := eval[int](t, ctx, `document.querySelectorAll('#datastream tbody tr').length`); got != 8 {
		t.Errorf("datastream status lists %d partitions, want 8", got)
	}
	do(t, ctx, "pause the datastream", chromedp.Click(chromedp.CSS("#datastream-pause")))
	waitIn(t, ctx, `document.querySelector('#datastream section')?.dataset.state === 'paused'`, "the datastream shown paused")
	var ds struct{ State string }
	if err := json.Unmarshal(n1.must(200, "GET", "/_datastreams/orders", nil), &ds); err != nil || ds.State != "paused" {
		t.Errorf("after the page paused it, the datastream is %q (%v)", ds.State, err)
	}
	waitIn(t, ctx, `document.getElementById('datastream-paused')?.innerText.startsWith('8 of 8')`, "every partition shown paused")
	screenshot(t, ctx, shots, "datastreams")
	do(t, ctx, "resume the datastream", chromedp.Click(chromedp.CSS("#datastream-resume")))
	waitIn(t, ctx, `document.querySelector('#datastream section')?.dataset.state === 'running'`, "the datastream shown running")

	// Operations: a consistency check run from the page.
	loads["operations"] = open(t, ctx, base, consolePage{"operations", "#/operations"})
	do(t, ctx, "check shop",
		chromedp.SetValue(chromedp.CSS("#check-db"), "shop"),
		chromedp.Click(chromedp.CSS("#check-start")))
	waitIn(t, ctx, `document.querySelector('#check-result [data-result]')?.dataset.result === 'consistent'`, "shop checked consistent")
	waitIn(t, ctx, `document.getElementById('check-summary')?.innerText.includes('consistent 8')`, "eight partitions' checks summed up")
	screenshot(t, ctx, shots, "operations")

	// Metrics: the charts fill from /metrics.
	loads["metrics"] = open(t, ctx, base, consolePage{"metrics", "#/metrics"})
	waitIn(t, ctx, `/\d/.test(document.querySelector('.chart[data-title="Requests / s"] .now')?.innerText)`, "the request rate charted")
	waitIn(t, ctx, `document.querySelector('.chart[data-title="Requests / s"] path.line') !== null`, "the request rate's line drawn")
	screenshot(t, ctx, shots, "metrics")

	// A router serves the console too, and the pages' calls through it.
	rt := runNode(t, []string{"router", "--etcd", d.etcd, "--http", freePort(t), "--id", "r1"})
	loads["overview via a router"] = open(t, ctx, rt.addr, consolePage{"overview", "#/overview"})
	if got := eval[string](t, ctx, `document.getElementById('card-partitions').dataset.count`); got != "1000" {
		t.Errorf("overview through the router shows %s partitions, want 1000", got)
	}

	for _, p := range []string{"overview", "databases", "table", "documents", "changes", "datastreams", "operations", "metrics", "overview via a router"} {
		t.Logf("console page %-21s loaded in %4d ms (1,000 partitions)", p, loads[p].Milliseconds())
	}
}

// TestConsoleSignsInOnASecureCluster opens the console of a `doppio dev
// --secure` cluster: it asks for a password, signs in through POST
// /_auth/login, and then shows the overview with the token.
func TestConsoleSignsInOnASecureCluster(t *testing.T) {
	ctx := browser(t)
	d := startSecureDev(t)
	waitFor(t, 20*time.Second, "root's password set", func() (bool, string) {
		return strings.Contains(d.log(), "password is in"), d.log()
	})
	pw, err := os.ReadFile(filepath.Join(d.data, "root.password"))
	if err != nil {
		t.Fatal(err)
	}
	base := "https://" + d.nodes["n1"]

	do(t, ctx, "open the console", chromedp.Navigate(base+"/_console#/overview"))
	waitIn(t, ctx, `document.getElementById('login') !== null`, "the login form")
	do(t, ctx, "a wrong password",
		chromedp.SetValue(chromedp.CSS("#login-user"), "root"),
		chromedp.SetValue(chromedp.CSS("#login-password"), "not the password"),
		chromedp.Click(chromedp.CSS(`#login button[type="submit"]`)))
	waitIn(t, ctx, `document.querySelector('#login .error')?.innerText.startsWith('401')`, "the refusal shown")
	screenshot(t, ctx, screenshotDir(t), "login")
	do(t, ctx, "root's password",
		chromedp.SetValue(chromedp.CSS("#login-password"), strings.TrimSpace(string(pw))),
		chromedp.Click(chromedp.CSS(`#login button[type="submit"]`)))
	waitIn(t, ctx, `document.body.dataset.ready === 'overview'`, "the overview after signing in")
	if got := eval[string](t, ctx, `document.getElementById('card-nodes').dataset.count`); got != "3" {
		t.Errorf("overview shows %s nodes, want 3", got)
	}
	if got := eval[string](t, ctx, `document.getElementById('who').innerText`); !strings.Contains(got, "signed in as root") {
		t.Errorf("header says %q", got)
	}
	// The token is the tab's, not a cookie's: no other site can send it.
	if got := eval[string](t, ctx, `document.cookie`); got != "" {
		t.Errorf("cookies: %q", got)
	}

	// Every page's data calls carry the token.
	do(t, ctx, "to the databases", chromedp.Navigate(base+"/_console#/databases"))
	waitIn(t, ctx, `document.body.dataset.ready === 'databases'`, "the databases page with the token")

	// Signing out forgets the token: the next page asks again.
	do(t, ctx, "sign out", chromedp.Click(chromedp.CSS("#logout")))
	waitIn(t, ctx, `document.getElementById('login') !== null`, "the login form after signing out")

}
