//go:build !linux

package cli

// trimTextRSS does nothing outside Linux (see textrss_linux.go).
func trimTextRSS() {}
