package notify

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/pacer-dev/pacer/config"
	"github.com/pacer-dev/pacer/domain"
)

// rawRequest is a request a template receiver got.
type rawRequest struct {
	body, ctype, title, id string
}

// rawReceiver records every request's body and headers and answers 200.
type rawReceiver struct {
	mu  sync.Mutex
	got []rawRequest
}

func (r *rawReceiver) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	b, _ := io.ReadAll(req.Body)
	r.mu.Lock()
	r.got = append(r.got, rawRequest{body: string(b), ctype: req.Header.Get("Content-Type"), title: req.Header.Get("Title"),
		id: req.Header.Get("X-Pacer-Event-Id")})
	r.mu.Unlock()
}

func (r *rawReceiver) requests() []rawRequest {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]rawRequest(nil), r.got...)
}

// loadNotify loads the notify section of yaml (with a source) through the
// config loader, as the daemon does.
func loadNotify(t *testing.T, yaml string) *config.Notify {
	t.Helper()
	p := filepath.Join(t.TempDir(), "config.yaml")
	doc := yaml + "sources:\n  - {name: a, type: exec, command: [\"true\"]}\n"
	if err := os.WriteFile(p, []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(p, os.LookupEnv)
	if err != nil {
		t.Fatal(err)
	}
	return cfg.Notify
}

// trickyReason holds what quoting must survive.
const trickyReason = "HTTP 500: \"down\" \\ <b>x</b>\nline 2\ttab, café ✓ 日本"

// deliverOne commits one error event of source with trickyReason and
// waits for the receiver to get it.
func deliverOne(t *testing.T, n *config.Notify, rc *rawReceiver, ev domain.Event) rawRequest {
	t.Helper()
	st := openStore(t)
	if err := st.Commit(t.Context(), domain.Batch{Events: []domain.Event{ev}}, 10); err != nil {
		t.Fatal(err)
	}
	startSender(t, st, n)
	waitUntil(t, "the request", 10*time.Second, func() bool { return len(rc.requests()) == 1 })
	return rc.requests()[0]
}

func trickyEvent(source string) domain.Event {
	return domain.Event{Source: source, Event: "error", State: "error", PreviousState: "backoff",
		Reason: trickyReason, ConsecutiveFailures: 5, At: time.Now()}
}

// TestWebhookBodySlack: the README's Slack-style body reaches a real
// receiver as JSON whose text decodes to the source, state and reason
// exactly (quotes, newlines, non-ASCII).
func TestWebhookBodySlack(t *testing.T) {
	rc := &rawReceiver{}
	srv := httptest.NewServer(rc)
	defer srv.Close()
	n := loadNotify(t, fmt.Sprintf(`notify:
  webhook:
    url: %s
    body: '{"text": {{json (printf "%%s is %%s: %%s" .Source .State .Reason)}}}'
`, srv.URL))
	got := deliverOne(t, n, rc, trickyEvent(`db "main"`))
	var msg struct{ Text string }
	if err := json.Unmarshal([]byte(got.body), &msg); err != nil {
		t.Fatalf("not JSON: %v: %s", err, got.body)
	}
	if want := `db "main" is error: ` + trickyReason; msg.Text != want {
		t.Fatalf("text %q, want %q", msg.Text, want)
	}
	if got.ctype != "application/json" || len(got.id) != 32 {
		t.Fatalf("content type %q, event id %q", got.ctype, got.id)
	}
}

// TestWebhookBodyNtfy: the README's ntfy-style body (plain text, a Title
// header) arrives as text/plain, byte for byte.
func TestWebhookBodyNtfy(t *testing.T) {
	rc := &rawReceiver{}
	srv := httptest.NewServer(rc)
	defer srv.Close()
	n := loadNotify(t, fmt.Sprintf(`notify:
  webhook:
    url: %s/pacer-alerts
    headers: {Title: "pacer", Tags: "warning"}
    body: |-
      {{.Source}} is {{.State}}{{if .Reminder}} (still){{end}}: {{.Reason}}
`, srv.URL))
	ev := trickyEvent("db-1")
	ev.Reminder = true
	got := deliverOne(t, n, rc, ev)
	if want := "db-1 is error (still): " + trickyReason; got.body != want {
		t.Fatalf("body %q, want %q", got.body, want)
	}
	if got.ctype != "text/plain; charset=utf-8" || got.title != "pacer" {
		t.Fatalf("content type %q, title %q", got.ctype, got.title)
	}
}

// TestWebhookBodyFallback: a template that fails at run time sends the
// event JSON (the event is delivered, not dropped) and logs why.
func TestWebhookBodyFallback(t *testing.T) {
	rc := &rawReceiver{}
	srv := httptest.NewServer(rc)
	defer srv.Close()
	// The sample event's reason is long enough; this one's is not.
	n := loadNotify(t, fmt.Sprintf("notify:\n  webhook:\n    url: %s\n    body: '{{index .Reason 30}}'\n", srv.URL))
	ev := trickyEvent("short")
	ev.Reason = "timeout"
	got := deliverOne(t, n, rc, ev)
	var p payload
	if err := json.Unmarshal([]byte(got.body), &p); err != nil {
		t.Fatalf("fallback not the event JSON: %v: %s", err, got.body)
	}
	if p.Source != "short" || p.Reason != "timeout" || p.Event != "error" || got.ctype != "application/json" {
		t.Fatalf("fallback %+v, content type %q", p, got.ctype)
	}
}

// TestReminderJSON: a reminder's event JSON carries "reminder": true; an
// ordinary event's has no reminder key (its JSON is unchanged).
func TestReminderJSON(t *testing.T) {
	ev := trickyEvent("a")
	ev.ID = "x"
	b, err := Marshal(ev)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	if _, ok := m["reminder"]; ok {
		t.Fatalf("ordinary event has a reminder key: %s", b)
	}
	ev.Reminder = true
	b, _ = Marshal(ev)
	if err := json.Unmarshal(b, &m); err != nil || m["reminder"] != true {
		t.Fatalf("reminder JSON %s", b)
	}
}
