package config

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
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

// Source returns the source named name. The pointer refers into c.Sources.
func (c *Config) Source(name string) (*Source, bool) {
	if c == nil {
		return nil, false
	}
	if i, ok := c.byName[name]; ok && i < len(c.Sources) && c.Sources[i].Name == name {
		return &c.Sources[i], true
	}
	for i := range c.Sources { // index missing or stale (Config built or edited by hand)
		if c.Sources[i].Name == name {
			return &c.Sources[i], true
		}
	}
	return nil, false
}

// Redactor returns a Redactor over c.Secrets (which include the admin token
// when a token file is configured). A nil Config yields a nil Redactor,
// which redacts nothing.
func (c *Config) Redactor() *Redactor {
	if c == nil {
		return nil
	}
	return NewRedactor(c.Secrets...)
}

// fingerprintVersion changes whenever the canonical encoding changes.
const fingerprintVersion = 1

// canonicalSource is the canonical JSON form hashed by Fingerprint.
// Durations are nanoseconds; encoding/json sorts map keys.
type canonicalSource struct {
	V            int               `json:"v"`
	Name         string            `json:"name"`
	Type         string            `json:"type"`
	ScheduleSpec string            `json:"schedule"`
	Timeout      int64             `json:"timeout"`
	Initial      int64             `json:"backoff_initial"`
	Max          int64             `json:"backoff_max"`
	Multiplier   float64           `json:"backoff_multiplier"`
	Jitter       float64           `json:"backoff_jitter"`
	Failures     int               `json:"breaker_failures"`
	Cooldown     int64             `json:"breaker_cooldown"`
	ErrorAfter   int               `json:"error_after"`
	Limit        string            `json:"limit"`
	URL          string            `json:"url"`
	Method       string            `json:"method"`
	Headers      map[string]string `json:"headers"`
	Body         string            `json:"body"`
	ExpectStatus []int             `json:"expect_status"`
	MaxBody      int64             `json:"max_body"`
	Command      []string          `json:"command"`
	Env          map[string]string `json:"env"`
	Dir          string            `json:"dir"`
}

// Fingerprint returns the hex SHA-256 of a canonical JSON encoding of every
// effective field of s except Fingerprint and Schedule (ScheduleSpec is
// included). It is deterministic across runs and reveals no secret. Load
// sets Source.Fingerprint to this value.
func Fingerprint(s *Source) string {
	c := canonicalSource{
		V:            fingerprintVersion,
		Name:         s.Name,
		Type:         s.Type,
		ScheduleSpec: s.ScheduleSpec,
		Timeout:      int64(s.Timeout),
		Initial:      int64(s.Backoff.Initial),
		Max:          int64(s.Backoff.Max),
		Multiplier:   s.Backoff.Multiplier,
		Jitter:       s.Backoff.Jitter,
		Failures:     s.Breaker.Failures,
		Cooldown:     int64(s.Breaker.Cooldown),
		ErrorAfter:   s.ErrorAfter,
		Limit:        s.Limit,
		URL:          s.URL,
		Method:       s.Method,
		Headers:      s.Headers,
		Body:         s.Body,
		ExpectStatus: s.ExpectStatus,
		MaxBody:      s.MaxBody,
		Command:      s.Command,
		Env:          s.Env,
		Dir:          s.Dir,
	}
	// Normalise empty collections so nil and empty hash the same.
	if len(c.Headers) == 0 {
		c.Headers = nil
	}
	if len(c.Env) == 0 {
		c.Env = nil
	}
	if len(c.ExpectStatus) == 0 {
		c.ExpectStatus = nil
	}
	if len(c.Command) == 0 {
		c.Command = nil
	}
	data, err := json.Marshal(c)
	if err != nil {
		// Only NaN or Inf floats can fail; hash their text form instead.
		data = []byte(err.Error())
	}
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:])
}
