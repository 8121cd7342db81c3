package config

import (
	"net/url"
	"strings"

	"go.yaml.in/yaml/v3"
)

// clientSpec is the client settings being read: those of defaults, then,
// in each source's copy, the source's own on top (key by key, like backoff).
type clientSpec struct {
	files  *clientFiles // shared by every copy; nil only outside Load
	id     clientID
	ca     *caFile  // parsed id.tls.CAFile, or nil
	pair   *keyPair // parsed id.tls.CertFile and KeyFile, or nil
	follow *bool    // follow_redirects, nil if not set
	own    path     // the first client key a source sets itself
	hasOwn bool
}

// clientID is the identity of a Client within one Load (file contents are
// read once per path, so equal paths mean equal contents).
type clientID struct {
	tls     TLS
	proxy   string
	noHTTP2 bool
}

// newClientSpec returns the built-in client settings with a new file cache.
func newClientSpec() clientSpec { return clientSpec{files: newClientFiles()} }

// clientKey reads a client key shared by defaults and sources (tls,
// proxy_url, http2, follow_redirects) into c; it reports whether key is
// one of them.
func (l *blockReader) clientKey(c *clientSpec, p pair, kp path) bool {
	switch p.key {
	case "tls":
		l.tlsBlock(c, p.val, kp)
	case "proxy_url":
		l.proxyURL(c, p.val, kp)
	case "http2":
		if v, ok := l.boolean(p.val, kp); ok {
			c.id.noHTTP2 = !v
		}
	case "follow_redirects":
		if v, ok := l.boolean(p.val, kp); ok {
			c.follow = &v
		}
	default:
		return false
	}
	if kp.src != 0 && !c.hasOwn {
		c.own, c.hasOwn = kp, true
	}
	return true
}

// proxyURL reads proxy_url: "" (the environment's proxy) or an http,
// https, socks5 or socks5h URL with a host. Its password is a secret.
func (l *blockReader) proxyURL(c *clientSpec, n *yaml.Node, kp path) {
	v, ok := l.str(n, kp)
	if !ok {
		return
	}
	if v == "" {
		c.id.proxy = ""
		return
	}
	u, err := url.Parse(v)
	if err != nil {
		l.addf(kp, "invalid URL") // the parser's message would quote it, password and all
		return
	}
	if pw, ok := u.User.Password(); ok {
		l.secret(pw)
	}
	switch strings.ToLower(u.Scheme) {
	case "http", "https", "socks5", "socks5h":
	default:
		l.addf(kp, "invalid proxy URL: scheme must be http, https, socks5 or socks5h")
		return
	}
	if u.Hostname() == "" {
		l.addf(kp, "invalid proxy URL: missing host")
		return
	}
	c.id.proxy = v
}

// tlsBlock reads a tls block over c's settings. Files are read and parsed
// now: a problem names the key and the file. cert_file and key_file go
// together in one block.
func (l *blockReader) tlsBlock(c *clientSpec, n *yaml.Node, where path) {
	ps, ok := l.pairs(n, where)
	if !ok {
		return
	}
	var cert, key *pair
	for i := range ps {
		p := &ps[i]
		kp := where.key(p.key)
		switch p.key {
		case "ca_file":
			l.caFileKey(c, p.val, kp)
		case "cert_file":
			cert = p
		case "key_file":
			key = p
		case "server_name":
			if v, ok := l.str(p.val, kp); ok {
				if strings.ContainsAny(v, " \t\r\n\x00/") {
					l.addf(kp, "invalid server name %q", v)
				} else {
					c.id.tls.ServerName = v
				}
			}
		case "insecure_skip_verify":
			if v, ok := l.boolean(p.val, kp); ok {
				c.id.tls.InsecureSkipVerify = v
			}
		case "min_version":
			if v, ok := l.str(p.val, kp); ok {
				if _, ok := tlsVersion(strings.TrimSpace(v)); !ok && v != "" {
					l.addf(kp, `must be "1.0", "1.1", "1.2" or "1.3", got %q`, v)
				} else {
					c.id.tls.MinVersion = strings.TrimSpace(v)
				}
			}
		default:
			l.addf(kp, "unknown key")
		}
	}
	l.keyPairKeys(c, cert, key, where)
}

