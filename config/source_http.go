package config

import (
	"net/url"
	"strings"

	"go.yaml.in/yaml/v3"
)

// httpKey reads a key of an http source (one that isHTTPKey accepts).
func (l *loader) httpKey(s *Source, p pair, kp path) {
	switch p.key {
	case "url":
		if v, ok := l.scalar(p.val, kp, "a URL"); ok {
			s.URL = v
			l.checkURL(v, kp)
		}
	case "method":
		if v, ok := l.scalar(p.val, kp, "a string"); ok {
			if !isToken(v) {
				l.addf(kp, "invalid HTTP method %q", v)
			} else {
				s.Method = strings.ToUpper(v)
			}
		}
	case "headers":
		s.Headers = l.headers(p.val, kp)
	case "body":
		if v, ok := l.str(p.val, kp); ok {
			s.Body = v
		}
	case "basic_auth", "bearer_token_file":
		l.authKey(s, p, kp)
	case "expect_status":
		s.ExpectStatus = l.expectStatus(p.val, kp)
	case "max_body":
		if v, ok := l.scalar(p.val, kp, "a size"); ok {
			if sz, err := parseSize(v); err != nil {
				l.addf(kp, "invalid size %q: %v", v, err)
			} else if sz <= 0 {
				l.addf(kp, "must be greater than 0")
			} else {
				s.MaxBody = sz
			}
		}
	}
}

// checkURL reports a URL that is not http(s)://HOST/...
func (l *loader) checkURL(v string, kp path) {
	u, err := url.Parse(v)
	switch {
	case err != nil:
		l.addf(kp, "invalid URL")
	case u.Scheme != "http" && u.Scheme != "https":
		l.addf(kp, "invalid URL: scheme must be http or https")
	case u.Host == "" || u.Hostname() == "":
		l.addf(kp, "invalid URL: missing host")
	}
}

// isToken reports whether s is an RFC 9110 token.
func isToken(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' {
			continue
		}
		if !strings.ContainsRune("!#$%&'*+-.^_`|~", rune(c)) {
			return false
		}
	}
	return true
}

// headers reads an http source's headers: token names, unique but for
// case, and values without CR, LF or NUL. Every value is a secret.
func (l *loader) headers(n *yaml.Node, where path) map[string]string {
	ps, _ := l.pairs(n, where)
	if len(ps) == 0 {
		return nil
	}
	h := make(map[string]string, len(ps))
	// names seen so far, first spelling; header names are tokens (ASCII),
	// so EqualFold is ToLower equality.
	var buf [8]string
	names := buf[:0]
	for _, p := range ps {
		kp := where.key(p.key)
		if !isToken(p.key) {
			l.addf(kp, "invalid header name")
			continue
		}
		if prev := sameName(names, p.key); prev != "" {
			l.addf(kp, "duplicate header (same as %s, header names are case-insensitive)", prev)
			continue
		}
		names = append(names, p.key)
		v, ok := l.str(p.val, kp)
		if !ok {
			continue
		}
		l.secret(v)
		if strings.ContainsAny(v, "\r\n\x00") {
			l.addf(kp, "invalid header value (contains a control character)")
			continue
		}
		h[p.key] = v
	}
	return h
}

// sameName returns the first of names equal to name but for case, or "".
func sameName(names []string, name string) string {
	for _, s := range names {
		if strings.EqualFold(s, name) {
			return s
		}
	}
	return ""
}

// expectStatus reads an http source's list of accepted statuses.
func (l *loader) expectStatus(n *yaml.Node, where path) []int {
	items, _ := l.items(n, where)
	var out []int
	for i, it := range items {
		ip := where.index(i)
		v, ok := l.integer(it, ip)
		if !ok {
			continue
		}
		if v < 100 || v > 599 {
			l.addf(ip, "status %d is outside 100..599", v)
			continue
		}
		if out == nil {
			out = make([]int, 0, len(items))
		}
		out = append(out, v)
	}
	return out
}
