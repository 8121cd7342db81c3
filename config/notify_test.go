package config

import (
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestNotifySection(t *testing.T) {
	const src = "sources:\n  - {name: a, type: exec, command: [\"true\"]}\n"
	for _, c := range []struct {
		name, doc string
		want      *Notify
		probs     []string
	}{
		{"absent", "", nil, nil},
		{"defaults", "notify: {command: [\"true\"]}\n",
			&Notify{On: []string{"error", "recovered", "host_open", "host_recovered"}, Command: []string{"/usr/bin/true"}, Timeout: 10 * time.Second, MaxAge: 24 * time.Hour}, nil},
		{"all", "notify:\n  on: [recovered, open, error]\n  webhook: {url: \"https://h.example/x\", method: put, headers: {X-Key: \"${KEY}\"}}\n  timeout: 3s\n  max_age: 1h\n",
			&Notify{On: []string{"error", "open", "recovered"}, Webhook: &Webhook{URL: "https://h.example/x", Method: "PUT", Headers: map[string]string{"X-Key": "k3y-value"}},
				Timeout: 3 * time.Second, MaxAge: time.Hour}, nil},
		{"no target", "notify: {on: [error]}\n", nil, []string{"notify: needs a target"}},
		{"bad", "notify:\n  on: [down]\n  webhook: {url: \"ftp://x\", methd: GET}\n  timeout: 0s\n  max_ag: 1h\n", nil,
			[]string{`notify.on[0]: unknown event "down"`, "notify.webhook.url: invalid URL: unsupported scheme", "notify.webhook.methd: unknown key",
				"notify.timeout: must be", "notify.max_ag: unknown key"}},
		{"no url", "notify: {webhook: {method: POST}}\n", nil, []string{"notify.webhook.url: required"}},
		{"empty on", "notify: {on: [], command: [\"true\"]}\n", nil, []string{"notify.on: must list at least one"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg, probs := loadIn(t, t.TempDir(), c.doc+src, map[string]string{"KEY": "k3y-value"})
			if len(c.probs) == 0 {
				if len(probs) > 0 {
					t.Fatalf("problems: %v", probs)
				}
				if !reflect.DeepEqual(cfg.Notify, c.want) {
					t.Fatalf("Notify = %+v, want %+v", cfg.Notify, c.want)
				}
				return
			}
			all := probs.Error()
			for _, want := range c.probs {
				if !strings.Contains(all, want) {
					t.Errorf("problems %q lack %q", all, want)
				}
			}
		})
	}
}

func TestNotifyHeadersAreSecrets(t *testing.T) {
	doc := "notify: {webhook: {url: \"https://h.example/x\", headers: {Authorization: \"Bearer s3cr3t-tok\"}}}\n" +
		"sources:\n  - {name: a, type: exec, command: [\"true\"]}\n"
	cfg, probs := loadIn(t, t.TempDir(), doc, nil)
	if len(probs) > 0 {
		t.Fatal(probs)
	}
	if got := cfg.Redactor().Redact("sent Bearer s3cr3t-tok"); strings.Contains(got, "s3cr3t") {
		t.Fatalf("header value not redacted: %q", got)
	}
	if !cfg.Notify.Wants(EventError) || cfg.Notify.Wants(EventOpen) {
		t.Fatalf("Wants: default on is error, recovered; got %v", cfg.Notify.On)
	}
	var none *Notify
	if none.Wants(EventError) {
		t.Fatal("a nil section wants nothing")
	}
}

func TestNotifyFullYAML(t *testing.T) {
	cfg, err := Load("../testdata/config/full.yaml", envMap(nil))
	if err != nil {
		t.Fatal(err)
	}
	n := cfg.Notify
	if n == nil || len(n.On) != 3 || n.Webhook == nil || n.Webhook.Method != "POST" || len(n.Command) != 1 {
		t.Fatalf("full.yaml notify = %+v", n)
	}
}
