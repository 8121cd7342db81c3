package config

import (
	"bytes"
	"encoding/json"
	"math"
	"reflect"
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

// TestFingerprintFastPath checks that appendFPDoc writes every member of
// fpDoc (a member added to the document must be added to it too), and
// writes the bytes encoding/json writes wherever it says it can: for the
// golden sources, the loaded test config and sources whose strings and
// floats are near the edges of what it takes.
func TestFingerprintFastPath(t *testing.T) {
	if n := reflect.TypeFor[fpDoc[string, map[string]string]]().NumField(); n != fpDocMembers {
		t.Fatalf("fpDoc has %d members, appendFPDoc writes %d: add the new one to appendFPDoc", n, fpDocMembers)
	}
	srcs := goldenSources()
	cfg, err := Load("../testdata/config/full.yaml", envMap(nil))
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range cfg.Sources {
		srcs = append(srcs, *s)
	}
	for _, tc := range []struct {
		str  string
		mult float64
	}{
		{"plain", 2}, {"a&b<c>d\"e\\f", 1.5}, {"", 1e-7}, {"~ !#$%'()*+,-./:;=?@[]^_`{|}", 1e21},
		{"é", 3}, {"tab\there", 0.000001}, {"\x7f", 123456789.125}, {"x", math.Copysign(0, -1)},
		{"y", math.NaN()}, {"z", 5e-324}, {"w", 1e-6}, {"v", 999999999999999999999.0},
	} {
		s := fpSample()
		s.Name, s.Body, s.Backoff.Multiplier = tc.str, tc.str, tc.mult
		s.Headers = map[string]string{tc.str: tc.str, "b": "1", "a": "2"}
		s.Command = []string{tc.str, "x"}
		s.ExpectStatus = []int{200, 204, 304}
		srcs = append(srcs, s)
	}
	fast := 0
	for i := range srcs {
		s := &srcs[i]
		if !validUTF8Strings(s) {
			continue
		}
		doc := newFPDoc(s, identity, emptyList[string], emptyMap)
		got, ok := appendFPDoc(nil, &doc)
		if !ok {
			continue
		}
		fast++
		want, err := json.Marshal(doc)
		if err != nil {
			t.Fatalf("source %d: %v", i, err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("source %d:\nfast %s\njson %s", i, got, want)
		}
	}
	if fast < len(srcs)/2 {
		t.Fatalf("only %d of %d sources took the fast path", fast, len(srcs))
	}
}
