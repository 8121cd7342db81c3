package config

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"unicode/utf8"
)

// fingerprintVersion is the "v" member of the canonical document; it
// changes whenever the document does.
const fingerprintVersion = 1

// Fingerprint returns the hex SHA-256 of a canonical JSON encoding of every
// effective field of s except Fingerprint and Schedule (ScheduleSpec is
// included). It is deterministic across runs and reveals no secret. Load
// sets Source.Fingerprint to this value.
//
// The document is fpDoc written by encoding/json: its members in the order
// of the struct, durations as integer nanoseconds, maps with their keys in
// sorted order, and an empty map or list as null like a nil one, so that
// nil and empty hash the same. A NaN or infinite float, which Load never
// produces, hashes encoding/json's error text instead. These are the bytes
// every release has hashed, so stored fingerprints stay valid (pinned by
// TestFingerprintGolden), with one exception made in the past: encoding/json
// writes every byte of invalid UTF-8 as \ufffd, so that different strings
// could hash alike; in a source with invalid UTF-8 (only a ${VAR} value can
// bring it into a loaded config) byte XX is written \udcXX (see fpQuote).
func Fingerprint(s *Source) string {
	var f fingerprinter
	return f.fingerprint(s)
}

// fingerprinter computes fingerprints, reusing its buffer and encoder: Load
// computes one per source.
type fingerprinter struct {
	buf bytes.Buffer
	enc *json.Encoder
}

// fingerprint returns Fingerprint(s).
func (f *fingerprinter) fingerprint(s *Source) string {
	if f.enc == nil {
		f.enc = json.NewEncoder(&f.buf)
	}
	f.buf.Reset()
	var err error
	if validUTF8Strings(s) {
		err = f.enc.Encode(newFPDoc(s, identity, emptyList[string], emptyMap))
	} else {
		err = f.enc.Encode(newFPDoc(s, fpQuote, fpQuoteList, fpObject))
	}
	doc := bytes.TrimSuffix(f.buf.Bytes(), []byte("\n")) // Encode's newline was never hashed
	if err != nil {
		doc = []byte(err.Error())
	}
	sum := sha256.Sum256(doc)
	return hex.EncodeToString(sum[:])
}

// fpDoc is the canonical document of a source. Its strings (S) and string
// maps (M) are string and map[string]string, or json.RawMessage written by
// fpQuote and fpObject for a source with invalid UTF-8.
type fpDoc[S, M any] struct {
	V            int     `json:"v"`
	Name         S       `json:"name"`
	Type         S       `json:"type"`
	ScheduleSpec S       `json:"schedule"`
	Timeout      int64   `json:"timeout"`
	Initial      int64   `json:"backoff_initial"`
	Max          int64   `json:"backoff_max"`
	Multiplier   float64 `json:"backoff_multiplier"`
	Jitter       float64 `json:"backoff_jitter"`
	Failures     int     `json:"breaker_failures"`
	Cooldown     int64   `json:"breaker_cooldown"`
	ErrorAfter   int     `json:"error_after"`
	Limit        S       `json:"limit"`
	URL          S       `json:"url"`
	Method       S       `json:"method"`
	Headers      M       `json:"headers"`
	Body         S       `json:"body"`
	ExpectStatus []int   `json:"expect_status"`
	MaxBody      int64   `json:"max_body"`
	// FollowRedirects is written only when false (nil otherwise, omitted):
	// fingerprints stored before the setting existed stay valid.
	FollowRedirects *bool `json:"follow_redirects,omitempty"`
	// Conditional is written only when false, like FollowRedirects, and
	// ErrorReprobe only when set.
	Conditional  *bool `json:"conditional,omitempty"`
	ErrorReprobe int64 `json:"error_reprobe,omitempty"`
	Command      []S   `json:"command"`
	Env          M     `json:"env"`
	Dir          S     `json:"dir"`
	// Client and Auth are digests (Client.Key, Auth.digest) written only
	// when set, like FollowRedirects.
	Client string `json:"client,omitempty"`
	Auth   string `json:"auth,omitempty"`
	// Deliver is the deliver block's digest, written only when set.
	Deliver string `json:"deliver,omitempty"`
	// DependsOn and RespectCache (contract section 13) only when set.
	DependsOn    []S  `json:"depends_on,omitempty"`
	RespectCache bool `json:"respect_cache,omitempty"`
	// Conditions is the digest of the conditions and select (contract
	// section 14), written only when set.
	Conditions string `json:"conditions,omitempty"`
}

