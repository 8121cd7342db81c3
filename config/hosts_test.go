package config

import (
	"strings"
	"testing"
	"time"
)

func TestHostOf(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"http://API.Example/x", "api.example"},
		{"https://api.example:443/x", "api.example"},
		{"http://api.example:80", "api.example"},
		{"https://api.example:80/", "api.example:80"},
		{"http://127.0.0.1:8080/feed", "127.0.0.1:8080"},
		{"http://[::1]:9000/", "[::1]:9000"},
		{"http://[::1]/", "[::1]"},
		{"HTTPS://example.com:443/x", "example.com"},
		{"http://example.com:443/", "example.com:443"},
		{"https://user:pw@api.example.com/", "api.example.com"},
		{"http://[::1]:80/", "[::1]"},
	} {
		if got, ok := HostOf(c.in); !ok || got != c.want {
			t.Errorf("HostOf(%q) = %q, %v; want %q", c.in, got, ok, c.want)
		}
	}
	if _, ok := HostOf("/relative"); ok {
		t.Error("HostOf of a URL without a host reported ok")
	}
}

func TestHostsSection(t *testing.T) {
	cfg := mustLoad(t, `
hosts:
  concurrency: 4
  rate: 10/s
  breaker: {sources: 3, failures: 5, window: 30s}
  overrides:
    API.Partner.Example: {concurrency: 16, rate: 20/s, adaptive: true}
    "127.0.0.1:8080": {concurrency: 0}
    unused.example: {rate: 1/s}
defaults:
  respect_cache: true
sources:
  - {name: a, type: http, url: "http://api.partner.example/a", schedule: "@every 1m"}
  - {name: b, type: http, url: "http://127.0.0.1:8080/b", schedule: "@every 1m", depends_on: [a]}
  - {name: c, type: exec, command: [true], schedule: "@every 1m", depends_on: [a, b]}
`, nil)
	h := cfg.Hosts
	if !h.Present || h.Default.Concurrency != 4 || h.Default.Rate != 10 || h.Default.Burst != 1 {
		t.Fatalf("default host settings %+v", h.Default)
	}
	if b := h.Default.Breaker; b.Sources != 3 || b.Failures != 5 || b.Window != 30*time.Second || b.Cooldown != time.Minute {
		t.Fatalf("default host breaker %+v", b)
	}
	p := h.For("api.partner.example")
	if p.Concurrency != 16 || p.Rate != 20 || !p.Adaptive || p.Breaker.Failures != 5 {
		t.Fatalf("override %+v: want its keys over the defaults", p)
	}
	if l := h.For("127.0.0.1:8080"); l.Concurrency != 0 || l.Rate != 10 {
		t.Fatalf("override 127.0.0.1:8080 %+v", l)
	}
	if got := h.For("other.example"); got != h.Default {
		t.Fatalf("a host without an override got %+v", got)
	}
	a, b, c := mustSource(t, cfg, "a"), mustSource(t, cfg, "b"), mustSource(t, cfg, "c")
	if a.Host != "api.partner.example" || b.Host != "127.0.0.1:8080" || c.Host != "" {
		t.Fatalf("hosts %q %q %q", a.Host, b.Host, c.Host)
	}
	if !a.RespectCache || c.RespectCache {
		t.Fatalf("respect_cache: http %v exec %v", a.RespectCache, c.RespectCache)
	}
	if strings.Join(c.DependsOn, ",") != "a,b" {
		t.Fatalf("depends_on %v", c.DependsOn)
	}
	if len(cfg.Notes) != 1 || !strings.Contains(cfg.Notes[0], "unused.example") {
		t.Fatalf("notes %q: want one warning for the unused override", cfg.Notes)
	}
}

func TestNoHostsSection(t *testing.T) {
	cfg := mustLoad(t, `
sources:
  - {name: a, type: http, url: "http://x.example/a", schedule: "@every 1m"}
`, nil)
	if cfg.Hosts.Active() {
		t.Fatal("hosts active without a hosts section")
	}
}

func TestHostsProblems(t *testing.T) {
	src := `
sources:
  - {name: a, type: http, url: "http://x.example/a", schedule: "@every 1m", depends_on: [a2]}
  - {name: a2, type: http, url: "http://x.example/b", schedule: "@every 1m", depends_on: [a3]}
  - {name: a3, type: http, url: "http://x.example/c", schedule: "@every 1m", depends_on: [a, nope]}
`
	for _, c := range []struct{ yaml, path, msg string }{
		{"hosts: {concurrency: -1}\n" + src, "hosts.concurrency", ""},
		{"hosts: {adaptive: true}\n" + src, "hosts.adaptive", "needs concurrency or rate"},
		{"hosts: {overrides: {\"http://x/\": {rate: 1/s}}}\n" + src, "hosts.overrides", "invalid host"},
		{"hosts: {overrides: {\"x.example:99999\": {rate: 1/s}}}\n" + src, "hosts.overrides", "invalid"},
		{"hosts: {overrides: {x.example: {adaptive: true, concurrency: 0}}}\n" + src, "hosts.overrides", "needs concurrency or rate"},
		{"hosts: {concurency: 3}\n" + src, "hosts.concurency", "unknown key"},
		{src, "sources[name=a3].depends_on[1]", `unknown source "nope"`},
		{src, "sources[name=a].depends_on", "dependency cycle: a -> a2 -> a3 -> a"},
		{"defaults: {respect_cache: true}\nsources:\n  - {name: e, type: exec, command: [true], schedule: \"@every 1m\", respect_cache: true}\n", "sources[name=e].respect_cache", "not allowed for type exec"},
	} {
		ps := mustFail(t, c.yaml, nil)
		found := false
		for _, p := range ps {
			if strings.HasPrefix(p.Path, c.path) && strings.Contains(p.Msg, c.msg) {
				found = true
			}
		}
		if !found {
			t.Errorf("want a problem at %s containing %q, got:\n%v", c.path, c.msg, ps)
		}
	}
}
