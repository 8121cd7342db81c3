package e2e

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// cliConfig is a valid config for the CLI tests (no daemon is contacted).
const cliConfig = `concurrency: 2
sources:
  - name: alpha
    type: http
    url: http://127.0.0.1:1/alpha
    schedule: "@every 1h"
  - name: beta
    type: exec
    command: ["true"]
    schedule: "@hourly"
`

// Section 1: version, usage errors, exit statuses.
func TestCLIVersionAndUsage(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	env := baseEnv(nil)

	r := runPacer(t, dir, env, "version")
	if r.code != 0 || !strings.Contains(r.stdout+r.stderr, "pacer") {
		t.Errorf("pacer version: want exit 0 and a version line, got %s", r)
	}
	r = runPacer(t, dir, env, "frobnicate")
	if r.code != 2 {
		t.Errorf("unknown command: want exit 2, got %s", r)
	}
	if strings.TrimSpace(r.stderr) == "" {
		t.Errorf("unknown command: want a message on stderr, got %s", r)
	}
	r = runPacer(t, dir, env)
	if r.code != 2 {
		t.Errorf("no command: want exit 2, got %s", r)
	}

	in := newInst(t)
	in.writeConfig(cliConfig)
	for _, args := range [][]string{
		{"status", "-no-such-flag"},
		{"history"},                 // NAME is required
		{"reset"},                   // NAME... or -all-errored
		{"pause"},                   // NAME is required
		{"status", "alpha", "beta"}, // at most one NAME
	} {
		if r := in.cli(args...); r.code != 2 {
			t.Errorf("pacer %v: bad usage, want exit 2, got %s", args, r)
		}
	}
}

// Section 1: validate prints every problem, each line starting with where it is.
func TestCLIValidate(t *testing.T) {
	t.Parallel()
	in := newInst(t)
	in.writeConfig(cliConfig)
	r := in.cli("validate")
	if r.code != 0 {
		t.Fatalf("validate on a good config: want exit 0, got %s", r)
	}

	bad := newInst(t)
	bad.writeConfig(`concurrency: 0
colour: blue
defaults:
  timeout: soon
limits:
  partner-api: {rate: fast}
log:
  level: loud
sources:
  - name: x
    type: http
    url: http://127.0.0.1:1/x
    schedule: "not a schedule"
  - name: y
    type: http
    url: http://127.0.0.1:1/y
    urll: typo
  - type: http
    url: http://127.0.0.1:1/z
    schedule: "61 * * * *"
`)
	r = bad.cli("validate")
	if r.code != 1 {
		t.Fatalf("validate on a bad config: want exit 1, got %s", r)
	}
	lines := nonEmptyLines(r.stderr)
	wantPrefix := []string{
		"sources[name=x].schedule: ",
		"concurrency: ",
		"defaults.timeout: ",
		"limits.partner-api.rate: ",
		"log.level: ",
	}
	for _, p := range wantPrefix {
		if !anyLine(lines, func(l string) bool { return strings.HasPrefix(l, p) }) {
			t.Errorf("validate: no line starting with %q in:\n%s", p, r.stderr)
		}
	}
	// Unknown keys are named (top level and inside a source).
	for _, key := range []string{"colour", "urll"} {
		if !anyLine(lines, func(l string) bool { return strings.Contains(l, key) }) {
			t.Errorf("validate: unknown key %q not named in:\n%s", key, r.stderr)
		}
	}
	if !anyLine(lines, func(l string) bool {
		return strings.HasPrefix(l, "sources[name=y].urll") || strings.HasPrefix(l, "sources[1].urll")
	}) {
		t.Errorf("validate: the unknown key urll should be reported at its path (sources[name=y].urll): \n%s", r.stderr)
	}
	// A source without a name is reported by index.
	if !anyLine(lines, func(l string) bool { return strings.HasPrefix(l, "sources[2].") }) {
		t.Errorf("validate: no line starting with sources[2]. for the nameless third source:\n%s", r.stderr)
	}
	if len(lines) < len(wantPrefix)+2 {
		t.Errorf("validate must report every problem: got %d lines:\n%s", len(lines), r.stderr)
	}

	// run refuses an invalid config the same way.
	r = bad.cli("run")
	if r.code != 1 || !strings.Contains(r.stderr, "concurrency: ") || !strings.Contains(r.stderr, "sources[name=x].schedule: ") {
		t.Errorf("run with an invalid config: want exit 1 and its problems, got %s", r)
	}
	if r := in.cli("run", "extra"); r.code != 2 {
		t.Errorf("run with an argument: want exit 2, got %s", r)
	}
	if r := in.cli("history", "-n", "0", "alpha"); r.code != 2 {
		t.Errorf("history -n 0: want exit 2, got %s", r)
	}

	// An unset ${VAR} is a validation error.
	unset := newInst(t)
	unset.writeConfig(`sources:
  - name: z
    type: http
    url: "http://127.0.0.1:1/z?k=${PACER_E2E_SURELY_UNSET_VAR}"
`)
	r = unset.cli("validate")
	if r.code != 1 || !strings.Contains(r.stderr, "PACER_E2E_SURELY_UNSET_VAR") ||
		!strings.HasPrefix(strings.TrimSpace(r.stderr), "sources[") {
		t.Errorf("validate with an unset ${VAR}: want exit 1 and a sources[...] line naming the variable, got %s", r)
	}
}

