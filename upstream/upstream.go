// Package upstream holds pure functions of an HTTP answer that pacer's
// per-host rules (contract section 13) act on: the host group a URL belongs
// to, whether an answer says the host's quota is spent, how long an answer
// may be cached, and whether a failed request is a connection-level failure.
// It imports only the standard library and keeps no state, so the
// scheduler, its tests and its fuzz targets call it freely.
package upstream

import (
	"net"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// MaxWait caps every time these functions return: an answer that asks for
// more than a day (or a malformed huge number) is held to a day from now.
const MaxWait = 24 * time.Hour

// HostOf returns the host group name of rawURL (contract 13.1): its host
// and port, lowercased, the default port of its scheme (80 for http, 443
// for https) left out, an IPv6 address in brackets ("api.x", "127.0.0.1:8080",
// "[::1]:8080"). It reports false for an unparsable URL, a URL without a
// host, a scheme other than http or https, or a port out of range.
func HostOf(rawURL string) (string, bool) {
	u, err := url.Parse(strings.TrimSpace(rawURL))
	if err != nil {
		return "", false
	}
	var def string
	switch strings.ToLower(u.Scheme) {
	case "http":
		def = "80"
	case "https":
		def = "443"
	default:
		return "", false
	}
	host := strings.ToLower(u.Hostname())
	if host == "" || strings.ContainsAny(host, " \t/\\@") {
		return "", false
	}
	port := u.Port()
	if port != "" {
		n, err := strconv.Atoi(port)
		if err != nil || n < 1 || n > 65535 {
			return "", false
		}
		port = strconv.Itoa(n) // "0080" names the same group as "80"
	}
	if port == "" || port == def {
		if strings.Contains(host, ":") {
			return "[" + host + "]", true
		}
		return host, true
	}
	return net.JoinHostPort(host, port), true
}

// capUntil returns now+d held to MaxWait, and false when d is not positive
// (a reset that is due already throttles nothing).
func capUntil(now time.Time, d time.Duration) (time.Time, bool) {
	if d <= 0 {
		return time.Time{}, false
	}
	if d > MaxWait {
		d = MaxWait
	}
	return now.Add(d), true
}

// seconds parses a non-negative number of seconds (an integer, or a
// decimal some APIs send) into a duration, held to a little over MaxWait so
// that no huge value overflows.
func seconds(s string) (time.Duration, bool) {
	s = strings.TrimSpace(s)
	if s == "" {
		return 0, false
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || f < 0 || f != f || f > 1e18 {
		return 0, false
	}
	if f > 2*MaxWait.Seconds() {
		return 2 * MaxWait, true
	}
	return time.Duration(f * float64(time.Second)), true
}
