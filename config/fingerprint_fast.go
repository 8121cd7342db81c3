package config

import (
	"math"
	"slices"
	"strconv"
)

// fpDocMembers is the number of members of fpDoc that appendFPDoc writes; a
// test checks it against fpDoc, so that a member added to the document
// cannot be left out of the fast path.
const fpDocMembers = 28

// appendFPDoc appends the bytes encoding/json's Encoder writes for d (without
// its newline) to b, for the common case: every string printable ASCII and
// every float finite. Otherwise it returns ok == false and the caller
// encodes d with encoding/json. It is the same document written without
// reflection: at 100,000 sources it saves about a tenth of a second of
// config.Load (BENCHMARKS.md, issue 15); TestFingerprintMatchesJSON and
// TestFingerprintFastPath check the bytes against encoding/json's.
func appendFPDoc(b []byte, d *fpDoc[string, map[string]string]) (_ []byte, ok bool) {
	b = strconv.AppendInt(append(b, `{"v":`...), int64(d.V), 10)
	w := fpWriter{b: b, ok: true}
	w.str(`,"name":`, d.Name)
	w.str(`,"type":`, d.Type)
	w.str(`,"schedule":`, d.ScheduleSpec)
	w.int(`,"timeout":`, d.Timeout)
	w.int(`,"backoff_initial":`, d.Initial)
	w.int(`,"backoff_max":`, d.Max)
	w.float(`,"backoff_multiplier":`, d.Multiplier)
	w.float(`,"backoff_jitter":`, d.Jitter)
	w.int(`,"breaker_failures":`, int64(d.Failures))
	w.int(`,"breaker_cooldown":`, d.Cooldown)
	w.int(`,"error_after":`, int64(d.ErrorAfter))
	w.str(`,"limit":`, d.Limit)
	w.str(`,"url":`, d.URL)
	w.str(`,"method":`, d.Method)
	w.dict(`,"headers":`, d.Headers)
	w.str(`,"body":`, d.Body)
	w.b = append(w.b, `,"expect_status":`...)
	if d.ExpectStatus == nil {
		w.b = append(w.b, "null"...)
	} else {
		for i, c := range d.ExpectStatus {
			w.b = append(w.b, "[,"[min(i, 1)]) // non-nil is non-empty (emptyList)
			w.b = strconv.AppendInt(w.b, int64(c), 10)
		}
		w.b = append(w.b, ']')
	}
	w.int(`,"max_body":`, d.MaxBody)
	if d.FollowRedirects != nil {
		w.b = strconv.AppendBool(append(w.b, `,"follow_redirects":`...), *d.FollowRedirects)
	}
	if d.Conditional != nil {
		w.b = strconv.AppendBool(append(w.b, `,"conditional":`...), *d.Conditional)
	}
	if d.ErrorReprobe != 0 {
		w.int(`,"error_reprobe":`, d.ErrorReprobe)
	}
	w.list(`,"command":`, d.Command)
	w.dict(`,"env":`, d.Env)
	w.str(`,"dir":`, d.Dir)
	if d.Client != "" {
		w.str(`,"client":`, d.Client)
	}
	if d.Auth != "" {
		w.str(`,"auth":`, d.Auth)
	}
	if d.Deliver != "" {
		w.str(`,"deliver":`, d.Deliver)
	}
	return append(w.b, '}'), w.ok
}

// fpWriter appends JSON members; ok turns false at the first value the
// fast path does not write as encoding/json would.
type fpWriter struct {
	b  []byte
	ok bool
}

// str appends key and s as a JSON string: printable ASCII, with the
// escapes encoding/json's Encoder uses for it (\" \\ and, HTML-safe,
// \u003c \u003e \u0026). Any other byte ends the fast path.
func (w *fpWriter) str(key, s string) {
	w.b = append(append(w.b, key...), '"')
	w.quoted(s)
	w.b = append(w.b, '"')
}

// quoted appends the inside of s's JSON string.
func (w *fpWriter) quoted(s string) {
	start := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		var esc string
		switch {
		case c == '"':
			esc = `\"`
		case c == '\\':
			esc = `\\`
		case c == '<':
			esc = `\u003c`
		case c == '>':
			esc = `\u003e`
		case c == '&':
			esc = `\u0026`
		case c < 0x20 || c >= 0x7f:
			w.ok = false
			return
		default:
			continue
		}
		w.b = append(append(w.b, s[start:i]...), esc...)
		start = i + 1
	}
	w.b = append(w.b, s[start:]...)
}

// int appends key and n.
func (w *fpWriter) int(key string, n int64) {
	w.b = strconv.AppendInt(append(w.b, key...), n, 10)
}

// float appends key and f as encoding/json writes a float64 ('f' format,
// 'e' for very small or large magnitudes, with its exponent shortened);
// a NaN or an infinity ends the fast path (encoding/json fails on it).
func (w *fpWriter) float(key string, f float64) {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		w.ok = false
		return
	}
	w.b = append(w.b, key...)
	format := byte('f')
	if abs := math.Abs(f); abs != 0 && (abs < 1e-6 || abs >= 1e21) {
		format = 'e'
	}
	w.b = strconv.AppendFloat(w.b, f, format, -1, 64)
	if format == 'e' {
		// clean up e-09 to e-9, as encoding/json does
		if n := len(w.b); n >= 4 && w.b[n-4] == 'e' && w.b[n-3] == '-' && w.b[n-2] == '0' {
			w.b[n-2] = w.b[n-1]
			w.b = w.b[:n-1]
		}
	}
}

// list appends key and xs (null when nil).
func (w *fpWriter) list(key string, xs []string) {
	w.b = append(w.b, key...)
	if xs == nil {
		w.b = append(w.b, "null"...)
		return
	}
	w.b = append(w.b, '[')
	for i, x := range xs {
		if i > 0 {
			w.b = append(w.b, ',')
		}
		w.b = append(w.b, '"')
		w.quoted(x)
		w.b = append(w.b, '"')
	}
	w.b = append(w.b, ']')
}

// dict appends key and m with its keys sorted (null when nil).
func (w *fpWriter) dict(key string, m map[string]string) {
	w.b = append(w.b, key...)
	if m == nil {
		w.b = append(w.b, "null"...)
		return
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	w.b = append(w.b, '{')
	for i, k := range keys {
		if i > 0 {
			w.b = append(w.b, ',')
		}
		w.b = append(w.b, '"')
		w.quoted(k)
		w.b = append(w.b, `":"`...)
		w.quoted(m[k])
		w.b = append(w.b, '"')
	}
	w.b = append(w.b, '}')
}