func nonEmptyLines(s string) []string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.TrimSpace(l) != "" {
			out = append(out, l)
		}
	}
	return out
}

func anyLine(lines []string, f func(string) bool) bool {
	for _, l := range lines {
		if f(l) {
			return true
		}
	}
	return false
}

// Section 1: status without a daemon, with the store absent and present;
// NAME before or after -json; unknown NAME; -config/--config/$PACER_CONFIG
// and ./config.yaml; trigger without a daemon.
func TestCLIStatusWithoutDaemon(t *testing.T) {
	t.Parallel()
	in := newInst(t)
	in.writeConfig(cliConfig)

	if fileExists(in.storePath()) {
		t.Fatalf("store exists before anything ran")
	}
	all := in.statusAll() // store absent
	if len(all) != 2 {
		t.Fatalf("status -json: want 2 sources, got %v", all)
	}
	for _, name := range []string{"alpha", "beta"} {
		o, ok := all[name]
		if !ok {
			t.Fatalf("status -json: %s missing: %v", name, all)
		}
		if o.State != "pending" || o.Breaker != "closed" || o.ConsecutiveFailures != 0 || o.PollsTotal != 0 {
			t.Errorf("status -json %s of a never-run store: want pending/closed/0, got %s", name, o)
		}
	}
	if all["alpha"].Type != "http" || all["beta"].Type != "exec" || all["alpha"].Schedule != "@every 1h" {
		t.Errorf("status -json: type/schedule wrong: %v", all)
	}
	// Present (status may have created it; a second call must still work).
	if got := in.statusAll(); len(got) != 2 {
		t.Errorf("status -json, second call: %v", got)
	}

	for _, args := range [][]string{{"status", "alpha", "-json"}, {"status", "-json", "alpha"}} {
		r := in.cli(args...)
		var o sourceObj
		if r.code != 0 || json.Unmarshal([]byte(r.stdout), &o) != nil || o.Name != "alpha" {
			t.Errorf("pacer %v: want exit 0 and one object named alpha, got %s", args, r)
		}
	}
	// The table form works too.
	if r := in.cli("status"); r.code != 0 || !strings.Contains(r.stdout, "alpha") || !strings.Contains(r.stdout, "beta") {
		t.Errorf("pacer status: %s", r)
	}

	r := in.cli("status", "-json", "nope")
	if r.code != 1 || strings.TrimSpace(r.stderr) == "" {
		t.Errorf("status of an unknown source: want exit 1 and a message, got %s", r)
	}
	r = in.cli("history", "nope")
	if r.code != 1 {
		t.Errorf("history of an unknown source: want exit 1, got %s", r)
	}

	// --config and -config.
	for _, flagName := range []string{"-config", "--config"} {
		r := runPacer(t, in.cwd, baseEnv(nil), "status", flagName, in.cfgPath, "-json")
		var list []sourceObj
		if r.code != 0 || json.Unmarshal([]byte(r.stdout), &list) != nil || len(list) != 2 {
			t.Errorf("status %s FILE -json: %s", flagName, r)
		}
	}
	// --json works like -json.
	if r := runPacer(t, in.cwd, baseEnv(nil), "status", "--config="+in.cfgPath, "--json", "beta"); r.code != 0 ||
		!strings.Contains(r.stdout, `"beta"`) {
		t.Errorf("status --config=FILE --json beta: %s", r)
	}
	// $PACER_CONFIG is the default.
	r = runPacer(t, in.cwd, baseEnv([]string{"PACER_CONFIG=" + in.cfgPath}), "status", "-json")
	if r.code != 0 || !strings.Contains(r.stdout, `"alpha"`) {
		t.Errorf("status with $PACER_CONFIG: %s", r)
	}
	// -config wins over $PACER_CONFIG.
	r = runPacer(t, in.cwd, baseEnv([]string{"PACER_CONFIG=" + filepath.Join(in.cwd, "missing.yaml")}), "status", "-json", "-config", in.cfgPath)
	if r.code != 0 {
		t.Errorf("status -config FILE with $PACER_CONFIG pointing elsewhere: %s", r)
	}
	// Else ./config.yaml.
	r = runPacer(t, in.dir, baseEnv(nil), "status", "-json")
	if r.code != 0 || !strings.Contains(r.stdout, `"alpha"`) {
		t.Errorf("status with ./config.yaml: %s", r)
	}
	// No config at all: exit 1 with a message.
	r = runPacer(t, in.cwd, baseEnv(nil), "status")
	if r.code != 1 || strings.TrimSpace(r.stderr) == "" {
		t.Errorf("status without any config file: want exit 1 and a message, got %s", r)
	}

	// trigger needs a running daemon and says so.
	r = in.cli("trigger", "alpha")
	if r.code != 1 || !strings.Contains(strings.ToLower(r.stderr), "daemon") {
		t.Errorf("trigger without a daemon: want exit 1 and a message about the daemon, got %s", r)
	}
	// history of a source never polled: empty JSON array.
	r = in.cli("history", "-json", "alpha")
	var recs []histRec
	if r.code != 0 || json.Unmarshal([]byte(r.stdout), &recs) != nil || len(recs) != 0 {
		t.Errorf("history -json of a never polled source: want [], got %s", r)
	}
}

