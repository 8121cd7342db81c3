package config

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// maxTokenFile bounds what ReadToken reads: a token is short, and a
// token_file pointing at /dev/zero must not hang the daemon.
const maxTokenFile = 64 << 10

// ReadToken reads the admin token from path: a regular file of at most
// 64 KiB, whose surrounding white space is ignored. The token is never part
// of the error.
func ReadToken(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return "", err
	}
	if !fi.Mode().IsRegular() {
		return "", fmt.Errorf("%s is not a regular file", path)
	}
	data, err := io.ReadAll(io.LimitReader(f, maxTokenFile+1))
	if err != nil {
		return "", err
	}
	if len(data) > maxTokenFile {
		return "", fmt.Errorf("%s is larger than %d bytes", path, maxTokenFile)
	}
	tok := strings.TrimSpace(string(data))
	if tok == "" {
		return "", errors.New("token file " + path + " is empty")
	}
	return tok, nil
}

// Source returns the source named name. The pointer refers into c.Sources.
func (c *Config) Source(name string) (*Source, bool) {
	if c == nil {
		return nil, false
	}
	if i, ok := c.byName[name]; ok && i < len(c.Sources) && c.Sources[i].Name == name {
		return &c.Sources[i], true
	}
	for i := range c.Sources { // index missing or stale (Config built or edited by hand)
		if c.Sources[i].Name == name {
			return &c.Sources[i], true
		}
	}
	return nil, false
}

// Redactor returns a Redactor over c.Secrets (which include the admin token
// when a token file is configured). A nil Config yields a nil Redactor,
// which redacts nothing.
func (c *Config) Redactor() *Redactor {
	if c == nil {
		return nil
	}
	return NewRedactor(c.Secrets...)
}

// fingerprintVersion changes whenever the canonical encoding changes. (It
// did not change when encoding/json gave way to a hand-written encoder: the
// bytes are the same, except for invalid UTF-8, see Fingerprint.)
const fingerprintVersion = 1

// Fingerprint returns the hex SHA-256 of a canonical JSON encoding of every
// effective field of s except Fingerprint and Schedule (ScheduleSpec is
// included). It is deterministic across runs and reveals no secret. Load
// sets Source.Fingerprint to this value.
//
// The encoding is one JSON object with these members, in this order: v (the
// fingerprintVersion), name, type, schedule, timeout, backoff_initial,
// backoff_max, backoff_multiplier, backoff_jitter, breaker_failures,
// breaker_cooldown, error_after, limit, url, method, headers, body,
// expect_status, max_body, follow_redirects (only when false, so that
// older fingerprints stay valid), command, env, dir. Durations are integer
// nanoseconds, maps have their keys in sorted order, and an empty map or
// list is null like a nil one, so nil and empty hash the same. Strings and
// floats are written as encoding/json.Marshal writes them (HTML characters
// escaped; floats in the shortest form that round-trips, with an exponent
// outside [1e-6, 1e21)): the encoder is written by hand for speed, and its
// output is byte for byte what version 1 produced with encoding/json, so
// that fingerprints stored by earlier releases stay valid. The one
// exception is a string with invalid UTF-8 (only a ${VAR} value can bring
// one into a loaded config): encoding/json wrote every invalid byte as
// \ufffd, so that such strings could hash alike; each byte XX is now written
// \udcXX. A NaN or infinite float, which Load never produces, hashes the
// text "json: unsupported value: " and the float instead.
func Fingerprint(s *Source) string {
	var buf [512]byte
	var e fpEncoder
	fp, _ := e.fingerprint(buf[:0], s)
	return fp
}

// fpEncoder computes fingerprints. Load's keeps the encoding of the
// settings (timeout through error_after) it wrote last, which the sources
// of a config mostly share.
type fpEncoder struct {
	memo     bool // keep settings and text
	settings fpSettings
	text     []byte // encoding of settings; nil until set
}

