package config

import (
	"strings"

	"go.yaml.in/yaml/v3"
)

// authKey reads basic_auth or bearer_token_file of an http source. The
// files are read now; their contents are secrets.
func (l *blockReader) authKey(s *Source, p pair, kp path) {
	if s.Auth == nil {
		s.Auth = &Auth{}
	}
	switch p.key {
	case "basic_auth":
		l.basicAuth(s.Auth, p.val, kp)
	case "bearer_token_file":
		v, ok := l.str(p.val, kp)
		if !ok || v == "" {
			if ok {
				l.addf(kp, "must not be empty")
			}
			return
		}
		abs := l.resolve(v)
		tok, ok := l.authFile(abs, kp)
		if !ok {
			return
		}
		if strings.ContainsAny(tok, "\r\n\x00") {
			l.addf(kp, "%s: invalid token (contains a control character)", abs)
			return
		}
		s.Auth.BearerTokenFile, s.Auth.BearerToken = abs, tok
	}
}

// basicAuth reads a basic_auth block: a username (required, without a
// colon) and an optional password_file.
func (l *blockReader) basicAuth(a *Auth, n *yaml.Node, where path) {
	ps, ok := l.pairs(n, where)
	if !ok {
		return
	}
	hasUser := false
	for _, p := range ps {
		kp := where.key(p.key)
		switch p.key {
		case "username":
			hasUser = true
			v, ok := l.str(p.val, kp)
			switch {
			case !ok:
			case v == "":
				l.addf(kp, "must not be empty")
			case strings.ContainsAny(v, ":\r\n\x00"):
				l.addf(kp, "invalid username (contains a colon or a control character)")
			default:
				a.Username = v
			}
		case "password_file":
			v, ok := l.str(p.val, kp)
			if !ok || v == "" {
				continue
			}
			abs := l.resolve(v)
			if pw, ok := l.authFile(abs, kp); ok {
				a.PasswordFile, a.Password = abs, pw
			}
		default:
			l.addf(kp, "unknown key")
		}
	}
	if !hasUser {
		l.addf(where.key("username"), "required")
	}
	if a.Username != "" {
		l.secret(basicCredentials(a.Username, a.Password))
	}
}

// authFile reads a password or token file and records its contents as a
// secret.
func (l *blockReader) authFile(abs string, kp path) (string, bool) {
	v, err := readAuthFile(abs)
	if err != nil {
		l.fileProblem(kp, err)
		return "", false
	}
	l.secret(v)
	return v, true
}

// checkAuth reports an http source with both basic_auth and
// bearer_token_file, or either with an Authorization header.
func (l *blockReader) checkAuth(s *Source, prefix path) {
	a := s.Auth
	if a == nil {
		return
	}
	if *a == (Auth{}) {
		s.Auth = nil // every key had a problem, already reported
		return
	}
	key := "basic_auth"
	if a.BearerTokenFile != "" {
		key = "bearer_token_file"
		if a.Username != "" {
			l.addf(prefix.key(key), "cannot be used together with basic_auth")
		}
	}
	for h := range s.Headers {
		if strings.EqualFold(h, "Authorization") {
			l.addf(prefix.key(key), "cannot be used together with an Authorization header")
		}
	}
}