// Section 1: status while the daemon runs, and after it stopped (store present).
func TestCLIStatusWithDaemon(t *testing.T) {
	t.Parallel()
	u := newUpstream(t)
	in := newInst(t)
	in.writeConfig(`concurrency: 2
shutdown_timeout: 5s
sources:
  - {name: up, type: http, url: "` + u.URL("/up") + `", schedule: "@every 1s"}
  - {name: down, type: http, url: "` + u.URL("/down") + `", schedule: "@every 1s", error_after: 0, breaker: {failures: 0}}
`)
	u.Set("/down", behavior{Status: 500})
	d := in.start()
	u.waitArrivals(t, "/up", 2, 5*time.Second)
	u.waitArrivals(t, "/down", 1, 5*time.Second)

	eventually(t, 3*time.Second, "status -json (daemon running) to show up ok and down in backoff", func() error {
		all := in.statusAll()
		if all["up"].State != "ok" || all["up"].PollsTotal < 1 || all["up"].LastSuccessAt == nil {
			return errf("up: %s", all["up"])
		}
		if all["down"].State != "backoff" || all["down"].ConsecutiveFailures < 1 || all["down"].LastError == "" {
			return errf("down: %s", all["down"])
		}
		return nil
	})
	for _, args := range [][]string{{"status", "up", "-json"}, {"status", "-json", "up"}} {
		r := in.cli(args...)
		var o sourceObj
		if r.code != 0 || json.Unmarshal([]byte(r.stdout), &o) != nil || o.Name != "up" {
			t.Errorf("pacer %v with the daemon running: %s", args, r)
		}
	}
	if r := in.cli("status", "-json", "nope"); r.code != 1 {
		t.Errorf("status of an unknown source with the daemon running: want exit 1, got %s", r)
	}
	d.stop(10 * time.Second)

	all := in.statusAll()
	if all["up"].State != "ok" || all["up"].PollsTotal < 2 {
		t.Errorf("status -json after the daemon stopped: up: %s", all["up"])
	}
	if all["down"].State != "backoff" || all["down"].FailuresTotal < 1 {
		t.Errorf("status -json after the daemon stopped: down: %s", all["down"])
	}
	r := in.cli("history", "-json", "up")
	var recs []histRec
	if r.code != 0 || json.Unmarshal([]byte(r.stdout), &recs) != nil || len(recs) < 2 {
		t.Errorf("history -json up after stop: %s", r)
	}
	if r := in.cli("history", "-n", "1", "-json", "up"); r.code != 0 {
		t.Errorf("history -n 1 -json up: %s", r)
	} else if json.Unmarshal([]byte(r.stdout), &recs) != nil || len(recs) != 1 {
		t.Errorf("history -n 1 -json up: want 1 record, got %s", r)
	}
	if r := in.cli("history", "up"); r.code != 0 || strings.Count(r.stdout, "success") < 2 {
		t.Errorf("history up (table): %s", r)
	}
}
