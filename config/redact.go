package config

import (
	"net/url"
	"sort"
	"strconv"
	"strings"
)

// Redactor replaces secrets by "***". A nil *Redactor leaves strings
// unchanged. It is safe for concurrent use.
//
// The Redactor of a loaded Config (Config.Redactor) masks secrets where
// they were substituted rather than every occurrence of a short string
// (with SEKRET=x, "/x" in an unrelated path stays "/x"):
//   - every string the loader built with a secret in it (a URL with a
//     ${VAR} or a password in its user info, a header value, a body, an exec
//     argument or env value, a schedule), in the forms an error may quote
//     it (as written, QueryEscape'd, PathEscape'd, Go-quoted, and a URL as
//     net/url writes it), is replaced by its display form, the same string
//     with "***" in place of each secret, when it is at least
//     MinSecretLen bytes long;
//   - a secret of at least MinSecretLen bytes is replaced anywhere, in the
//     same escaped forms (a second line of defence: a command echoing it);
//   - then, in any other encoding (lowercase hex, \u escapes, HTML
//     references, nested or mixed): the text's escapes are decoded and the
//     runs whose decoding holds one of the above are masked (see
//     redact_decode.go).
type Redactor struct {
	r *strings.Replacer
	// targets are the secrets, and the strings holding short ones, that
	// the decoding pass looks for; find deletes them (nil: none).
	targets []target
	find    *strings.Replacer
}

// redacted is what a secret is replaced with.
const redacted = "***"

// MinSecretLen is the length from which a secret, or a string holding one,
// is masked wherever it occurs. A shorter one is masked only inside the
// longer strings it was substituted into: masking every "x" would mask
// unrelated text.
const MinSecretLen = 8

// NewRedactor returns a Redactor that masks each of secrets wherever it
// occurs, whatever its length. Empty strings are ignored. Besides each
// secret as given it also redacts its url.QueryEscape and url.PathEscape
// forms (so a secret inside a URL is caught too). Longer secrets take
// precedence over shorter ones they contain.
func NewRedactor(secrets ...string) *Redactor {
	rs := replacements{}
	var ts []target
	for _, s := range secrets {
		rs.secret(s)
		ts = addTarget(ts, s, redacted)
	}
	return rs.redactor(ts)
}

// masked is a string that holds secrets, and where: spans are the byte
// ranges [start, end) of value that are secret, sorted and disjoint.
type masked struct {
	value string
	spans [][2]int
}

// forms returns the value with f applied to each piece (secret or not),
// and its display form: the same with "***" in place of each secret piece.
func (m masked) forms(f func(string) string) (value, display string) {
	var v, d strings.Builder
	last := 0
	for _, sp := range m.spans {
		lit := f(m.value[last:sp[0]])
		v.WriteString(lit)
		d.WriteString(lit)
		v.WriteString(f(m.value[sp[0]:sp[1]]))
		d.WriteString(redacted)
		last = sp[1]
	}
	lit := f(m.value[last:])
	v.WriteString(lit)
	d.WriteString(lit)
	return v.String(), d.String()
}

// newRedactor returns the Redactor of a loaded config (see Redactor).
func newRedactor(masks []masked, secrets []string) *Redactor {
	rs := replacements{}
	var ts []target
	for _, m := range masks {
		if len(m.value) < MinSecretLen || len(m.spans) == 0 {
			continue
		}
		_, display := m.forms(identity)
		// A string whose secrets are all long is masked by the rules of
		// its secrets (below), in the same forms; only the forms in which
		// net/url rewrites a URL need their own rule. This keeps the
		// Redactor small with 100,000 URLs that hold a ${TOKEN}.
		if hasShortSpan(m) {
			for _, f := range escapes() {
				rs.add(m.forms(f))
			}
			ts = addTarget(ts, m.value, display)
		}
		if strings.Contains(m.value, "://") {
			if u, err := url.Parse(m.value); err == nil {
				for _, norm := range []string{u.String(), u.Redacted()} {
					if norm != m.value {
						rs.add(norm, display)
					}
				}
			}
		}
	}
	for _, s := range secrets {
		if len(s) >= MinSecretLen {
			rs.secret(s)
			ts = addTarget(ts, s, redacted)
		}
	}
	return rs.redactor(ts)
}