// caFileKey reads tls.ca_file: "" (the system roots) or a CA bundle.
func (l *blockReader) caFileKey(c *clientSpec, n *yaml.Node, kp path) {
	v, ok := l.str(n, kp)
	if !ok {
		return
	}
	if v == "" {
		c.id.tls.CAFile, c.ca = "", nil
		return
	}
	abs := l.resolve(v)
	ca, err := c.cache().ca(abs)
	if err != nil {
		l.fileProblem(kp, err)
		return
	}
	c.id.tls.CAFile, c.ca = abs, ca
}

// keyPairKeys reads tls.cert_file and tls.key_file of one block: both or
// neither; both "" drops an inherited client certificate.
func (l *blockReader) keyPairKeys(c *clientSpec, cert, key *pair, where path) {
	if cert == nil && key == nil {
		return
	}
	var certPath, keyPath string
	okCert, okKey := true, true
	if cert != nil {
		certPath, okCert = l.str(cert.val, where.key("cert_file"))
	}
	if key != nil {
		keyPath, okKey = l.str(key.val, where.key("key_file"))
	}
	switch {
	case !okCert || !okKey:
		return
	case certPath != "" && keyPath == "":
		l.addf(where.key("key_file"), "required with cert_file")
		return
	case keyPath != "" && certPath == "":
		l.addf(where.key("cert_file"), "required with key_file")
		return
	case certPath == "":
		c.id.tls.CertFile, c.id.tls.KeyFile, c.pair = "", "", nil
		return
	}
	certPath, keyPath = l.resolve(certPath), l.resolve(keyPath)
	kpair, inKey, err := c.cache().pair(certPath, keyPath)
	if err != nil {
		bad := where.key("cert_file")
		if inKey {
			bad = where.key("key_file")
		}
		l.fileProblem(bad, err)
		return
	}
	c.id.tls.CertFile, c.id.tls.KeyFile, c.pair = certPath, keyPath, kpair
}

// fileProblem reports err, the failure to read a file that only the polls
// need, unless the config is loaded for a command that only reads or steers
// the store (Options.ForStore, contract 12.2): then the value is a
// placeholder and the source's fingerprint is unknown.
func (l *decoder) fileProblem(p path, err error) {
	if l.placeholder(p) {
		return
	}
	l.addf(p, "%v", err)
}

// cache returns c's file cache, making one if c has none.
func (c *clientSpec) cache() *clientFiles {
	if c.files == nil {
		c.files = newClientFiles()
	}
	return c.files
}

// finishClient completes a source once all its keys are read: its Client
// (shared with every source of equal settings), follow_redirects, and the
// checks of its Authorization. Client keys on an exec source are problems.
func (l *blockReader) finishClient(s *Source, c *clientSpec, prefix path) {
	switch s.Type {
	case "http":
	case "exec":
		if c.hasOwn {
			l.addf(c.own, "not allowed for type exec")
		}
		return
	default:
		return
	}
	if c.follow != nil {
		s.FollowRedirects = c.follow
	}
	l.checkAuth(s, prefix)
	if c.id == (clientID{}) {
		return
	}
	cl := c.cache().clients[c.id]
	if cl == nil {
		cl = &Client{TLS: c.id.tls, ProxyURL: c.id.proxy, conf: newTLSConfig(c.id.tls, c.ca, c.pair)}
		if c.id.noHTTP2 {
			off := false
			cl.HTTP2 = &off
		}
		if c.ca != nil {
			cl.sums = "ca:" + c.ca.sum
		}
		if c.pair != nil {
			cl.sums += "pair:" + c.pair.sum
		}
		cl.key = cl.digest()
		c.cache().clients[c.id] = cl
	}
	s.Client = cl
}
