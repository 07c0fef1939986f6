// Package deploy holds what an operator deploys beside the binary: the
// Prometheus alerting rules (prometheus/) and the Grafana dashboard
// (grafana/). Its tests run the rules' unit tests with promtool; the
// dashboard's queries are run against a live cluster by the e2e tests.
package deploy

import (
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"

	"github.com/doppio-db/doppio/internal/promtest"
)

// TestAlertRulesPassPromtool checks the alerting rules with promtool and
// runs their unit tests (prometheus/alerts_test.yml), which fire each
// alert and hold it back where it must not fire.
func TestAlertRulesPassPromtool(t *testing.T) {
	tools := promtest.Install(t)
	for _, args := range [][]string{{"check", "rules", "alerts.yml"}, {"test", "rules", "alerts_test.yml"}} {
		cmd := exec.Command(tools.Promtool, args...)
		cmd.Dir = "prometheus"
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
}

// TestEveryAlertIsExplained: each alert the rules define has its section
// in docs/production.md, which the alerts' descriptions link to, and
// has a unit test.
func TestEveryAlertIsExplained(t *testing.T) {
	rules, err := os.ReadFile("prometheus/alerts.yml")
	if err != nil {
		t.Fatal(err)
	}
	tests, err := os.ReadFile("prometheus/alerts_test.yml")
	if err != nil {
		t.Fatal(err)
	}
	doc, err := os.ReadFile("../docs/production.md")
	if err != nil {
		t.Fatal(err)
	}
	alerts := regexp.MustCompile(`(?m)^\s+- alert: (\w+)$`).FindAllStringSubmatch(string(rules), -1)
	if len(alerts) == 0 {
		t.Fatal("no alert found in prometheus/alerts.yml")
	}
	for _, m := range alerts {
		name := m[1]
		if !strings.Contains(string(tests), "alertname: "+name+"\n") {
			t.Errorf("alert %s has no unit test in prometheus/alerts_test.yml", name)
		}
		if !regexp.MustCompile(`(?m)^### ` + name + `$`).Match(doc) {
			t.Errorf("alert %s has no section (### %s) in docs/production.md", name, name)
		}
		if want := "docs/production.md#" + strings.ToLower(name); !strings.Contains(string(rules), want) {
			t.Errorf("alert %s does not link to %s", name, want)
		}
	}
}