// fpSettings are the fields encoded from "timeout" to "error_after". The
// floats are kept as bits: 0 and -0 are written differently.
type fpSettings struct {
	timeout, initial, max time.Duration
	multiplier, jitter    uint64
	failures              int
	cooldown              time.Duration
	errorAfter            int
}

// fingerprint returns Fingerprint(s) and buf, grown if need be, which it
// used to encode s.
func (e *fpEncoder) fingerprint(buf []byte, s *Source) (string, []byte) {
	buf = e.appendCanonical(buf[:0], s)
	sum := sha256.Sum256(buf)
	var out [2 * sha256.Size]byte
	hex.Encode(out[:], sum[:])
	return string(out[:]), buf
}

// appendCanonical appends the canonical encoding of s hashed by Fingerprint.
func (e *fpEncoder) appendCanonical(b []byte, s *Source) []byte {
	for _, f := range [...]float64{s.Backoff.Multiplier, s.Backoff.Jitter} {
		if math.IsNaN(f) || math.IsInf(f, 0) {
			b = append(b, "json: unsupported value: "...)
			return strconv.AppendFloat(b, f, 'g', -1, 64)
		}
	}
	b = append(b, `{"v":`...)
	b = strconv.AppendInt(b, fingerprintVersion, 10)
	b = append(b, `,"name":`...)
	b = appendJSONString(b, s.Name)
	b = append(b, `,"type":`...)
	b = appendJSONString(b, s.Type)
	b = append(b, `,"schedule":`...)
	b = appendJSONString(b, s.ScheduleSpec)
	b = e.appendSettings(b, s)
	b = append(b, `,"limit":`...)
	b = appendJSONString(b, s.Limit)
	b = append(b, `,"url":`...)
	b = appendJSONString(b, s.URL)
	b = append(b, `,"method":`...)
	b = appendJSONString(b, s.Method)
	b = append(b, `,"headers":`...)
	b = appendJSONMap(b, s.Headers)
	b = append(b, `,"body":`...)
	b = appendJSONString(b, s.Body)
	b = append(b, `,"expect_status":`...)
	b = appendJSONList(b, s.ExpectStatus, func(b []byte, c int) []byte { return strconv.AppendInt(b, int64(c), 10) })
	b = append(b, `,"max_body":`...)
	b = strconv.AppendInt(b, s.MaxBody, 10)
	if s.FollowRedirects != nil && !*s.FollowRedirects {
		// Only the non-default value is hashed: fingerprints stored before
		// the field existed stay valid.
		b = append(b, `,"follow_redirects":false`...)
	}
	b = append(b, `,"command":`...)
	b = appendJSONList(b, s.Command, appendJSONString)
	b = append(b, `,"env":`...)
	b = appendJSONMap(b, s.Env)
	b = append(b, `,"dir":`...)
	b = appendJSONString(b, s.Dir)
	return append(b, '}')
}

// appendSettings appends the members from timeout to error_after.
func (e *fpEncoder) appendSettings(b []byte, s *Source) []byte {
	set := fpSettings{
		timeout: s.Timeout, initial: s.Backoff.Initial, max: s.Backoff.Max,
		multiplier: math.Float64bits(s.Backoff.Multiplier), jitter: math.Float64bits(s.Backoff.Jitter),
		failures: s.Breaker.Failures, cooldown: s.Breaker.Cooldown, errorAfter: s.ErrorAfter,
	}
	if e.memo && e.text != nil && set == e.settings {
		return append(b, e.text...)
	}
	start := len(b)
	b = append(b, `,"timeout":`...)
	b = strconv.AppendInt(b, int64(s.Timeout), 10)
	b = append(b, `,"backoff_initial":`...)
	b = strconv.AppendInt(b, int64(s.Backoff.Initial), 10)
	b = append(b, `,"backoff_max":`...)
	b = strconv.AppendInt(b, int64(s.Backoff.Max), 10)
	b = append(b, `,"backoff_multiplier":`...)
	b = appendJSONFloat(b, s.Backoff.Multiplier)
	b = append(b, `,"backoff_jitter":`...)
	b = appendJSONFloat(b, s.Backoff.Jitter)
	b = append(b, `,"breaker_failures":`...)
	b = strconv.AppendInt(b, int64(s.Breaker.Failures), 10)
	b = append(b, `,"breaker_cooldown":`...)
	b = strconv.AppendInt(b, int64(s.Breaker.Cooldown), 10)
	b = append(b, `,"error_after":`...)
	b = strconv.AppendInt(b, int64(s.ErrorAfter), 10)
	if e.memo {
		e.settings, e.text = set, append(e.text[:0], b[start:]...)
	}
	return b
}

