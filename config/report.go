package config

import (
	"fmt"
	"slices"
	"strings"
)

// pendingProblem is formatted at the end, once every secret is known, so
// that string arguments can be redacted before they are quoted.
type pendingProblem struct {
	file   int // 1 + the index of the source file it is in, or 0 (finish orders by it)
	path   string
	format string
	args   []any
}

// addf records a problem. String and error arguments are redacted before
// formatting.
func (l *reporter) addf(p path, format string, args ...any) {
	if l.quiet {
		return
	}
	l.probs = append(l.probs, pendingProblem{file: l.srcFiles.cur, path: l.where(p), format: format, args: args})
}

// secret records s as a secret.
func (l *reporter) secret(s string) {
	if l.rec != nil && !l.quiet && s != "" {
		l.rec.secrets = append(l.rec.secrets, s)
	}
	if l.quiet || s == "" || l.secretOK[s] {
		return
	}
	l.secretOK[s] = true
	l.secrets = append(l.secrets, s)
}

// mask records that value holds secrets at spans (see Redactor); spans
// recorded for the same value before are kept.
func (l *reporter) mask(value string, spans [][2]int) {
	if l.quiet || len(spans) == 0 {
		return
	}
	if l.rec != nil {
		l.rec.masks = append(l.rec.masks, maskCall{value: value, spans: slices.Clone(spans)})
	}
	if l.masks == nil {
		l.masks = map[string]int{}
	}
	i, ok := l.masks[value]
	if !ok {
		l.masks[value] = len(l.maskList)
		l.maskList = append(l.maskList, masked{value: value, spans: spans})
		return
	}
	for _, sp := range spans {
		l.maskList[i].spans = addSpan(l.maskList[i].spans, sp[0], sp[1])
	}
}

// userinfo records the password in the user info of URL v, if any, as a
// secret (rule 3.12): "http://alice:***@host/" is how v is shown.
func (l *reporter) userinfo(v string) {
	start, end, pw, ok := userinfoPassword(v)
	if !ok {
		return
	}
	l.secret(pw)
	l.secret(v[start:end])
	l.mask(v, [][2]int{{start, end}})
}

// containsSecret reports whether s contains a secret recorded so far.
func (l *reporter) containsSecret(s string) bool {
	for _, x := range l.secrets {
		if strings.Contains(s, x) {
			return true
		}
	}
	return false
}

// finish formats, redacts and de-duplicates the problems. An argument that
// is a string the loader built with secrets in it is quoted in its display
// form; any other argument has every secret masked, whatever its length
// (it is the value complained about, not unrelated text); the rest of the
// problem gets the loaded config's redaction (see Redactor).
func (l *reporter) finish() Problems {
	if len(l.probs) == 0 {
		return nil
	}
	strict := NewRedactor(l.secrets...)
	r := newRedactor(l.maskList, l.secrets)
	arg := func(s string) string {
		if i, ok := l.masks[s]; ok {
			_, display := l.maskList[i].forms(identity)
			return display
		}
		return strict.Redact(s)
	}
	seen := map[Problem]bool{}
	var out Problems
	l.byFile()
	for _, p := range l.probs {
		if l.lenient[p.path] {
			continue // a value with a placeholder (Options.ForStore)
		}
		args := make([]any, len(p.args))
		for i, a := range p.args {
			switch v := a.(type) {
			case string:
				args[i] = arg(v)
			case error:
				args[i] = arg(v.Error())
			default:
				args[i] = a
			}
		}
		pr := Problem{Path: r.Redact(p.path), Msg: r.Redact(fmt.Sprintf(p.format, args...))}
		if !seen[pr] {
			seen[pr] = true
			out = append(out, pr)
		}
	}
	return out
}
