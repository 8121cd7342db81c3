package admin

import (
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strconv"
	"strings"

	"github.com/pacer-dev/pacer/internal/loopback"
)

// guard refuses, with 403 and before any handler runs, the two requests a
// web page the operator visits can make the operator's browser send
// (contract section 11.4):
//
//   - a request arriving on a loopback address whose Host is neither an IP
//     address nor localhost: a DNS-rebinding page (evil.example resolved to
//     127.0.0.1) would otherwise read and drive the API as same-origin.
//     An HTTP/1.0 request without Host (old health checkers) passes: a
//     browser always sends one;
//   - a POST (any method but GET, HEAD and OPTIONS) whose Origin header is
//     present and is not the listener's own origin, the scheme://host:port
//     the request was addressed to. A "null" Origin (sandboxed frames,
//     redirects, file: pages) is foreign. A POST without Origin whose
//     Referer is present and is not a page of the listener's own origin is
//     refused the same way (a browser that sends no Origin still names the
//     page that made the request). Clients that send neither (curl,
//     scripts) are not browsers driven by a page, and pass.
//
// "Loopback" is decided per connection (loopback.Request: either end of
// it is a loopback address), so a listener on all interfaces is guarded
// for its loopback clients too.
func guard(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if loopback.Request(r) && r.Host != "" && !localHost(r.Host) {
			writeError(w, http.StatusForbidden, "Host "+quote(r.Host)+
				" refused: on a loopback listener the Host must be an IP address or localhost (DNS rebinding)")
			return
		}
		if !safeMethod(r.Method) {
			if origin, sent := r.Header["Origin"]; sent && !sameOrigin(origin, r) {
				writeError(w, http.StatusForbidden, "cross-origin request refused: Origin "+
					quote(strings.Join(origin, ", "))+" is not this listener's origin "+quote(ownOrigin(r)))
				return
			} else if ref, refSent := r.Header["Referer"]; !sent && refSent && !sameReferer(ref, r) {
				writeError(w, http.StatusForbidden, "cross-origin request refused: Referer "+
					quote(strings.Join(ref, ", "))+" is not a page of this listener's origin "+quote(ownOrigin(r)))
				return
			}
		}
		h.ServeHTTP(w, r)
	})
}

// safeMethod reports whether m changes nothing by definition (RFC 9110).
func safeMethod(m string) bool {
	return m == http.MethodGet || m == http.MethodHead || m == http.MethodOptions
}

// localHost reports whether the Host header names an IP address or
// localhost (with or without a port).
func localHost(hostport string) bool {
	host := hostport
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		host = h
	} else {
		host = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
	}
	if strings.EqualFold(host, "localhost") {
		return true
	}
	_, err := netip.ParseAddr(host)
	return err == nil
}

// ownOrigin is the origin the request was addressed to.
func ownOrigin(r *http.Request) string {
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	return scheme + "://" + r.Host
}

// sameOrigin reports whether the Origin header (all its values) is r's own
// origin. Host names compare without regard to case, as in URLs.
func sameOrigin(origin []string, r *http.Request) bool {
	return len(origin) == 1 && strings.EqualFold(origin[0], ownOrigin(r))
}

// sameReferer reports whether the Referer header (all its values) is a
// page of r's own origin: an absolute URL whose scheme and host:port are
// r's. An empty Referer says nothing and passes.
func sameReferer(ref []string, r *http.Request) bool {
	if len(ref) == 1 && ref[0] == "" {
		return true
	}
	if len(ref) != 1 {
		return false
	}
	u, err := url.Parse(ref[0])
	return err == nil && u.Scheme != "" && u.Host != "" && u.Opaque == "" &&
		strings.EqualFold(u.Scheme+"://"+u.Host, ownOrigin(r))
}

// quote shows a header value in an error message, cut to a sane length.
func quote(s string) string {
	const maxShown = 200
	if len(s) > maxShown {
		s = s[:maxShown] + "..."
	}
	return strconv.Quote(s)
}
