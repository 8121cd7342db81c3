package config

import (
	"html"
	"sort"
	"strings"
	"unicode/utf16"
	"unicode/utf8"
)

// The Redactor's second pass: a secret may be quoted in an encoding its
// precomputed forms do not list (an upstream answering "bad key
// <k%2by%2f8>" in lowercase hex, a JSON body with \u006b escapes, HTML
// character references, an encoding of an encoding, or a mix of them).
// Rather than enumerate encodings, the text's escapes are decoded and the
// decoded text searched; each match masks the bytes of the text it was
// decoded from.

// maxDecodeDepth bounds how many times a text is decoded (%252F is a
// percent-encoded %2F: two levels).
const maxDecodeDepth = 4

// maxEntity bounds the length of an HTML character reference ("&...;").
const maxEntity = 32

// target is a string the decoding pass looks for, and what the text it
// was decoded from is shown as.
type target struct {
	plain, display string
}

// addTarget adds plain (and, when it holds spaces, its form with "+" for
// each space, as a query encodes them) to ts.
func addTarget(ts []target, plain, display string) []target {
	if plain == "" {
		return ts
	}
	ts = append(ts, target{plain, display})
	if strings.Contains(plain, " ") {
		ts = append(ts, target{strings.ReplaceAll(plain, " ", "+"), display})
	}
	return ts
}

// finder returns the targets sorted longest first, and a Replacer that
// deletes them, used to tell at once whether a decoded text holds any.
func finder(ts []target) ([]target, *strings.Replacer) {
	if len(ts) == 0 {
		return nil, nil
	}
	sort.SliceStable(ts, func(i, j int) bool { return len(ts[i].plain) > len(ts[j].plain) })
	pairs := make([]string, 0, 2*len(ts))
	for _, t := range ts {
		pairs = append(pairs, t.plain, "")
	}
	return ts, strings.NewReplacer(pairs...)
}

// redactDecoded masks in s the runs of text whose decoding, at any
// depth, holds a target.
func (r *Redactor) redactDecoded(s string) string {
	if r.find == nil || !strings.ContainsAny(s, `%\&`) {
		return s
	}
	var hits []hit
	for _, d := range decodeLevels(s) {
		if len(r.find.Replace(d.text)) == len(d.text) {
			continue
		}
		for _, t := range r.targets {
			for from := 0; ; {
				i := strings.Index(d.text[from:], t.plain)
				if i < 0 {
					break
				}
				i += from
				end := i + len(t.plain)
				hits = append(hits, hit{d.src[i][0], d.src[end-1][1], t.display})
				from = end
			}
		}
	}
	if len(hits) == 0 {
		return s
	}
	return applyHits(s, hits)
}

// hit is a byte range of a text to show as display.
type hit struct {
	start, end int
	display    string
}

// applyHits returns s with each hit's range replaced by its display; hits
// that overlap are merged and shown as "***".
func applyHits(s string, hits []hit) string {
	sort.Slice(hits, func(i, j int) bool { return hits[i].start < hits[j].start })
	var b strings.Builder
	last := 0
	for i := 0; i < len(hits); {
		h := hits[i]
		for i++; i < len(hits) && hits[i].start < h.end; i++ {
			h.end, h.display = max(h.end, hits[i].end), redacted
		}
		b.WriteString(s[last:h.start])
		b.WriteString(h.display)
		last = h.end
	}
	b.WriteString(s[last:])
	return b.String()
}

// decoded is a text with its escapes decoded: src[i] is the byte range of
// the original text that byte i of text was decoded from.
type decoded struct {
	text string
	src  [][2]int
}

// decodeLevels returns s decoded once, twice... until nothing changes, at
// most maxDecodeDepth times (none when s holds no escape), each mapped to
// the bytes of s.
func decodeLevels(s string) []decoded {
	var levels []decoded
	d := decoded{text: s}
	for range maxDecodeDepth {
		text, src, changed := decodeOnce(d.text)
		if !changed {
			break
		}
		if d.src != nil {
			for i, r := range src {
				src[i] = [2]int{d.src[r[0]][0], d.src[r[1]-1][1]}
			}
		}
		d = decoded{text: text, src: src}
		levels = append(levels, d)
	}
	return levels
}

