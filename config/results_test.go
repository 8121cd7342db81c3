package config

import (
	"testing"
	"time"
)

// TestConditional: the conditional key, in defaults and per source, sets
// Source.Conditional of http sources (nil: not set, which means true); on
// an exec source it is a problem naming the source's key, and a value that
// is not a boolean is one naming its path.
func TestConditional(t *testing.T) {
	cfg := mustLoad(t, `
defaults: {conditional: false}
sources:
  - {name: inherit, type: http, url: "http://h/"}
  - {name: own, type: http, url: "http://h/", conditional: true}
  - {name: job, type: exec, command: [/bin/true]}
`, nil)
	if c := mustSource(t, cfg, "inherit").Conditional; c == nil || *c {
		t.Errorf("inherit: Conditional %v, want false from defaults", c)
	}
	if c := mustSource(t, cfg, "own").Conditional; c == nil || !*c {
		t.Errorf("own: Conditional %v, want true", c)
	}
	if c := mustSource(t, cfg, "job").Conditional; c != nil {
		t.Errorf("job (exec): Conditional %v, want nil", c)
	}
	cfg = mustLoad(t, `
sources:
  - {name: a, type: http, url: "http://h/"}
`, nil)
	if c := mustSource(t, cfg, "a").Conditional; c != nil {
		t.Errorf("a: Conditional %v, want nil (on)", c)
	}
	full, err := Load("../testdata/config/full.yaml", envMap(nil))
	if err != nil {
		t.Fatal(err)
	}
	if c := mustSource(t, full, "partner").Conditional; c == nil || *c {
		t.Errorf("full.yaml partner: Conditional %v, want false", c)
	}
	if c := mustSource(t, full, "status-page").Conditional; c == nil || !*c {
		t.Errorf("full.yaml status-page: Conditional %v, want true (defaults)", c)
	}
	for _, c := range []struct{ yaml, want string }{
		{"sources:\n  - {name: job, type: exec, command: [/bin/true], conditional: true}\n",
			"sources[name=job].conditional: not allowed for type exec"},
		{"defaults: {conditional: maybe}\nsources: []\n", "defaults.conditional: "},
		{"sources:\n  - {name: a, type: http, url: \"http://h/\", conditional: 1}\n", "sources[name=a].conditional: "},
	} {
		if ps := mustFail(t, c.yaml, nil); !hasPrefix(ps, c.want) {
			t.Errorf("%q: problems %v, want one starting %q", c.yaml, ps, c.want)
		}
	}
}

// TestErrorReprobe: error_reprobe, in defaults and per source of either
// type, sets Source.ErrorReprobe (0: off); a value under 1s other than 0,
// or not a duration, is a problem naming its path.
func TestErrorReprobe(t *testing.T) {
	cfg := mustLoad(t, `
defaults: {error_reprobe: 10m}
sources:
  - {name: inherit, type: http, url: "http://h/"}
  - {name: own, type: exec, command: [/bin/true], error_reprobe: 1h}
  - {name: off, type: http, url: "http://h/", error_reprobe: 0s}
`, nil)
	for name, want := range map[string]time.Duration{"inherit": 10 * time.Minute, "own": time.Hour, "off": 0} {
		if got := mustSource(t, cfg, name).ErrorReprobe; got != want {
			t.Errorf("%s: ErrorReprobe %v, want %v", name, got, want)
		}
	}
	for _, c := range []struct{ yaml, want string }{
		{"defaults: {error_reprobe: 10ms}\nsources: []\n", "defaults.error_reprobe: must be 0 (off) or at least 1s"},
		{"sources:\n  - {name: a, type: http, url: \"http://h/\", error_reprobe: -1m}\n", "sources[name=a].error_reprobe: must be 0"},
		{"sources:\n  - {name: a, type: http, url: \"http://h/\", error_reprobe: soon}\n", "sources[name=a].error_reprobe: invalid duration"},
	} {
		if ps := mustFail(t, c.yaml, nil); !hasPrefix(ps, c.want) {
			t.Errorf("%q: problems %v, want one starting %q", c.yaml, ps, c.want)
		}
	}
}
