package config

import "strings"

// Problem is one validation problem found by Load.
type Problem struct {
	// Path says where the problem is: "concurrency", "defaults.backoff.jitter",
	// "sources[name=api].url", "sources[3].name", or "FILE:LINE" for a YAML
	// syntax error.
	Path string
	// Msg describes the problem. It never contains a secret value.
	Msg string
}

// String returns Path + ": " + Msg.
func (p Problem) String() string { return p.Path + ": " + p.Msg }

// Problems is the error returned by Load: every problem found in the file.
type Problems []Problem

// Error joins the problems' strings with "\n".
func (ps Problems) Error() string {
	var b strings.Builder
	for i, p := range ps {
		if i > 0 {
			b.WriteByte('\n')
		}
		b.WriteString(p.String())
	}
	return b.String()
}