// decodeOnce decodes each escape of s once (see escapeAt), mapping each
// byte of the result to the bytes of s it came from.
func decodeOnce(s string) (text string, src [][2]int, changed bool) {
	out := make([]byte, 0, len(s))
	src = make([][2]int, 0, len(s))
	for i := 0; i < len(s); {
		if b, n := escapeAt(s, i); n > 0 {
			for range b {
				src = append(src, [2]int{i, i + n})
			}
			out = append(out, b...)
			i += n
			changed = true
			continue
		}
		out = append(out, s[i])
		src = append(src, [2]int{i, i + 1})
		i++
	}
	return string(out), src, changed
}

// escapeAt decodes the escape at s[i:], if there is one, returning its
// bytes and its length (0: none): %XX in either case; the backslash
// escapes of JSON and Go (\uXXXX with surrogate pairs, \UXXXXXXXX, \xXX,
// \n, \/ ...); an HTML character reference (&#43; &#x2b; &plus;).
func escapeAt(s string, i int) ([]byte, int) {
	switch s[i] {
	case '%':
		if v, ok := hexAt(s, i+1, 2); ok {
			return []byte{byte(v)}, 3
		}
	case '\\':
		return backslashAt(s, i)
	case '&':
		j := strings.IndexByte(s[i+1:min(len(s), i+maxEntity)], ';')
		if j < 0 {
			return nil, 0
		}
		ref := s[i : i+j+2]
		if strings.ContainsAny(ref[1:], "& \t\n") {
			return nil, 0
		}
		if u := html.UnescapeString(ref); u != ref {
			return []byte(u), len(ref)
		}
	}
	return nil, 0
}

// backslashEscape is the byte a one-letter escape of JSON or Go stands for
// (ok false for another letter). A function, not a package-level map: no
// mutable state outside a call.
func backslashEscape(c byte) (byte, bool) {
	switch c {
	case '"', '\\', '/', '\'':
		return c, true
	case 'a':
		return '\a', true
	case 'b':
		return '\b', true
	case 'f':
		return '\f', true
	case 'n':
		return '\n', true
	case 'r':
		return '\r', true
	case 't':
		return '\t', true
	case 'v':
		return '\v', true
	}
	return 0, false
}

// backslashAt decodes the backslash escape at s[i:] (see escapeAt).
func backslashAt(s string, i int) ([]byte, int) {
	if i+1 >= len(s) {
		return nil, 0
	}
	switch c := s[i+1]; c {
	case 'x':
		if v, ok := hexAt(s, i+2, 2); ok {
			return []byte{byte(v)}, 4
		}
	case 'u':
		v, ok := hexAt(s, i+2, 4)
		if !ok {
			return nil, 0
		}
		r, n := rune(v), 6
		if utf16.IsSurrogate(r) && i+12 <= len(s) && s[i+6] == '\\' && s[i+7] == 'u' {
			if lo, ok := hexAt(s, i+8, 4); ok {
				if pair := utf16.DecodeRune(r, rune(lo)); pair != utf8.RuneError {
					r, n = pair, 12
				}
			}
		}
		return utf8.AppendRune(nil, r), n
	case 'U':
		if v, ok := hexAt(s, i+2, 8); ok && utf8.ValidRune(rune(v)) {
			return utf8.AppendRune(nil, rune(v)), 10
		}
	default:
		if b, ok := backslashEscape(c); ok {
			return []byte{b}, 2
		}
	}
	return nil, 0
}

// hexAt parses the n hex digits at s[i:].
func hexAt(s string, i, n int) (uint32, bool) {
	if i+n > len(s) {
		return 0, false
	}
	var v uint32
	for _, c := range []byte(s[i : i+n]) {
		switch {
		case '0' <= c && c <= '9':
			c -= '0'
		case 'a' <= c && c <= 'f':
			c -= 'a' - 10
		case 'A' <= c && c <= 'F':
			c -= 'A' - 10
		default:
			return 0, false
		}
		v = v<<4 | uint32(c)
	}
	return v, true
}
