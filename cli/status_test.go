package cli

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/pacer-dev/pacer/scheduler/view"
)

// TestStatusShowsWhenTheLastErrorHappened (hardening item 15): after a
// reset a source is ok beside its old last error; the table says how long
// ago that error was, so that it does not read as current.
func TestStatusShowsWhenTheLastErrorHappened(t *testing.T) {
	now := time.Date(2026, 12, 2, 4, 0, 0, 0, time.UTC)
	at := func(d time.Duration) *time.Time { v := now.Add(-d); return &v }
	for _, c := range []struct {
		name string
		o    view.SourceObject
		want string
	}{
		{"minutes", view.SourceObject{Name: "a", State: "ok", LastError: "GET x: 502", LastErrorAt: at(3*time.Minute + 10*time.Second)}, "(3m ago) GET x: 502"},
		{"seconds", view.SourceObject{Name: "b", State: "backoff", LastError: "boom", LastErrorAt: at(42 * time.Second)}, "(42s ago) boom"},
		{"days", view.SourceObject{Name: "c", State: "ok", LastError: "boom", LastErrorAt: at(100 * time.Hour)}, "(4d ago) boom"},
		{"unknown time (an older store)", view.SourceObject{Name: "d", State: "ok", LastError: "boom"}, "-         boom        \n"},
	} {
		t.Run(c.name, func(t *testing.T) {
			var b bytes.Buffer
			printStatusTable(&b, []view.Explained{{SourceObject: c.o}}, now)
			if !strings.Contains(b.String(), c.want) {
				t.Errorf("status table:\n%s\nwant it to contain %q", b.String(), c.want)
			}
		})
	}
}
