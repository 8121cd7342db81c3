package config

import (
	"crypto/sha256"
	"crypto/tls"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"hash"
	"strconv"
)

// Client holds the HTTP client settings of an http source (contract section
// 12): tls, proxy_url and http2, from defaults and the source. Load gives
// every source with the same effective settings the same *Client, and a
// source with the built-in settings (system roots, the environment's proxy,
// HTTP/2) none (nil). A Client is immutable once built.
type Client struct {
	TLS TLS
	// ProxyURL is an http, https, socks5 or socks5h URL, or "" for the
	// environment's HTTP_PROXY, HTTPS_PROXY and NO_PROXY. Its password is a
	// secret.
	ProxyURL string
	// HTTP2 says whether the transport may negotiate HTTP/2; nil means true.
	HTTP2 *bool

	conf *tls.Config // built by Load from the files it read; nil otherwise
	sums string      // digests of the contents of the files, set by Load
	key  string      // Key, computed by Load
}

// TLS is the tls block of a source. File paths are absolute; Load reads
// and checks the files (a CA bundle, a client certificate and its key).
type TLS struct {
	CAFile             string // "" = the system roots
	CertFile           string // with KeyFile: the client certificate presented
	KeyFile            string
	ServerName         string // "" = the URL's host
	InsecureSkipVerify bool
	MinVersion         string // "1.0".."1.3"; "" = Go's default (1.2)
}

// Auth is the Authorization of an http source from basic_auth or
// bearer_token_file (never both). The password and the token are read by
// Load (without their trailing newline) and are secrets.
type Auth struct {
	Username        string // basic_auth.username
	PasswordFile    string // basic_auth.password_file, absolute, or ""
	Password        string // its contents
	BearerTokenFile string // absolute, or ""
	BearerToken     string // its contents
}

// Header returns the value of the Authorization header that a carries
// ("Basic ..." or "Bearer ..."), or "" for none.
func (a *Auth) Header() string {
	switch {
	case a == nil:
		return ""
	case a.BearerToken != "":
		return "Bearer " + a.BearerToken
	case a.Username != "":
		return "Basic " + basicCredentials(a.Username, a.Password)
	}
	return ""
}

// basicCredentials is the credentials part of a Basic Authorization header.
func basicCredentials(user, password string) string {
	return base64.StdEncoding.EncodeToString([]byte(user + ":" + password))
}

// isDefault reports whether c has the built-in settings.
func (c *Client) isDefault() bool {
	return c == nil || c.TLS == (TLS{}) && c.ProxyURL == "" && (c.HTTP2 == nil || *c.HTTP2)
}

// HTTP2Enabled reports whether the transport may negotiate HTTP/2.
func (c *Client) HTTP2Enabled() bool {
	return c == nil || c.HTTP2 == nil || *c.HTTP2
}

// Key identifies the effective settings of c: a hex digest of every field
// and of the contents of the files Load read, so that a reload that changes
// a file's contents changes the key. It is "" for the built-in settings.
// Sources with equal keys share one transport; the fingerprint hashes it.
func (c *Client) Key() string {
	if c.isDefault() {
		return ""
	}
	if c.key != "" {
		return c.key
	}
	return c.digest()
}

// digest computes Key.
func (c *Client) digest() string {
	h := sha256.New()
	fpFields(h, "client/1", c.TLS.CAFile, c.TLS.CertFile, c.TLS.KeyFile, c.TLS.ServerName,
		strconv.FormatBool(c.TLS.InsecureSkipVerify), c.TLS.MinVersion, c.ProxyURL,
		strconv.FormatBool(c.HTTP2Enabled()), c.sums)
	return hex.EncodeToString(h.Sum(nil))
}

// digest returns a hex digest of a's fields, or "" for no Authorization.
func (a *Auth) digest() string {
	if a == nil || *a == (Auth{}) {
		return ""
	}
	h := sha256.New()
	fpFields(h, "auth/1", a.Username, a.PasswordFile, a.Password, a.BearerTokenFile, a.BearerToken)
	return hex.EncodeToString(h.Sum(nil))
}

// fpFields writes each field to h, prefixed by its length (unambiguous).
func fpFields(h hash.Hash, fields ...string) {
	for _, f := range fields {
		fmt.Fprintf(h, "%d:", len(f))
		h.Write([]byte(f))
	}
}

// TLSConfig returns a new *tls.Config for c (nil for nil c): the CA pool,
// client certificate, server name, verification and minimum version. A
// Client built by Load has them already; one built by hand reads its files
// now, and a file that cannot be read or parsed is the error.
func (c *Client) TLSConfig() (*tls.Config, error) {
	if c == nil {
		return nil, nil
	}
	if c.conf != nil {
		return c.conf.Clone(), nil
	}
	var ca *caFile
	var pair *keyPair
	if c.TLS.CAFile != "" {
		var err error
		if ca, err = readCA(c.TLS.CAFile); err != nil {
			return nil, fmt.Errorf("tls.ca_file: %w", err)
		}
	}
	if c.TLS.CertFile != "" || c.TLS.KeyFile != "" {
		var err error
		if pair, _, err = readKeyPair(c.TLS.CertFile, c.TLS.KeyFile); err != nil {
			return nil, fmt.Errorf("tls: %w", err)
		}
	}
	return newTLSConfig(c.TLS, ca, pair), nil
}

// tlsVersion returns the crypto/tls constant of a min_version, or false.
func tlsVersion(v string) (uint16, bool) {
	switch v {
	case "1.0":
		return tls.VersionTLS10, true
	case "1.1":
		return tls.VersionTLS11, true
	case "1.2":
		return tls.VersionTLS12, true
	case "1.3":
		return tls.VersionTLS13, true
	}
	return 0, false
}

// newTLSConfig builds the tls.Config of t from its parsed files.
func newTLSConfig(t TLS, ca *caFile, pair *keyPair) *tls.Config {
	minVersion, _ := tlsVersion(t.MinVersion) // 0 for "": Go's default
	conf := &tls.Config{
		ServerName:         t.ServerName,
		InsecureSkipVerify: t.InsecureSkipVerify, //nolint:gosec // the operator asked for it
		MinVersion:         minVersion,
	}
	if ca != nil {
		conf.RootCAs = ca.pool
	}
	if pair != nil {
		conf.Certificates = []tls.Certificate{pair.cert}
	}
	return conf
}
