package config

import (
	"net/url"
	"sort"
	"strings"
)

// Redactor replaces secrets by "***". A nil *Redactor leaves strings
// unchanged. It is safe for concurrent use.
type Redactor struct {
	r *strings.Replacer
}

// redacted is what a secret is replaced with.
const redacted = "***"

// NewRedactor returns a Redactor over secrets. Empty strings are ignored.
// Besides each secret as given it also redacts its url.QueryEscape and
// url.PathEscape forms (so a secret inside a URL is caught too). Longer
// secrets take precedence over shorter ones they contain.
func NewRedactor(secrets ...string) *Redactor {
	set := make(map[string]struct{}, 3*len(secrets))
	for _, s := range secrets {
		if s == "" {
			continue
		}
		set[s] = struct{}{}
		set[url.QueryEscape(s)] = struct{}{}
		set[url.PathEscape(s)] = struct{}{}
	}
	if len(set) == 0 {
		return &Redactor{}
	}
	list := make([]string, 0, len(set))
	for s := range set {
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
		pairs = append(pairs, s, redacted)
	}
	return &Redactor{r: strings.NewReplacer(pairs...)}
}

// Redact returns s with every secret replaced by "***". A nil receiver
// returns s unchanged.
func (r *Redactor) Redact(s string) string {
	if r == nil || r.r == nil {
		return s
	}
	return r.r.Replace(s)
}