// hasShortSpan reports whether a secret in m is shorter than MinSecretLen.
func hasShortSpan(m masked) bool {
	for _, sp := range m.spans {
		if sp[1]-sp[0] < MinSecretLen {
			return true
		}
	}
	return false
}

// escapes returns the forms in which a string may be quoted: as it is, and
// as a URL query, a URL path and Go's %q write it.
func escapes() [4]func(string) string {
	return [...]func(string) string{identity, url.QueryEscape, url.PathEscape, quoteInner}
}

// quoteInner returns strconv.Quote(s) without its quotes.
func quoteInner(s string) string {
	q := strconv.Quote(s)
	return q[1 : len(q)-1]
}

// replacements maps strings to what they are shown as.
type replacements map[string]string

// add maps old to new unless old is empty, unchanged or mapped already.
func (rs replacements) add(old, new string) {
	if old == "" || old == new {
		return
	}
	if _, ok := rs[old]; !ok {
		rs[old] = new
	}
}

// secret maps s and its escaped forms to "***".
func (rs replacements) secret(s string) {
	if s == "" {
		return
	}
	for _, f := range escapes() {
		rs.add(f(s), redacted)
	}
}

// redactor builds the Redactor: at each position the longest match wins;
// the decoding pass looks for ts.
func (rs replacements) redactor(ts []target) *Redactor {
	if len(rs) == 0 {
		return &Redactor{}
	}
	list := make([]string, 0, len(rs))
	for s := range rs {
		list = append(list, s)
	}
	sort.Slice(list, func(i, j int) bool {
		if len(list[i]) != len(list[j]) {
			return len(list[i]) > len(list[j])
		}
		return list[i] < list[j]
	})
	pairs := make([]string, 0, 2*len(list))
	for _, s := range list {
		pairs = append(pairs, s, rs[s])
	}
	red := &Redactor{r: strings.NewReplacer(pairs...)}
	red.targets, red.find = finder(ts)
	return red
}

// Redact returns s with every secret replaced by "***", in whatever
// encoding it is quoted. A nil receiver returns s unchanged.
func (r *Redactor) Redact(s string) string {
	if r == nil || r.r == nil {
		return s
	}
	return r.redactDecoded(r.r.Replace(s))
}

// addSpan adds the secret byte range [start, end) to spans (sorted,
// disjoint), merging it with those it overlaps or touches.
func addSpan(spans [][2]int, start, end int) [][2]int {
	if start >= end {
		return spans
	}
	out := make([][2]int, 0, len(spans)+1)
	i := 0
	for ; i < len(spans) && spans[i][1] < start; i++ {
		out = append(out, spans[i])
	}
	for ; i < len(spans) && spans[i][0] <= end; i++ {
		start, end = min(start, spans[i][0]), max(end, spans[i][1])
	}
	out = append(out, [2]int{start, end})
	return append(out, spans[i:]...)
}

// userinfoPassword returns the byte range of the password in the user info
// of URL v ("http://user:PASSWORD@host/"), as written (maybe
// percent-encoded), and the decoded password; ok is false without one.
func userinfoPassword(v string) (start, end int, pw string, ok bool) {
	i := strings.Index(v, "://")
	if i < 0 {
		return 0, 0, "", false
	}
	i += 3
	auth := v[i:]
	if j := strings.IndexAny(auth, "/?#"); j >= 0 {
		auth = auth[:j]
	}
	at := strings.LastIndexByte(auth, '@')
	if at < 0 {
		return 0, 0, "", false
	}
	c := strings.IndexByte(auth[:at], ':')
	if c < 0 || c+1 == at {
		return 0, 0, "", false
	}
	raw := auth[c+1 : at]
	pw, err := url.PathUnescape(raw)
	if err != nil {
		pw = raw
	}
	return i + c + 1, i + at, pw, true
}
