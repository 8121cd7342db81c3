package deploy

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

// promtool is the path of promtool; the test fails (never skips) without it.
func promtool(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("promtool")
	if err != nil {
		t.Fatalf("promtool not found (%v): install Debian's prometheus (apt-get install prometheus) for promtool", err)
	}
	return p
}

// TestAlertRules checks deploy/alerts.yml with `promtool check rules` and
// runs its unit tests, deploy/alerts_test.yml, with `promtool test rules`:
// every rule fires on the series it is about and stays silent otherwise.
func TestAlertRules(t *testing.T) {
	bin := promtool(t)
	for _, args := range [][]string{
		{"check", "rules", "alerts.yml"},
		{"test", "rules", "alerts_test.yml"},
	} {
		out, err := exec.Command(bin, args...).CombinedOutput()
		if err != nil {
			t.Fatalf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		t.Logf("promtool %s:\n%s", strings.Join(args, " "), out)
	}
}

// TestAlertRulesCoverEveryAlert guards the unit tests against a rule added
// to alerts.yml without a test: every alert name appears in alerts_test.yml.
func TestAlertRulesCoverEveryAlert(t *testing.T) {
	rules := readFile(t, "alerts.yml")
	tests := readFile(t, "alerts_test.yml")
	var names []string
	for _, line := range strings.Split(rules, "\n") {
		if n, ok := strings.CutPrefix(strings.TrimSpace(line), "- alert: "); ok {
			names = append(names, n)
		}
	}
	if len(names) < 7 {
		t.Fatalf("alerts.yml has %d alerts (%v), want the 7 of contract 10.6", len(names), names)
	}
	for _, n := range names {
		if !strings.Contains(tests, "alertname: "+n) {
			t.Errorf("alert %s has no test in alerts_test.yml", n)
		}
	}
}

// readFile returns the contents of a file of this directory.
func readFile(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
