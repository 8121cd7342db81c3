package config

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
)

// maxTokenFile bounds what ReadToken reads: a token is short, and a
// token_file pointing at /dev/zero must not hang the daemon.
const maxTokenFile = 64 << 10

// ReadToken reads the admin token from path: a regular file of at most
// 64 KiB, whose surrounding white space is ignored. The token is never part
// of the error.
func ReadToken(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return "", err
	}
	if !fi.Mode().IsRegular() {
		return "", fmt.Errorf("%s is not a regular file", path)
	}
	data, err := io.ReadAll(io.LimitReader(f, maxTokenFile+1))
	if err != nil {
		return "", err
	}
	if len(data) > maxTokenFile {
		return "", fmt.Errorf("%s is larger than %d bytes", path, maxTokenFile)
	}
	tok := strings.TrimSpace(string(data))
	if tok == "" {
		return "", errors.New("token file " + path + " is empty")
	}
	return tok, nil
}

// Source returns the source named name: an element of c.Sources, never to
// be written (a later Load may share it).
func (c *Config) Source(name string) (*Source, bool) {
	if c == nil {
		return nil, false
	}
	if i, ok := c.idx.byName[name]; ok && i < len(c.Sources) && c.Sources[i].Name == name {
		return c.Sources[i], true
	}
	for i := range c.Sources { // index missing or stale (Config built or edited by hand)
		if c.Sources[i].Name == name {
			return c.Sources[i], true
		}
	}
	return nil, false
}

// Redactor returns the Redactor of c (see Redactor): it masks the strings
// Load built with secrets in them by their display forms, and the secrets
// of c.Secrets of at least MinSecretLen bytes wherever they occur. A nil
// Config yields a nil Redactor, which redacts nothing.
func (c *Config) Redactor() *Redactor {
	if c == nil {
		return nil
	}
	return newRedactor(c.masks, c.Secrets)
}