// newFPDoc returns the canonical document of s, its strings, lists of
// strings and maps written by str, list and dict.
func newFPDoc[S, M any](s *Source, str func(string) S, list func([]string) []S, dict func(map[string]string) M) fpDoc[S, M] {
	return fpDoc[S, M]{
		V: fingerprintVersion, Name: str(s.Name), Type: str(s.Type), ScheduleSpec: str(s.ScheduleSpec),
		Timeout: int64(s.Timeout), Initial: int64(s.Backoff.Initial), Max: int64(s.Backoff.Max),
		Multiplier: s.Backoff.Multiplier, Jitter: s.Backoff.Jitter,
		Failures: s.Breaker.Failures, Cooldown: int64(s.Breaker.Cooldown), ErrorAfter: s.ErrorAfter,
		Limit: str(s.Limit), URL: str(s.URL), Method: str(s.Method), Headers: dict(s.Headers), Body: str(s.Body),
		ExpectStatus: emptyList(s.ExpectStatus), MaxBody: s.MaxBody, FollowRedirects: onlyFalse(s.FollowRedirects),
		Conditional: onlyFalse(s.Conditional), ErrorReprobe: int64(s.ErrorReprobe),
		Command: list(s.Command), Env: dict(s.Env), Dir: str(s.Dir),
		Client: s.Client.Key(), Auth: s.Auth.digest(), Deliver: s.Deliver.digest(),
		DependsOn: emptyList(list(s.DependsOn)), RespectCache: s.RespectCache,
		Conditions: conditionsDigest(s),
	}
}

// onlyFalse returns b if it points to false, else nil.
func onlyFalse(b *bool) *bool {
	if b != nil && !*b {
		return b
	}
	return nil
}

// identity returns s.
func identity(s string) string { return s }

// emptyList returns xs, or nil if it is empty: encoding/json writes nil as
// null, and an empty list must hash as a nil one.
func emptyList[E any](xs []E) []E {
	if len(xs) == 0 {
		return nil
	}
	return xs
}

// emptyMap returns m, or nil if it is empty (see emptyList).
func emptyMap(m map[string]string) map[string]string {
	if len(m) == 0 {
		return nil
	}
	return m
}

// validUTF8Strings reports whether every string of s is valid UTF-8.
func validUTF8Strings(s *Source) bool {
	for _, x := range [...]string{s.Name, s.Type, s.ScheduleSpec, s.Limit, s.URL, s.Method, s.Body, s.Dir} {
		if !utf8.ValidString(x) {
			return false
		}
	}
	for _, x := range s.Command {
		if !utf8.ValidString(x) {
			return false
		}
	}
	for _, m := range [...]map[string]string{s.Headers, s.Env} {
		for k, v := range m {
			if !utf8.ValidString(k) || !utf8.ValidString(v) {
				return false
			}
		}
	}
	return true
}

// fpQuote returns s as a JSON string written by encoding/json, except that
// each byte XX that is not part of valid UTF-8 is written \udcXX (an
// escape that no valid UTF-8 yields) rather than \ufffd.
func fpQuote(s string) json.RawMessage {
	b := []byte{'"'}
	for s != "" {
		n := validPrefix(s)
		q, _ := json.Marshal(s[:n]) // a string always encodes
		b = append(b, q[1:len(q)-1]...)
		if n < len(s) {
			b = fmt.Appendf(b, `\udc%02x`, s[n])
			n++
		}
		s = s[n:]
	}
	return append(b, '"')
}

// validPrefix returns the length of the longest prefix of s that is valid
// UTF-8.
func validPrefix(s string) int {
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			return i
		}
		i += size
	}
	return len(s)
}

// fpQuoteList is xs written by fpQuote; nil if empty.
func fpQuoteList(xs []string) []json.RawMessage {
	if len(xs) == 0 {
		return nil
	}
	out := make([]json.RawMessage, len(xs))
	for i, x := range xs {
		out[i] = fpQuote(x)
	}
	return out
}

// fpObject is m as encoding/json writes a map (keys sorted), its keys and
// values written by fpQuote; nil (null) if empty.
func fpObject(m map[string]string) json.RawMessage {
	if len(m) == 0 {
		return nil
	}
	b := []byte{'{'}
	for i, k := range slices.Sorted(maps.Keys(m)) {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(append(append(b, fpQuote(k)...), ':'), fpQuote(m[k])...)
	}
	return append(b, '}')
}