// appendJSONList appends xs as a JSON list of elem's encodings; an empty or
// nil list is null.
func appendJSONList[T any](b []byte, xs []T, elem func([]byte, T) []byte) []byte {
	if len(xs) == 0 {
		return append(b, "null"...)
	}
	for i, x := range xs {
		b = append(b, sep(i, '['))
		b = elem(b, x)
	}
	return append(b, ']')
}

// appendJSONMap appends m as a JSON object with sorted keys; an empty or
// nil map is null.
func appendJSONMap(b []byte, m map[string]string) []byte {
	if len(m) == 0 {
		return append(b, "null"...)
	}
	var arr [8]string
	keys := arr[:0]
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for i, k := range keys {
		b = append(b, sep(i, '{'))
		b = appendJSONString(b, k)
		b = append(b, ':')
		b = appendJSONString(b, m[k])
	}
	return append(b, '}')
}

// sep is what precedes the i-th element of a JSON list or object that
// opens with open.
func sep(i int, open byte) byte {
	if i == 0 {
		return open
	}
	return ','
}

// appendJSONFloat appends a finite f as encoding/json writes a float64.
func appendJSONFloat(b []byte, f float64) []byte {
	format := byte('f')
	if abs := math.Abs(f); abs != 0 && (abs < 1e-6 || abs >= 1e21) {
		format = 'e'
	}
	b = strconv.AppendFloat(b, f, format, -1, 64)
	if format == 'e' { // e-09 is written e-9
		if n := len(b); n >= 4 && b[n-4] == 'e' && b[n-3] == '-' && b[n-2] == '0' {
			b[n-2] = b[n-1]
			b = b[:n-1]
		}
	}
	return b
}

// appendJSONString appends s quoted as encoding/json writes a string: \"
// and \\ escaped, control characters, <, > and & as \b \f \n \r \t or
// \u00XX, U+2028 and U+2029 as \u2028 and \u2029. Unlike encoding/json,
// which writes \ufffd for every byte of invalid UTF-8, it writes byte XX as
// \udcXX (an escape that no valid UTF-8 yields), so that two strings never
// have the same encoding.
func appendJSONString(b []byte, s string) []byte {
	const hexDigits = "0123456789abcdef"
	// safe has a bit set for each ASCII byte written as is: not a control
	// character, ", \\, <, > or &.
	safe := [2]uint64{
		0xFFFFFFFF00000000 &^ (1<<'"' | 1<<'&' | 1<<'<' | 1<<'>'),
		^uint64(0) &^ (1 << ('\\' - 64)),
	}
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if safe[c>>6&1]>>(c&63)&1 != 0 {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '\\', '"':
				b = append(b, '\\', c)
			case '\b':
				b = append(b, '\\', 'b')
			case '\f':
				b = append(b, '\\', 'f')
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xF])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', 'd', 'c', hexDigits[s[i]>>4], hexDigits[s[i]&0xF])
		case r == '\u2028' || r == '\u2029':
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hexDigits[r&0xF])
		default:
			i += size
			continue
		}
		i += size
		start = i
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}
