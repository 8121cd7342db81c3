package cli

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/pacer-dev/pacer/domain"
	"github.com/pacer-dev/pacer/store"
)

func TestEscapeControls(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"plain text, déjà vu — ok", "plain text, déjà vu — ok"},
		{"", ""},
		{`back\slash`, `back\slash`},
		{"\x1b[2J\x1b[31mred", `\x1b[2J\x1b[31mred`},
		{"a\x00b", `a\x00b`},
		{"line1\nline2\r\tx", `line1\nline2\r\tx`},
		{"del\x7f", `del\x7f`},
		{"csi\u009b2J", `csi\u009b2J`},
		{"bad \xff\xfe utf8", `bad \xff\xfe utf8`},
		{"cut \xe2\x82", `cut \xe2\x82`},
		{"rtl \u202eevil", `rtl \u202eevil`},
		{"bell\a title \x1b]0;pwned\a", `bell\x07 title \x1b]0;pwned\x07`},
	} {
		if got := escapeControls(c.in); got != c.want {
			t.Errorf("escapeControls(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

func TestClip(t *testing.T) {
	nuls := strings.Repeat("\x00", 200)
	for _, c := range []struct {
		in   string
		n    int
		want string
	}{
		{"short", 10, "short"},
		{"exactly ten", 11, "exactly ten"},
		{"0123456789abcdef", 10, "0123456..."},
		// An escape is never cut in two: 3 runes fit, \x00 takes 4.
		{nuls, 10, `\x00...`},
		{"ab\x1b[2Jxyz", 10, `ab\x1b[...`},
		// A multi-byte character is never cut in two.
		{"éééééééééééé", 6, "ééé..."},
	} {
		got := clip(c.in, c.n)
		if got != c.want {
			t.Errorf("clip(%q, %d) = %q, want %q", c.in, c.n, got, c.want)
		}
		if utf8.RuneCountInString(got) > c.n || !utf8.ValidString(got) {
			t.Errorf("clip(%q, %d) = %q: over %d runes or invalid UTF-8", c.in, c.n, got, c.n)
		}
	}
}

// rawControl reports whether s holds a byte a terminal acts on: C0 but
// newline, DEL, a C1 control or invalid UTF-8.
func rawControl(s string) bool {
	for _, r := range strings.ReplaceAll(s, "\n", "") {
		if r < 0x20 || r == 0x7f || (r >= 0x80 && r <= 0x9f) || r == utf8.RuneError {
			return true
		}
	}
	return false
}

// Issue 10 item 12: what an upstream, a command or an operator wrote is
// stored as seen, shown escaped in status and history tables and exact in
// their JSON (which holds no raw control character either).
func TestStatusAndHistoryEscapeControls(t *testing.T) {
	dir := t.TempDir()
	cfgPath := filepath.Join(dir, "config.yaml")
	cfg := "store: pacer.db\nsources:\n" +
		"  - {name: up, type: exec, command: [\"true\"], schedule: \"@every 1m\"}\n" +
		"  - {name: held, type: exec, command: [\"true\"], schedule: \"@every 1m\"}\n"
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	lastErr := "GET http://x/: 500 \x1b[2J\x1b[31mgone\u009b" + strings.Repeat("\x00", 200)
	reason := "maint \x1b]0;owned\a\xff"
	st, err := store.Open(filepath.Join(dir, "pacer.db"), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC().Truncate(time.Second)
	code := 500
	err = st.SaveBatch(context.Background(), []domain.SourceState{
		{Name: "up", ConsecutiveFailures: 1, LastError: lastErr, LastRunAt: &now, PollsTotal: 1, FailuresTotal: 1, HistorySeq: 1},
		{Name: "held", Paused: true, PausedReason: reason},
	}, []domain.PollRecord{{Source: "up", Seq: 1, StartedAt: now, Outcome: "failure", Error: lastErr, StatusCode: &code}}, 100)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}

	run := func(args ...string) string {
		t.Helper()
		var out, errOut strings.Builder
		if c := Main(append(args[:1:1], append([]string{"-config", cfgPath}, args[1:]...)...), Env{Stdout: &out, Stderr: &errOut}); c != 0 {
			t.Fatalf("%v: exit %d: %s", args, c, errOut.String())
		}
		return out.String()
	}
	for _, c := range []struct {
		args []string
		want []string
	}{
		{[]string{"status"}, []string{`500 \x1b[2J\x1b[31mgone\u009b\x00`, `paused: maint \x1b]0;owned\x07\xff`}},
		{[]string{"status", "up"}, []string{`\x1b[2J`}},
		{[]string{"history", "up"}, []string{`500 \x1b[2J\x1b[31mgone\u009b\x00\x00`}},
	} {
		out := run(c.args...)
		if rawControl(out) {
			t.Errorf("%v printed a raw control character:\n%q", c.args, out)
		}
		for _, w := range c.want {
			if !strings.Contains(out, w) {
				t.Errorf("%v: output lacks %s:\n%s", c.args, w, out)
			}
		}
	}

	// JSON: no raw control character, and it decodes to what was stored
	// (invalid UTF-8 aside, which encoding/json replaces with U+FFFD).
	out := run("status", "-json")
	if rawControl(out) {
		t.Errorf("status -json printed a raw control character:\n%q", out)
	}
	var objs []struct {
		Name         string `json:"name"`
		LastError    string `json:"last_error"`
		PausedReason string `json:"paused_reason"`
	}
	if err := json.Unmarshal([]byte(out), &objs); err != nil {
		t.Fatalf("status -json: %v\n%s", err, out)
	}
	for _, o := range objs {
		switch o.Name {
		case "up":
			if o.LastError != lastErr {
				t.Errorf("status -json last_error = %q, want %q", o.LastError, lastErr)
			}
		case "held":
			if want := strings.ToValidUTF8(reason, "\uFFFD"); o.PausedReason != want {
				t.Errorf("status -json paused_reason = %q, want %q", o.PausedReason, want)
			}
		}
	}
	out = run("history", "-json", "up")
	var recs []domain.PollRecord
	if err := json.Unmarshal([]byte(out), &recs); err != nil || len(recs) != 1 || recs[0].Error != lastErr || rawControl(out) {
		t.Errorf("history -json: %v, want one record with the error as stored:\n%q", err, out)
	}
}

// Errors the CLI echoes are shown escaped: a config problem quoting a key
// (YAML allows the bidirectional overrides), an error naming a file.
func TestErrorMessagesEscapeControls(t *testing.T) {
	dir := t.TempDir()
	cfgPath := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(cfgPath, []byte("store: pacer.db\nsources: []\n\u202ebogus: 1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"validate", "-config", cfgPath}, `\u202ebogus`},
		{[]string{"status", "-config", filepath.Join(dir, "no\x1b[2J.yaml")}, `no\x1b[2J.yaml`},
	} {
		var out, errOut strings.Builder
		if code := Main(c.args, Env{Stdout: &out, Stderr: &errOut}); code != 1 {
			t.Fatalf("%q: exit %d, want 1", c.args, code)
		}
		if rawControl(errOut.String()) || strings.ContainsRune(errOut.String(), 0x202e) || !strings.Contains(errOut.String(), c.want) {
			t.Errorf("%q: stderr not escaped (want %s):\n%q", c.args, c.want, errOut.String())
		}
	}
}
