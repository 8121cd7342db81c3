package notify

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/pacer-dev/pacer/domain"
)

// TestHostEventJSON: a host event carries host and sources and a null
// source (contract 13.7); a source's event has its source and neither.
func TestHostEventJSON(t *testing.T) {
	at := time.Date(2026, 12, 7, 10, 0, 0, 0, time.UTC)
	b, err := Marshal(domain.Event{ID: "1", Event: "host_open", Host: "api.example", Sources: 200, State: "open", Reason: "connection refused", At: at})
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	if v, ok := m["source"]; !ok || v != nil || m["host"] != "api.example" || m["sources"] != 200.0 {
		t.Fatalf("host event JSON %s; want source null, host and sources", b)
	}
	b, _ = Marshal(domain.Event{ID: "2", Event: "error", Source: "a", At: at})
	m = nil
	_ = json.Unmarshal(b, &m)
	if m["source"] != "a" {
		t.Fatalf("source event JSON %s", b)
	}
	if _, ok := m["host"]; ok {
		t.Fatalf("source event JSON %s has a host", b)
	}
}
