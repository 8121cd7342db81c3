package dashboard

import (
	"slices"
	"testing"
)

func TestHostKey(t *testing.T) {
	for raw, want := range map[string]string{
		"https://Example.COM/x":            "example.com",
		"HTTPS://example.com:443/x":        "example.com",
		"http://example.com:80":            "example.com",
		"http://example.com:443/":          "example.com:443",
		"https://example.com:8443/a?b=c":   "example.com:8443",
		"http://127.0.0.2:9000/":           "127.0.0.2:9000",
		"http://[::1]:80/":                 "[::1]",
		"http://[::1]:8080/":               "[::1]:8080",
		"https://user:pw@api.example.com/": "api.example.com",
		"not a url":                        "(invalid URL)",
		"%zz":                              "(invalid URL)",
	} {
		if got := hostKey(raw); got != want {
			t.Errorf("hostKey(%q) = %q, want %q", raw, got, want)
		}
	}
}

func TestLowerShareFirst(t *testing.T) {
	hs := []hostShare{
		{host: "never", polls: 0},
		{host: "good", ok: 99, polls: 100},
		{host: "bad", ok: 1, polls: 10},
		{host: "half-big", ok: 500, polls: 1000},
		{host: "half-small", ok: 5, polls: 10},
	}
	slices.SortFunc(hs, lowerShareFirst)
	var got []string
	for _, h := range hs {
		got = append(got, h.host)
	}
	want := []string{"bad", "half-big", "half-small", "good", "never"}
	if !slices.Equal(got, want) {
		t.Errorf("order %v, want %v (lowest share first, more polls first among equals, never polled last)", got, want)
	}
}
