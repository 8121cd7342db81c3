package config

import (
	"slices"
	"strings"
	"testing"
)

// Issue 24 item 5: an unknown key suggests the nearest known key of its
// mapping, within 2 edits; none when nothing is near.
func TestUnknownKeySuggests(t *testing.T) {
	_, ps := loadIn(t, t.TempDir(), `concurency: 4
admin: {listn: "127.0.0.1:0"}
zzzzzzzz: 1
sources:
  - {name: a, type: exec, command: ["/bin/true"], schedul: "@every 1m", expect_stauts: [200]}
`, nil)
	var got []string
	for _, p := range ps {
		got = append(got, p.String())
	}
	for _, w := range []string{
		"concurency: unknown key; did you mean concurrency?",
		"admin.listn: unknown key; did you mean listen?",
		"zzzzzzzz: unknown key",
		"sources[name=a].schedul: unknown key; did you mean schedule?",
		"sources[name=a].expect_stauts: unknown key; did you mean expect_status?",
	} {
		if !slices.Contains(got, w) {
			t.Errorf("missing %q in\n%s", w, strings.Join(got, "\n"))
		}
	}
	for _, c := range []struct {
		key  string
		want string
	}{
		{"concurrency", "concurrency"}, {"Concurrency", "concurrency"}, {"a", ""}, {"dirr", "dir"}, {"", ""},
		{"storee", "store"}, {"sourcess", "sources"}, {"sorces", "sources"}, {"xx_timeout_yy", ""},
	} {
		if got := nearestKey(c.key, append(topKeys(), sourceKeys()...)); got != c.want {
			t.Errorf("nearestKey(%q) = %q, want %q", c.key, got, c.want)
		}
	}
}

// Every key the suggestion lists is one the loader knows: a source that
// has one is not told "unknown key" about it.
func TestSuggestedKeysAreKnown(t *testing.T) {
	for _, k := range sourceKeys() {
		_, ps := loadIn(t, t.TempDir(), "sources:\n  - {name: a, type: http, url: \"http://127.0.0.1/\", "+k+": ~}\n", nil)
		for _, p := range ps {
			if strings.Contains(p.String(), "unknown key") {
				t.Errorf("listed source key %s: %s", k, p)
			}
		}
	}
	for _, k := range topKeys() {
		_, ps := loadIn(t, t.TempDir(), k+": ~\nsources: []\n", nil)
		for _, p := range ps {
			if strings.Contains(p.String(), "unknown key") {
				t.Errorf("listed top key %s: %s", k, p)
			}
		}
	}
}

// Issue 24 item 5: expect_status: 200 is a list of one; a bad one is said
// at the key's path.
func TestExpectStatusScalar(t *testing.T) {
	src := "sources:\n  - {name: a, type: http, url: \"http://127.0.0.1/\", expect_status: %s}\n"
	cfg, ps := loadIn(t, t.TempDir(), strings.Replace(src, "%s", "200", 1), nil)
	if len(ps) != 0 || !slices.Equal(cfg.Sources[0].ExpectStatus, []int{200}) {
		t.Fatalf("expect_status: 200: %v %v", ps, cfg)
	}
	_, ps = loadIn(t, t.TempDir(), strings.Replace(src, "%s", "99", 1), nil)
	if len(ps) != 1 || ps[0].String() != "sources[name=a].expect_status: status 99 is outside 100..599" {
		t.Errorf("expect_status: 99: %v", ps)
	}
}

// Issue 24 item 5: a config without sources loads, with a warning (a
// note); "sources: []" says it is meant, and has none.
func TestNoSourcesIsAWarning(t *testing.T) {
	cfg := mustLoad(t, "concurrency: 2\n", nil)
	if len(cfg.Sources) != 0 || len(cfg.Notes) != 1 || !strings.HasPrefix(cfg.Notes[0], "no sources:") {
		t.Errorf("a config without sources: notes %q", cfg.Notes)
	}
	if cfg := mustLoad(t, "sources: []\n", nil); cfg.Notes != nil {
		t.Errorf("sources: []: notes %q", cfg.Notes)
	}
}
