package config

import (
	"fmt"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// sameNode reports where a and b (the parser's) differ in kind, tag, style
// or value, or "".
func sameNode(a, b *yaml.Node, at string) string {
	switch {
	case a.Kind != b.Kind:
		return fmt.Sprintf("%s: kind %v, parser %v", at, a.Kind, b.Kind)
	case a.Tag != b.Tag:
		return fmt.Sprintf("%s: tag %q, parser %q", at, a.Tag, b.Tag)
	case a.Style != b.Style:
		return fmt.Sprintf("%s: style %v, parser %v", at, a.Style, b.Style)
	case a.Value != b.Value:
		return fmt.Sprintf("%s: value %q, parser %q", at, a.Value, b.Value)
	case len(a.Content) != len(b.Content):
		return fmt.Sprintf("%s: %d children, parser %d", at, len(a.Content), len(b.Content))
	}
	for i := range a.Content {
		if d := sameNode(a.Content[i], b.Content[i], fmt.Sprintf("%s/%d", at, i)); d != "" {
			return d
		}
	}
	return ""
}

// checkQuick compares quickItem's node for text with yaml.v3's and reports
// whether quickItem took it.
func checkQuick(t *testing.T, text string, ind int) bool {
	t.Helper()
	var a nodeArena
	q := quickItem([]byte(text), ind, &a)
	if q == nil {
		return false
	}
	var doc yaml.Node
	if err := yaml.Unmarshal([]byte(text), &doc); err != nil {
		t.Errorf("quickItem took %q, which the parser refuses: %v", text, err)
		return true
	}
	seq := deref(&doc)
	if seq == nil || seq.Kind != yaml.SequenceNode || len(seq.Content) != 1 {
		t.Errorf("quickItem took %q, which is not one item", text)
		return true
	}
	if d := sameNode(q, seq.Content[0], "item"); d != "" {
		t.Errorf("%q: %s", text, d)
	}
	return true
}

// TestQuickItem: quickItem builds the parser's nodes for the items it
// takes, and leaves to the parser what is outside its subset.
func TestQuickItem(t *testing.T) {
	cases := []struct {
		text  string
		ind   int
		quick bool
	}{
		{"  - {name: src-000001, type: http, url: \"http://127.0.0.1:8080/s/1\"}\n", 2, true},
		{"  - name: a\n    type: http\n    url: https://x.example.com:8443/v1/status\n", 2, true},
		{"- name: a\n  type: http\n  url: http://x/\n", 0, true},
		{"  - name: a\n    headers: {Accept: application/json, Authorization: \"Bearer ${TOKEN}\"}\n", 2, true},
		{"  - name: a\n    expect_status: [200, 204]\n    max_body: 1MiB\n    timeout: 5s\n", 2, true},
		{"  - name: a\n    command: [\"/bin/sh\", \"-c\", \"exit 0\"]\n    env: {MODE: quick}\n", 2, true},
		{"  - {name: a, http2: false, n: 0x1F, f: 1.5, e: 1e3, nul: null, t: true, o: 012}\n", 2, true},
		{"  - {name: a, tls: {ca_file: /etc/ssl/ca.pem}, list: [], map: {}}\n", 2, true},
		{"  - name: a\r\n    type: http\r\n", 2, true},
		{"  - name: a\n\n    type: http\n", 2, true},
		{"  - {name: a}   \n", 2, true},
		{"  - name: a # a comment\n", 2, false},
		{"  - name: a\n    body: |\n      text\n", 2, false},
		{"  - name: 'single'\n", 2, false},
		{"  - name: \"esc\\\"aped\"\n", 2, false},
		{"  - name: two words\n", 2, false},
		{"  - name:\n", 2, false},
		{"  - &a {name: a}\n", 2, false},
		{"  - {<<: *a, name: b}\n", 2, false},
		{"  - {name: a, }\n", 2, false},
		{"  - {name: a, url: http://x/}\n", 2, false},
		{"  - name: -1\n", 2, false},
		{"  - name: ~\n", 2, false},
		{"  - name: a\n     type: http\n", 2, false},
		{"  - name: a\n  # comment\n", 2, false},
		{"  - [a, b]\n", 2, false},
		{"  - plain\n", 2, false},
	}
	for _, tc := range cases {
		if got := checkQuick(t, tc.text, tc.ind); got != tc.quick {
			t.Errorf("%q: taken %v, want %v", tc.text, got, tc.quick)
		}
	}
	// One arena for every item, as in a batch: an item not taken leaves the
	// nodes of those taken before it intact.
	var a nodeArena
	type took struct {
		text string
		n    *yaml.Node
	}
	var kept []took
	for _, tc := range cases {
		if n := quickItem([]byte(tc.text), tc.ind, &a); n != nil {
			kept = append(kept, took{tc.text, n})
		}
	}
	for _, k := range kept {
		var doc yaml.Node
		if err := yaml.Unmarshal([]byte(k.text), &doc); err != nil {
			t.Fatal(err)
		}
		if d := sameNode(k.n, deref(&doc).Content[0], "item"); d != "" {
			t.Errorf("shared arena, %q: %s", k.text, d)
		}
	}
	// Every item of the benchmarks' configs is taken.
	for _, data := range [][]byte{benchConfig(1000), []byte("sources:\n" + manySources(200, func(int) string { return "" }))} {
		rl, ok := cutSources(data)
		if !ok {
			t.Fatal("benchmark config not cut")
		}
		for _, sp := range rl.items {
			if text := string(data[sp[0]:sp[1]]); !checkQuick(t, text, rl.ind) && !strings.Contains(text, "exec") {
				t.Errorf("not taken: %q", text)
			}
		}
	}
}
