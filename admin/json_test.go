package admin_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"testing"

	"github.com/pacer-dev/pacer/admin"
)

// EscapeJSON leaves JSON meaning the same (it decodes to the same strings)
// while no DEL or C1 control is left raw; encoding/json escapes C0 itself.
func TestEscapeJSON(t *testing.T) {
	for _, s := range []string{
		"plain", "", "\x1b[2J\x00", "del\x7f", "csi\u009b2J\u0080\u009f", "near \u00a0\u00c2\u0100 ok", "é\u0085\x7f\u009b",
	} {
		enc, err := json.Marshal(map[string]string{"error": s})
		if err != nil {
			t.Fatal(err)
		}
		got := admin.EscapeJSON(enc)
		var back map[string]string
		if err := json.Unmarshal(got, &back); err != nil || back["error"] != s {
			t.Errorf("EscapeJSON(%s) = %s: decodes to %q (%v), want %q", enc, got, back["error"], err, s)
		}
		if bytes.IndexByte(got, 0x7f) >= 0 || bytes.Contains(got, []byte{0x1b}) || bytes.IndexByte(got, 0) >= 0 {
			t.Errorf("EscapeJSON(%q) left a raw control byte: %q", s, got)
		}
		for _, r := range string(got) {
			if r >= 0x80 && r <= 0x9f {
				t.Errorf("EscapeJSON(%q) left raw C1 U+%04X: %q", s, r, got)
			}
		}
	}
	plain := []byte(`{"a":"b"}`)
	if got := admin.EscapeJSON(plain); &got[0] != &plain[0] {
		t.Errorf("EscapeJSON copied JSON that needs no escape")
	}
}

// Issue 10 item 12: a pause reason holding terminal controls is kept as
// given and answered as JSON with no raw control character (C0 escaped by
// encoding/json, DEL and C1 by EscapeJSON).
func TestAPIAnswersHoldNoRawControls(t *testing.T) {
	f := newFixture(t)
	reason := "maint \x1b[2J\x1b]0;owned\a\x7f\u009b done"
	body, err := json.Marshal(map[string]string{"reason": reason})
	if err != nil {
		t.Fatal(err)
	}
	if a := f.post("/api/sources/idle/pause", "Bearer "+token, string(body)); a.code != http.StatusOK {
		t.Fatalf("pause: %s", a)
	}
	if got := f.source("idle").PausedReason; got != reason {
		t.Errorf("stored pause reason %q, want %q as given", got, reason)
	}
	for _, path := range []string{"/api/sources", "/api/sources/idle"} {
		a := f.do(http.MethodGet, path, "", nil)
		if a.code != http.StatusOK {
			t.Fatalf("GET %s: %s", path, a)
		}
		for i, r := range string(a.body) {
			if (r < 0x20 && r != '\n') || r == 0x7f || (r >= 0x80 && r <= 0x9f) {
				t.Errorf("GET %s: raw U+%04X at byte %d", path, r, i)
			}
		}
		if !bytes.Contains(a.body, []byte(`\u001b[2J`)) || !bytes.Contains(a.body, []byte(`\u007f\u009b`)) {
			t.Errorf("GET %s: the reason is not escaped as expected: %s", path, a.body)
		}
	}
	var o struct {
		PausedReason string `json:"paused_reason"`
	}
	if err := json.Unmarshal(f.do(http.MethodGet, "/api/sources/idle", "", nil).body, &o); err != nil || o.PausedReason != reason {
		t.Errorf("the API's paused_reason decodes to %q (%v), want %q", o.PausedReason, err, reason)
	}
}
