package config

import (
	"net/url"
	"testing"
)

func TestRedactor(t *testing.T) {
	var nilR *Redactor
	if got := nilR.Redact("secret"); got != "secret" {
		t.Errorf("nil Redact = %q", got)
	}
	if got := NewRedactor().Redact("secret"); got != "secret" {
		t.Errorf("empty Redact = %q", got)
	}
	if got := NewRedactor("", "").Redact("a b"); got != "a b" {
		t.Errorf("empty secrets Redact = %q", got)
	}
	secret := "p@ss w/rd&x=1"
	r := NewRedactor("", secret, "abc", "abcdef")
	cases := []struct{ in, want string }{
		{"token " + secret + " end", "token *** end"},
		{"https://h/?k=" + url.QueryEscape(secret), "https://h/?k=***"},
		{"https://h/" + url.PathEscape(secret) + "/x", "https://h/***/x"},
		{"xabcdefx", "x***x"}, // longest first: not "x***defx"
		{"abc abc", "*** ***"},
		{"nothing here", "nothing here"},
		{"", ""},
	}
	for _, c := range cases {
		if got := r.Redact(c.in); got != c.want {
			t.Errorf("Redact(%q) = %q, want %q", c.in, got, c.want)
		}
	}
	// A Config's Redactor masks secrets of MinSecretLen bytes anywhere; a
	// shorter one only inside the strings Load substituted it into.
	cfg := &Config{Secrets: []string{"tok-1234", "tok"}}
	if got := cfg.Redactor().Redact("Bearer tok-1234, tok"); got != "Bearer ***, tok" {
		t.Errorf("Config.Redactor = %q", got)
	}
}
