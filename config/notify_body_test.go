package config

import (
	"strings"
	"testing"
	"time"
)

// TestNotifyBodyAndReminders: notify.webhook.body and notify.remind_every
// are read; a template that does not parse, names an unknown field, or is
// not a string, and a negative remind_every are problems with their path.
func TestNotifyBodyAndReminders(t *testing.T) {
	const src = "sources:\n  - {name: a, type: exec, command: [\"true\"]}\n"
	ok := "notify:\n  remind_every: 30m\n  webhook: {url: \"https://h.example/x\", body: '{\"text\": {{json .Reason}}}'}\n"
	cfg, probs := loadIn(t, t.TempDir(), ok+src, nil)
	if len(probs) > 0 {
		t.Fatal(probs)
	}
	n := cfg.Notify
	if n.RemindEvery != 30*time.Minute || n.WebhookBody == nil || n.WebhookBody.Text != `{"text": {{json .Reason}}}` || n.Webhook.URL != "https://h.example/x" {
		t.Fatalf("notify %+v webhook %+v", n, n.Webhook)
	}
	for _, c := range []struct{ doc, want string }{
		{"notify:\n  webhook: {url: \"https://h.example/x\", body: '{{.Source'}\n", "notify.webhook.body: template does not parse"},
		{"notify:\n  webhook: {url: \"https://h.example/x\", body: '{{.Sorce}}'}\n", "notify.webhook.body: template fails on a sample event"},
		{"notify:\n  webhook: {url: \"https://h.example/x\", body: [a]}\n", "notify.webhook.body: expected a template"},
		{"notify:\n  webhook: {body: 'x'}\n", "notify.webhook.url: required"},
		{"notify:\n  remind_every: -1m\n  command: [\"true\"]\n", "notify.remind_every: must be >= 0"},
		{"notify:\n  remind_every: soon\n  command: [\"true\"]\n", "notify.remind_every: invalid duration"},
	} {
		_, probs := loadIn(t, t.TempDir(), c.doc+src, nil)
		if !strings.Contains(probs.Error(), c.want) {
			t.Errorf("%q: problems %q lack %q", c.doc, probs.Error(), c.want)
		}
	}
}
