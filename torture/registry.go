package torture

import (
	"fmt"
	"strings"
)

// workloadMakers make a fresh instance of each workload, by name, in the
// order they run and are reported.
var workloadMakers = []struct {
	name string
	make func() Workload
}{
	{"register", func() Workload { return &Register{} }},
	{"bank", func() Workload { return &Bank{} }},
	{"counter", func() Workload { return &Counter{} }},
	{"set", func() Workload { return &Set{} }},
	{"changelog", func() Workload { return &Changelog{} }},
	{"bulk", func() Workload { return &Bulk{} }},
	{"derived", func() Workload { return &Derived{} }},
	{"cache", func() Workload { return &Cache{} }},
}

// WorkloadNames lists every workload.
func WorkloadNames() []string {
	var out []string
	for _, m := range workloadMakers {
		out = append(out, m.name)
	}
	return out
}

// NewWorkloads makes fresh workloads from a comma-separated list of names,
// or all of them for "all" or "".
func NewWorkloads(list string) ([]Workload, error) {
	if list == "" || list == "all" {
		list = strings.Join(WorkloadNames(), ",")
	}
	var out []Workload
	for _, name := range strings.Split(list, ",") {
		found := false
		for _, m := range workloadMakers {
			if m.name == strings.TrimSpace(name) {
				out = append(out, m.make())
				found = true
			}
		}
		if !found {
			return nil, fmt.Errorf("no workload %q (have %s)", name, strings.Join(WorkloadNames(), ", "))
		}
	}
	return out, nil
}
