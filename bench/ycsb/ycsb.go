package main

import (
	"bufio"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
)

// workload is one of YCSB's core workloads: the properties of its standard
// file (workloads/workload[a-f] of the YCSB distribution), passed with -p.
type workload struct {
	Name  string
	Title string
	Props map[string]string
}

// workloads are YCSB's A-F with the standard files' settings; readallfields
// and the field count and length come from the run's common properties.
var workloads = []workload{
	{"A", "update heavy: 50% read, 50% update, zipfian", map[string]string{
		"readproportion": "0.5", "updateproportion": "0.5", "scanproportion": "0", "insertproportion": "0", "requestdistribution": "zipfian"}},
	{"B", "read mostly: 95% read, 5% update, zipfian", map[string]string{
		"readproportion": "0.95", "updateproportion": "0.05", "scanproportion": "0", "insertproportion": "0", "requestdistribution": "zipfian"}},
	{"C", "read only: 100% read, zipfian", map[string]string{
		"readproportion": "1", "updateproportion": "0", "scanproportion": "0", "insertproportion": "0", "requestdistribution": "zipfian"}},
	{"F", "read-modify-write: 50% read, 50% read-modify-write, zipfian", map[string]string{
		"readproportion": "0.5", "updateproportion": "0", "scanproportion": "0", "insertproportion": "0", "readmodifywriteproportion": "0.5", "requestdistribution": "zipfian"}},
	{"D", "read latest: 95% read, 5% insert, latest", map[string]string{
		"readproportion": "0.95", "updateproportion": "0", "scanproportion": "0", "insertproportion": "0.05", "requestdistribution": "latest"}},
	{"E", "short ranges: 95% scan (uniform 1-100 records), 5% insert, zipfian", map[string]string{
		"readproportion": "0", "updateproportion": "0", "scanproportion": "0.95", "insertproportion": "0.05", "requestdistribution": "zipfian",
		"maxscanlength": "100", "scanlengthdistribution": "uniform"}},
}

func workloadByName(name string) (workload, bool) {
	for _, w := range workloads {
		if strings.EqualFold(w.Name, name) {
			return w, true
		}
	}
	return workload{}, false
}

// opStats are one operation type's figures from YCSB's summary; latencies
// in microseconds, as YCSB prints them.
type opStats struct {
	Count  int64
	Avg    float64
	P50    float64
	P99    float64
	P999   float64
	OK     int64
	Errors int64 // operations that returned anything but OK
}

// ycsbOutput is YCSB's summary of one run (the lines "[SECTION], metric, value").
type ycsbOutput struct {
	RunTimeMS  float64
	Throughput float64
	Ops        map[string]*opStats
}

// parseYCSB reads YCSB's text summary. Operations that failed are counted
// twice by YCSB (as "[X], Return=ERROR" and under "[X-FAILED]"); we take
// the Return= lines.
func parseYCSB(r io.Reader) (ycsbOutput, error) {
	out := ycsbOutput{Ops: map[string]*opStats{}}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	seen := false
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "[") {
			continue
		}
		parts := strings.SplitN(line, ", ", 3)
		if len(parts) != 3 {
			continue
		}
		sec := strings.Trim(parts[0], "[]")
		metric := parts[1]
		v, err := strconv.ParseFloat(strings.TrimSpace(parts[2]), 64)
		if err != nil {
			continue
		}
		if sec == "OVERALL" {
			switch metric {
			case "RunTime(ms)":
				out.RunTimeMS, seen = v, true
			case "Throughput(ops/sec)":
				out.Throughput = v
			}
			continue
		}
		if strings.HasPrefix(sec, "TOTAL_GC") || sec == "CLEANUP" || strings.HasSuffix(sec, "-FAILED") {
			continue
		}
		o := out.Ops[sec]
		if o == nil {
			o = &opStats{}
			out.Ops[sec] = o
		}
		switch {
		case metric == "Operations":
			o.Count = int64(v)
		case metric == "AverageLatency(us)":
			o.Avg = v
		case metric == "50thPercentileLatency(us)":
			o.P50 = v
		case metric == "99thPercentileLatency(us)":
			o.P99 = v
		case metric == "99.9PercentileLatency(us)":
			o.P999 = v
		case metric == "Return=OK":
			o.OK = int64(v)
		case strings.HasPrefix(metric, "Return="):
			o.Errors += int64(v)
		}
	}
	if err := sc.Err(); err != nil {
		return out, err
	}
	if !seen {
		return out, fmt.Errorf("no [OVERALL] summary in YCSB's output")
	}
	return out, nil
}

func (o ycsbOutput) opNames() []string {
	var names []string
	for n := range o.Ops {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

func (o ycsbOutput) errors() int64 {
	var n int64
	for _, s := range o.Ops {
		n += s.Errors
	}
	return n
}
