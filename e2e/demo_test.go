package e2e

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestDemoConfig runs the README's first command: the daemon on the
// repository's config.yaml (only its admin port changed, so that it runs
// beside the other tests), from a working directory of its own. The demo
// delivers the clock's results to out/clock.txt and writes the broken
// source's events to out/events.jsonl, without a network.
func TestDemoConfig(t *testing.T) {
	t.Parallel()
	demo, err := os.ReadFile("../config.yaml")
	if err != nil {
		t.Fatal(err)
	}
	in := newInst(t)
	cfg := strings.ReplaceAll(string(demo), "127.0.0.1:9090", in.addr)
	if strings.Count(string(demo), "127.0.0.1:9090") != 2 {
		t.Fatalf("the demo config no longer names its admin address twice (listen, self-health): update this test")
	}
	in.cwd = in.dir // the notify command writes out/ in the daemon's working directory
	writeFile(t, in.cfgPath, cfg)
	if r := in.cli("validate", "-config", in.cfgPath); r.code != 0 {
		t.Fatalf("pacer validate on the demo config: %d %s", r.code, r.stderr)
	}
	d := in.start()
	eventually(t, 20*time.Second, "the clock delivered to out/clock.txt", func() error {
		b, err := os.ReadFile(filepath.Join(in.dir, "out", "clock.txt"))
		if err != nil || !strings.Contains(string(b), "UTC") {
			return errf("out/clock.txt: %q, %v", b, err)
		}
		return nil
	})
	eventually(t, 40*time.Second, "the broken source's open event in out/events.jsonl", func() error {
		b, err := os.ReadFile(filepath.Join(in.dir, "out", "events.jsonl"))
		if err != nil {
			return err
		}
		for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
			var ev struct{ ID, Event, Source string }
			if err := json.Unmarshal([]byte(line), &ev); err != nil {
				return errf("line %q: %v", line, err)
			}
			if ev.Event == "open" && ev.Source == "broken-upstream" && ev.ID != "" {
				return nil
			}
		}
		return errf("no open event yet: %q", b)
	})
	if o := d.source("self-health"); o.State != "ok" {
		t.Errorf("self-health: %s, want ok", o.State)
	}
}
