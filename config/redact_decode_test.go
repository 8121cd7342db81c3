package config

import (
	"fmt"
	"strings"
	"testing"
	"unicode/utf16"
	"unicode/utf8"
)

// TestRedactEncodedSecret (rule 3.12): a secret quoted by an upstream in
// an encoding that the Redactor's precomputed forms do not list is masked
// all the same, the candidates being decoded: lowercase percent-encoding,
// JSON \u escapes, \x escapes, HTML character references, a double
// percent-encoding, and a mix of them.
func TestRedactEncodedSecret(t *testing.T) {
	const secret = "k+y/8=Z!"
	cfg := mustLoad(t, `
sources:
  - {name: a, type: http, url: "https://h.example/x", headers: {X-Key: "${SEK8}"}}
  - {name: b, type: http, url: "https://h.example/q?k=${SHORT}"}
`, map[string]string{"SEK8": secret, "SHORT": "ab"})
	redactors := map[string]*Redactor{"config": cfg.Redactor(), "NewRedactor": NewRedactor(secret)}
	cases := []struct{ in, want string }{
		{"400 bad key <k%2by%2f8%3dZ%21>", "400 bad key <***>"},
		{"400 bad key <k%2By%2F8%3DZ%21>", "400 bad key <***>"},
		{`{"error":"bad key \u006b\u002b\u0079\u002f\u0038\u003d\u005a\u0021"}`, `{"error":"bad key ***"}`},
		{`{"error":"bad key \u006B\u002By\/8\u003dZ!"}`, `{"error":"bad key ***"}`},
		{`key k\x2by/8=Z\x21.`, `key ***.`},
		{"key k&#43;y&#x2f;8&#61;Z&excl;|", "key ***|"},
		{"key k%252by%252F8%253dZ%2521 end", "key *** end"},
		{"key k\\u002by%2f8&#61;Z! end", "key *** end"},
		{"nothing here: 100% \\u00e9t\\u00e9 &amp; %zz \\", "nothing here: 100% \\u00e9t\\u00e9 &amp; %zz \\"},
	}
	for name, r := range redactors {
		for _, c := range cases {
			if got := r.Redact(c.in); got != c.want {
				t.Errorf("%s: Redact(%q) = %q, want %q", name, c.in, got, c.want)
			}
		}
	}
	// A URL holding a short secret is masked as a whole, to its display
	// form, in a lowercase encoding too.
	got := cfg.Redactor().Redact("see https%3a%2f%2fh.example%2fq%3fk%3dab!")
	if want := "see https://h.example/q?k=***!"; got != want {
		t.Errorf("Redact(lowercase-encoded URL) = %q, want %q", got, want)
	}
}

// encodeSecret writes s with each rune in the encoding picked by the next
// byte of how (cycling; none: as is): as is, %xx, %XX, %25xx, \uXXXX (a
// surrogate pair beyond the BMP), \xXX, &#N; or &#xH;.
func encodeSecret(s string, how []byte) string {
	var b strings.Builder
	k := 0
	for _, r := range s {
		c := byte(0)
		if len(how) > 0 {
			c = how[k%len(how)] % 8
			k++
		}
		raw := string(r)
		switch {
		case c == 1 || c == 2 || c == 3:
			for _, x := range []byte(raw) {
				f := map[byte]string{1: "%%%02x", 2: "%%%02X", 3: "%%25%02x"}[c]
				fmt.Fprintf(&b, f, x)
			}
		case c == 4:
			if r > 0xffff {
				hi, lo := utf16.EncodeRune(r)
				fmt.Fprintf(&b, `\u%04x\u%04X`, hi, lo)
			} else {
				fmt.Fprintf(&b, `\u%04x`, r)
			}
		case c == 5:
			for _, x := range []byte(raw) {
				fmt.Fprintf(&b, `\x%02x`, x)
			}
		case (c == 6 || c == 7) && r > 0 && (r < 0x80 || r > 0x9f): // html maps &#128;-&#159; to cp1252
			f := map[byte]string{6: "&#%d;", 7: "&#x%x;"}[c]
			fmt.Fprintf(&b, f, r)
		default:
			b.WriteString(raw)
		}
	}
	return b.String()
}

// FuzzRedactEncoded: a secret quoted in any mix of encodings, between any
// texts, never survives Redact, neither as it is nor decoded at any depth;
// nothing panics.
//
//	go test ./config -run '^$' -fuzz FuzzRedactEncoded -fuzztime 60s
func FuzzRedactEncoded(f *testing.F) {
	f.Add("k+y/8=Z!", "400 bad key <", ">", []byte{1})
	f.Add("k+y/8=Z!", `{"e":"`, `"}`, []byte{4})
	f.Add("k+y/8=Z!", "x", "y", []byte{0, 1, 2, 3, 4, 5, 6, 7})
	f.Add("s3cr3t \u00e9\U0001F600!", "%", "\\", []byte{4, 5, 6})
	f.Add("a%41bbbbbbb", "&amp;", "&#", []byte{0, 1})
	f.Fuzz(func(t *testing.T, secret, prefix, suffix string, how []byte) {
		if len(secret) < MinSecretLen || strings.Contains(secret, "*") || !utf8.ValidString(secret) {
			return
		}
		r := NewRedactor(secret)
		in := prefix + encodeSecret(secret, how) + suffix
		out := r.Redact(in)
		if strings.Contains(out, secret) {
			t.Fatalf("Redact(%q) = %q shows the secret %q", in, out, secret)
		}
		for _, d := range decodeLevels(out) {
			if strings.Contains(d.text, secret) {
				t.Fatalf("Redact(%q) = %q shows the secret %q once decoded: %q", in, out, secret, d.text)
			}
		}
		// The input shows the secret, as it is or decoded (a prefix ending
		// in "%" may take its first bytes into another escape; then it
		// does not), and it always does when nothing around it or in it
		// starts an escape: then something is masked.
		shown := strings.Contains(in, secret)
		for _, d := range decodeLevels(in) {
			shown = shown || strings.Contains(d.text, secret)
		}
		if !shown && !strings.ContainsAny(prefix+secret+suffix, `%\&`) {
			t.Fatalf("%q, the secret %q encoded, does not decode to it", in, secret)
		}
		if shown && !strings.Contains(out, redacted) {
			t.Fatalf("Redact(%q) = %q masks nothing", in, out)
		}
	})
}
