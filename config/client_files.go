package config

import (
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strings"
)

const (
	// maxClientFile bounds a CA bundle, certificate or key file: the
	// system's bundle is a few hundred KiB; a path to /dev/zero must not
	// hang the loader.
	maxClientFile = 16 << 20
	// maxAuthFile bounds a password or token file (like maxTokenFile).
	maxAuthFile = 64 << 10
)

// caFile is a CA bundle read and parsed by Load.
type caFile struct {
	pool *x509.CertPool
	sum  string // hex SHA-256 of the file's contents
}

// keyPair is a client certificate and its key read and parsed by Load.
type keyPair struct {
	cert tls.Certificate
	sum  string // hex SHA-256 of both files' contents
}

// readLimited reads the regular file path, at most limit bytes. Its error
// names the file but not its contents.
func readLimited(path string, limit int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		var pe *fs.PathError
		if errors.As(err, &pe) {
			err = pe.Err
		}
		return nil, fmt.Errorf("cannot read %s: %w", path, err)
	}
	defer f.Close()
	if fi, err := f.Stat(); err != nil {
		return nil, fmt.Errorf("cannot read %s: %w", path, err)
	} else if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("cannot read %s: not a regular file", path)
	}
	data, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, fmt.Errorf("cannot read %s: %w", path, err)
	}
	if int64(len(data)) > limit {
		return nil, fmt.Errorf("cannot read %s: larger than %d bytes", path, limit)
	}
	return data, nil
}

// readCA reads and parses the CA bundle at path: one or more PEM
// CERTIFICATE blocks, every one of them a valid certificate.
func readCA(path string) (*caFile, error) {
	data, err := readLimited(path, maxClientFile)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	n := 0
	for rest := data; ; {
		var b *pem.Block
		b, rest = pem.Decode(rest)
		if b == nil {
			break
		}
		if b.Type != "CERTIFICATE" {
			continue
		}
		cert, err := x509.ParseCertificate(b.Bytes)
		if err != nil {
			return nil, fmt.Errorf("cannot parse %s: %w", path, err)
		}
		pool.AddCert(cert)
		n++
	}
	if n == 0 {
		return nil, fmt.Errorf("cannot parse %s: no PEM CERTIFICATE block", path)
	}
	return &caFile{pool: pool, sum: sumOf(data)}, nil
}

// readKeyPair reads the client certificate and key files and checks that
// they belong together. On failure inKey says whether the key file (rather
// than the certificate file) is at fault.
func readKeyPair(certPath, keyPath string) (_ *keyPair, inKey bool, _ error) {
	certPEM, err := readLimited(certPath, maxClientFile)
	if err != nil {
		return nil, false, err
	}
	keyPEM, err := readLimited(keyPath, maxClientFile)
	if err != nil {
		return nil, true, err
	}
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, certParses(certPEM), fmt.Errorf("cannot use %s with %s: %w", certPath, keyPath, err)
	}
	return &keyPair{cert: cert, sum: sumOf(certPEM) + sumOf(keyPEM)}, false, nil
}

// certParses reports whether the first PEM CERTIFICATE block of data is a
// valid certificate: if so, a key pair that fails is the key's fault.
func certParses(data []byte) bool {
	for rest := data; ; {
		var b *pem.Block
		if b, rest = pem.Decode(rest); b == nil {
			return false
		}
		if b.Type == "CERTIFICATE" {
			_, err := x509.ParseCertificate(b.Bytes)
			return err == nil
		}
	}
}

// readAuthFile reads a password or token file: its contents without one
// trailing newline (\n or \r\n). The contents are never part of an error.
func readAuthFile(path string) (string, error) {
	data, err := readLimited(path, maxAuthFile)
	if err != nil {
		return "", err
	}
	s := strings.TrimSuffix(string(data), "\n")
	s = strings.TrimSuffix(s, "\r")
	if s == "" {
		return "", fmt.Errorf("%s is empty", path)
	}
	return s, nil
}

// sumOf returns the hex SHA-256 of data.
func sumOf(data []byte) string {
	s := sha256.Sum256(data)
	return hex.EncodeToString(s[:])
}

// clientFiles caches, for one Load, the files read for client settings and
// the Clients built, so that 100,000 sources inheriting defaults.tls read
// and parse each file once and share one *Client.
type clientFiles struct {
	cas     map[string]caResult
	pairs   map[[2]string]pairResult
	clients map[clientID]*Client
}

type caResult struct {
	ca  *caFile
	err error
}

type pairResult struct {
	pair  *keyPair
	inKey bool
	err   error
}

// newClientFiles returns an empty cache.
func newClientFiles() *clientFiles {
	return &clientFiles{cas: map[string]caResult{}, pairs: map[[2]string]pairResult{}, clients: map[clientID]*Client{}}
}

// ca returns readCA(path), read once.
func (f *clientFiles) ca(path string) (*caFile, error) {
	r, ok := f.cas[path]
	if !ok {
		r.ca, r.err = readCA(path)
		f.cas[path] = r
	}
	return r.ca, r.err
}

// pair returns readKeyPair(cert, key), read once.
func (f *clientFiles) pair(cert, key string) (*keyPair, bool, error) {
	k := [2]string{cert, key}
	r, ok := f.pairs[k]
	if !ok {
		r.pair, r.inKey, r.err = readKeyPair(cert, key)
		f.pairs[k] = r
	}
	return r.pair, r.inKey, r.err
}
