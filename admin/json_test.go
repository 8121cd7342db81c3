package admin_test

import (
	"bytes"
	"encoding/json"
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
