package query

import (
	"flag"
	"os"
	"strings"
	"testing"
)

var rewrite = flag.Bool("rewrite", false, "rewrite the expected outputs of testdata files")

// testCase is one case of a testdata file:
//
//	# comments
//	input line(s)
//	----
//	expected output line(s)
//	(blank line)
type testCase struct {
	line   int
	input  []string
	output string
}

// runDataDriven runs every case of the file through fn and compares (or,
// with -rewrite, rewrites) the expected outputs.
func runDataDriven(t *testing.T, path string, fn func(input []string) string) {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(raw), "\n")
	var out strings.Builder
	for i := 0; i < len(lines); {
		l := lines[i]
		if l == "" || strings.HasPrefix(l, "#") {
			out.WriteString(l + "\n")
			i++
			continue
		}
		tc := testCase{line: i + 1}
		for ; i < len(lines) && lines[i] != "----"; i++ {
			tc.input = append(tc.input, lines[i])
		}
		if i == len(lines) {
			t.Fatalf("%s:%d: case without ----", path, tc.line)
		}
		i++
		var want []string
		for ; i < len(lines) && lines[i] != ""; i++ {
			want = append(want, lines[i])
		}
		tc.output = strings.Join(want, "\n")
		got := fn(tc.input)
		if got != tc.output && !*rewrite {
			t.Errorf("%s:%d: %s\n got: %s\nwant: %s", path, tc.line, strings.Join(tc.input, " | "), got, tc.output)
		}
		out.WriteString(strings.Join(tc.input, "\n") + "\n----\n" + got + "\n")
	}
	if *rewrite {
		if err := os.WriteFile(path, []byte(strings.TrimSuffix(out.String(), "\n")), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
