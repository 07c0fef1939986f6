package main

import (
	"bytes"
	"image/png"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/doppio-db/doppio/bench/internal/benchutil"
)

// TestParseYCSBSummary reads a real YCSB 0.17.0 output (PostgreSQL,
// workload F, from a -quick run) and takes every figure from its summary.
func TestParseYCSBSummary(t *testing.T) {
	f, err := os.Open("testdata/workloadF.txt")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	out, err := parseYCSB(f)
	if err != nil {
		t.Fatal(err)
	}
	if out.RunTimeMS != 3150 || out.Throughput != 806.031746031746 {
		t.Fatalf("overall = %v ms, %v ops/s", out.RunTimeMS, out.Throughput)
	}
	want := map[string]opStats{
		"READ":              {Count: 2539, Avg: 4190.94604174872, P50: 1238, P99: 46367, P999: 84031, OK: 2539},
		"READ-MODIFY-WRITE": {Count: 1271, Avg: 12076.452399685288, P50: 5495, P99: 78207, P999: 139775},
		"UPDATE":            {Count: 1271, Avg: 7412.300550747443, P50: 3231, P99: 53535, P999: 75711, OK: 1271},
	}
	if len(out.Ops) != len(want) {
		t.Fatalf("operations %v, want %v", keysOf(out.Ops), want)
	}
	for name, w := range want {
		if got := out.Ops[name]; got == nil || *got != w {
			t.Errorf("%s = %+v, want %+v", name, got, w)
		}
	}
	if out.errors() != 0 {
		t.Errorf("errors = %d", out.errors())
	}
}

func keysOf(m map[string]*opStats) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

// TestParseYCSBCountsFailures: failed operations count once (the Return=
// lines), not again under [X-FAILED]; output without a summary is an error.
func TestParseYCSBCountsFailures(t *testing.T) {
	const text = `[OVERALL], RunTime(ms), 1000
[OVERALL], Throughput(ops/sec), 10.0
[READ], Operations, 10
[READ], 50thPercentileLatency(us), 100
[READ], Return=OK, 7
[READ], Return=NOT_FOUND, 1
[READ], Return=ERROR, 2
[READ-FAILED], Operations, 3
[READ-FAILED], Return=ERROR, 3
`
	out, err := parseYCSB(strings.NewReader(text))
	if err != nil {
		t.Fatal(err)
	}
	if r := out.Ops["READ"]; r == nil || r.OK != 7 || r.Errors != 3 || r.P50 != 100 {
		t.Fatalf("READ = %+v", r)
	}
	if out.errors() != 3 || len(out.Ops) != 1 {
		t.Fatalf("errors %d, ops %v", out.errors(), keysOf(out.Ops))
	}
	if _, err := parseYCSB(strings.NewReader("Loading workload...\n")); err == nil {
		t.Fatal("output without [OVERALL] parsed")
	}
}

// TestReportFromCannedOutput writes the whole report from canned results:
// the tables carry the figures in milliseconds, the ratios are Doppio's over
// the peers', and both charts are PNG images.
func TestReportFromCannedOutput(t *testing.T) {
	f, err := os.Open("testdata/workloadF.txt")
	if err != nil {
		t.Fatal(err)
	}
	pg, err := parseYCSB(f)
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	d := ycsbOutput{Throughput: 1612.06, RunTimeMS: 3000, Ops: map[string]*opStats{
		"READ":              {Count: 5000, P50: 619, P99: 23183, P999: 42015, OK: 5000},
		"READ-MODIFY-WRITE": {Count: 2500, P50: 2747, P99: 39103, P999: 69887},
		"UPDATE":            {Count: 2500, P50: 1615, P99: 26767, P999: 37855, OK: 2500},
	}}
	r := &results{
		Command: "go run ./bench/ycsb -quick", Started: time.Date(2026, 11, 22, 15, 0, 0, 0, time.UTC), Elapsed: time.Minute,
		Machine: machine{Machine: benchutil.Machine{CPUs: 2, CPUModel: "test CPU", RAM: "1.0 GiB", Kernel: "Linux test"}},
		Records: 5000, Fields: 10, FieldLen: 100, Threads: 8, Duration: 3 * time.Second,
		Settings: map[string]string{"doppio-1": "one node", "postgres": "fsync = on"},
	}
	r.Runs = append(r.Runs,
		ycsbRun{out: d, loadBefore: 1, loadAfter: 2, clientCPU: 1200 * time.Millisecond}.as("doppio-1", "F", 8),
		ycsbRun{out: pg, loadBefore: 2, loadAfter: 3}.as("postgres", "F", 8))
	dir := t.TempDir()
	if err := writeReport(r, dir); err != nil {
		t.Fatal(err)
	}
	md, err := os.ReadFile(filepath.Join(dir, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"| Doppio, 1 node | 1612 | 0.62 / 23.2 / 42.0 | 2.75 / 39.1 / 69.9 | 0 | 248 | 1.0 → 2.0 |",
		"| PostgreSQL | 806 | 1.24 / 46.4 / 84.0 | 5.50 / 78.2 / 140 | 0 | – | 2.0 → 3.0 |",
		"| F | 2.00× / 0.50 | – | – | – |",
		"- **PostgreSQL**: fsync = on",
	} {
		if !strings.Contains(string(md), want) {
			t.Errorf("report lacks %q:\n%s", want, md)
		}
	}
	for _, name := range []string{"throughput.png", "read-p99.png"} {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := png.Decode(bytes.NewReader(b)); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "results.json")); err != nil {
		t.Error(err)
	}
}
