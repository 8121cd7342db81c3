package config

import (
	"math"
	"testing"
)

// goldenSources are fixed sources whose fingerprints TestFingerprintGolden
// pins: every field set, characters that JSON escapes, invalid UTF-8 in a
// string, a list and a map key, -0, and a non-finite float.
func goldenSources() []Source {
	a := fpSample()
	b := fpSample()
	b.Body, b.URL = "<a href=\"x\">&\u2028\u2029\t\x00é😀", "https://example.com/\xff\xfe?q=\xc3"
	b.Command = []string{"/bin/echo", "\xed\xa0\x80", ""}
	b.Env = map[string]string{"K\xff": "v\x80", "A": "\\u"}
	b.Headers = nil
	c := fpSample()
	c.Backoff.Jitter, c.Backoff.Multiplier = math.Copysign(0, -1), 1e-7
	c.ExpectStatus, c.Command, c.Env = []int{}, nil, map[string]string{}
	d := fpSample()
	d.Backoff.Multiplier = math.Inf(1)
	return []Source{a, b, c, d}
}

// TestFingerprintGolden pins the fingerprints of fixed sources: a changed
// fingerprint for an unchanged config would make every source look changed
// after an upgrade (its error state and breaker cleared).
func TestFingerprintGolden(t *testing.T) {
	want := []string{
		"6c49d843b4f5b665b9af6bd8a899ccef0a3058d80aefaf9488248572315ea5dc",
		"e3c99f7d775b9a09fbe9a6b9a2c7275084eef356086869c252906ad0d4a73a81",
		"7495a18f742f1a64d9dbf48165feb9be4d1fa7166ce64e420ad4a10ddbfe7939",
		"1e85527a7798024d8568090a4636f1b80c4aec4a0bb9a0442c04326623fd5dee",
	}
	srcs := goldenSources()
	for i := range srcs {
		if got := Fingerprint(&srcs[i]); i >= len(want) || got != want[i] {
			t.Errorf("source %d: fingerprint %s, want the pinned one", i, got)
		}
	}
	loaded := mustLoad(t, fpBase, map[string]string{"P": "st<a>&\"\\tus\u2028\xff"}).Sources
	wantLoaded := []string{
		"cc242e0338d23035c0bdc3092b68f1624bb085d83741ba601dd2fd1dce46d0cf",
		"c7bfac06a4f593436d4b3f8f48af076de16b52713124e0523bf5436732784c44",
	}
	for i := range loaded {
		if got := loaded[i].Fingerprint; i >= len(wantLoaded) || got != wantLoaded[i] {
			t.Errorf("loaded source %s: fingerprint %s, want the pinned one", loaded[i].Name, got)
		}
	}
}
