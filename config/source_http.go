package config

import (
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// httpKey reads a key of an http source (one that isHTTPKey accepts).
func (l *sourceReader) httpKey(s *Source, p pair, kp path) {
	switch p.key {
	case "url":
		s.URL = l.httpURL(p.val, kp, s.URL)
	case "method":
		s.Method = l.httpMethod(p.val, kp, s.Method)
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

// checkURL reports a URL that is not http(s)://HOST[:PORT]/..., saying what
// is wrong with it.
func (l *valueReader) checkURL(v string, kp path) {
	if why := urlProblem(v, l.containsSecret(v)); why != "" {
		l.addf(kp, "invalid URL: %s", why)
	}
}

// urlProblem says what is wrong with URL v, or "". With secret set, v holds
// a secret and the answer quotes no part of it.
func urlProblem(v string, secret bool) string {
	if v == "" {
		return "empty"
	}
	for i := 0; i < len(v); i++ {
		switch c := v[i]; {
		case c == ' ':
			return "contains a space (write it as %20)"
		case c < 0x20 || c == 0x7f:
			return "contains a control character"
		}
	}
	if !strings.Contains(v, "://") {
		return "missing scheme: write http://HOST/... or https://HOST/..."
	}
	u, err := url.Parse(v)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) && !secret {
			return ue.Err.Error()
		}
		return "cannot be parsed"
	}
	switch {
	case u.Scheme == "":
		return "missing scheme: write http://HOST/... or https://HOST/..."
	case u.Scheme != "http" && u.Scheme != "https":
		if secret {
			return "unsupported scheme: must be http or https"
		}
		return fmt.Sprintf("unsupported scheme %q: must be http or https", u.Scheme)
	case u.Hostname() == "":
		return "missing host"
	}
	if p := u.Port(); p != "" {
		if n, err := strconv.Atoi(p); err != nil || n < 1 || n > 65535 {
			return "port must be 1..65535"
		}
	}
	return ""
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
func (l *valueReader) headers(n *yaml.Node, where path) map[string]string {
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

// expectStatus reads an http source's accepted statuses: a list, or one
// status (expect_status: 200).
func (l *valueReader) expectStatus(n *yaml.Node, where path) []int {
	var items []*yaml.Node
	if n.Kind == yaml.ScalarNode && n.Tag != "!!null" {
		items = []*yaml.Node{n} // expect_status: 200, a list of one
	} else {
		items, _ = l.items(n, where)
	}
	var out []int
	for i, it := range items {
		ip := where.index(i)
		if it == n {
			ip = where
		}
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
