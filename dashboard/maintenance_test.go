package dashboard_test

import (
	"net/http"
	"strings"
	"testing"
)

// alwaysWindows are maintenance windows in force at any time (a start
// every minute, each a minute long): gen-000 paused, gen-001 silenced.
const alwaysWindows = `maintenance:
  - {name: always-pause, schedule: "* * * * *", duration: 1m, sources: [gen-000], action: pause}
  - {name: always-quiet, schedule: "* * * * *", duration: 1m, sources: [gen-001], action: silence}
`

// TestMaintenanceShown (contract 15.1): a source in a pause window shows
// paused with the window's reason on its page, in its row and in the API's
// source object (with the maintenance field); one in a silence window
// shows its state, and the window in its why and page.
func TestMaintenanceShown(t *testing.T) {
	f := newFixture(t, "", alwaysWindows)
	p := f.get("/sources/gen-000")
	if p.code != http.StatusOK {
		t.Fatalf("GET /sources/gen-000: %s", p)
	}
	for _, s := range []string{"paused: maintenance: always-pause until ", `id="maintenance"`, "always-pause: not polled until"} {
		if !strings.Contains(p.body, s) {
			t.Errorf("GET /sources/gen-000 lacks %q", s)
		}
	}
	q := f.get("/sources/gen-001")
	for _, s := range []string{"; notifications held (maintenance: always-quiet until ", "always-quiet: polled, notifications held until"} {
		if !strings.Contains(q.body, s) {
			t.Errorf("GET /sources/gen-001 lacks %q", s)
		}
	}
	api := f.get("/api/sources/gen-000")
	for _, s := range []string{`"state":"paused"`, `"paused_reason":"maintenance: always-pause until `, `"maintenance":{"name":"always-pause","action":"pause","until":"`} {
		if !strings.Contains(api.body, s) {
			t.Errorf("GET /api/sources/gen-000 lacks %q: %s", s, api.body)
		}
	}
	if api := f.get("/api/sources/gen-002"); strings.Contains(api.body, `"maintenance"`) {
		t.Errorf("a source in no window has a maintenance field: %s", api.body)
	}
	if paused := f.get("/?state=paused"); !strings.Contains(paused.body, "gen-000") || strings.Contains(paused.body, "gen-001") {
		t.Errorf("the paused sources lack gen-000 or hold gen-001")
	}
	row := f.get("/?q=gen-000")
	if !strings.Contains(row.body, "paused: maintenance: always-pause until ") {
		t.Errorf("the overview's row lacks the window")
	}
}
