package config

import (
	"math"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// expand replaces ${VAR} by its value from env, ${file:PATH} by a file's
// contents (see expandFile) and $$ by $. Substituted non-empty values are
// recorded as secrets.
func (l *decoder) expand(s string, p path) (string, bool) {
	if !strings.Contains(s, "$") {
		return s, true
	}
	var b strings.Builder
	var spans [][2]int // where substituted values are in b
	ok := true
	for i := 0; i < len(s); {
		c := s[i]
		switch {
		case c != '$':
			b.WriteByte(c)
			i++
		case i+1 < len(s) && s[i+1] == '$':
			b.WriteByte('$')
			i += 2
		case i+1 < len(s) && s[i+1] == '{':
			end := strings.IndexByte(s[i+2:], '}')
			if end < 0 {
				l.addf(p, "unterminated ${ (write $$ for a literal $)")
				out := b.String()
				l.mask(out, spans)
				return out, false
			}
			name := s[i+2 : i+2+end]
			i += end + 3
			v, good := l.reference(name, p)
			if !good {
				ok = false
			} else if v != "" {
				l.secret(v)
				spans = addSpan(spans, b.Len(), b.Len()+len(v))
				b.WriteString(v)
			}
		default:
			b.WriteByte('$')
			i++
		}
	}
	out := b.String()
	l.mask(out, spans)
	return out, ok
}

// reference returns the value of the reference ${name} in a value at p:
// a file's contents for "file:PATH", else an environment variable's ("" for
// one not set that is taken as a placeholder). ok is false, and the
// problem recorded, when it cannot be expanded.
func (l *decoder) reference(name string, p path) (v string, ok bool) {
	if file, isFile := strings.CutPrefix(name, "file:"); isFile {
		return l.expandFile(file, p)
	}
	if !isVarName(name) {
		l.addf(p, "invalid environment variable name %q in ${...} (write $$ for a literal $)", name)
		return "", false
	}
	v, set := l.env(name)
	if !set && l.placeholder(p) {
		return "", true // expands to "" (Options.ForStore)
	}
	if !set {
		l.addf(p, "environment variable %s is not set", name)
		return "", false
	}
	return v, true
}

// placeholder reports whether a value at p that cannot be expanded is
// taken as a placeholder (Options.ForStore; not in the keys that commands
// on the store use), and records it.
func (l *decoder) placeholder(p path) bool {
	if !l.forStore || l.quiet || p.strict() {
		return false
	}
	l.placeholders++
	if l.lenient == nil {
		l.lenient = map[string]bool{}
	}
	l.lenient[l.where(p)] = true
	return true
}

// scalar returns the expanded value of a non-null scalar; want describes the
// expected value for messages ("an integer").
func (l *decoder) scalar(n *yaml.Node, p path, want string) (string, bool) {
	d := deref(n)
	if d == nil || d.Kind != yaml.ScalarNode || d.ShortTag() == "!!null" {
		l.addf(p, "expected %s, got %s", want, describe(n))
		return "", false
	}
	return l.expand(d.Value, p)
}

// str returns the expanded value of a string scalar; null is "".
func (l *decoder) str(n *yaml.Node, p path) (string, bool) {
	if isNull(n) {
		return "", true
	}
	return l.scalar(n, p, "a string")
}

// integer reads an integer (a YAML int too large for strconv but fitting an
// int is accepted as yaml.v3 decodes it).
func (l *decoder) integer(n *yaml.Node, p path) (int, bool) {
	v, ok := l.scalar(n, p, "an integer")
	if !ok {
		return 0, false
	}
	i, err := strconv.Atoi(strings.TrimSpace(v))
	if err != nil {
		var i64 int64
		if d := deref(n); d.ShortTag() == "!!int" && d.Decode(&i64) == nil && int64(int(i64)) == i64 {
			return int(i64), true
		}
		l.addf(p, "expected an integer, got %q", v)
		return 0, false
	}
	return i, true
}

// boolean reads true or false (a YAML boolean, or a string that expands to
// one of these words).
func (l *decoder) boolean(n *yaml.Node, p path) (bool, bool) {
	v, ok := l.scalar(n, p, "true or false")
	if !ok {
		return false, false
	}
	switch strings.ToLower(strings.TrimSpace(v)) {
	case "true":
		return true, true
	case "false":
		return false, true
	}
	l.addf(p, "expected true or false, got %q", v)
	return false, false
}

// float reads a finite number.
func (l *decoder) float(n *yaml.Node, p path) (float64, bool) {
	v, ok := l.scalar(n, p, "a number")
	if !ok {
		return 0, false
	}
	f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
	if err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
		l.addf(p, "expected a number, got %q", v)
		return 0, false
	}
	return f, true
}

// duration reads a Go duration ("250ms", "1h30m").
func (l *decoder) duration(n *yaml.Node, p path) (time.Duration, bool) {
	v, ok := l.scalar(n, p, "a duration")
	if !ok {
		return 0, false
	}
	d, err := time.ParseDuration(strings.TrimSpace(v))
	if err != nil {
		l.addf(p, "invalid duration %q (use e.g. 250ms, 10s, 1h30m)", v)
		return 0, false
	}
	return d, true
}

// positiveDuration reads a duration greater than 0.
func (l *decoder) positiveDuration(n *yaml.Node, p path) (time.Duration, bool) {
	d, ok := l.duration(n, p)
	if ok && d <= 0 {
		l.addf(p, "must be greater than 0")
		return 0, false
	}
	return d, ok
}

// minInt reads an integer >= min.
func (l *decoder) minInt(n *yaml.Node, p path, min int) (int, bool) {
	i, ok := l.integer(n, p)
	if ok && i < min {
		l.addf(p, "must be >= %d, got %d", min, i)
		return 0, false
	}
	return i, ok
}

// resolve makes p absolute against the config directory.
func (l *decoder) resolve(p string) string { return resolveIn(l.dir, p) }

// isVarName reports whether s is an environment variable name that ${...}
// accepts: [A-Za-z_][A-Za-z0-9_]*.
func isVarName(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c == '_' || (i > 0 && c >= '0' && c <= '9') {
			continue
		}
		return false
	}
	return true
}
