package sources

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"
)

// errAdminRedirect fails a poll redirected to the daemon's admin listener.
var errAdminRedirect = errors.New("redirect to the admin listener refused")

// adminAddr is one address the admin API listens on.
type adminAddr struct {
	host string // as configured; "" or an unspecified IP means every local address
	port int
}

// parseAdmin parses the admin listen addresses (host:port); entries that are
// empty or not host:port are ignored (the config loader validates them).
func parseAdmin(listen []string) []adminAddr {
	var out []adminAddr
	for _, l := range listen {
		host, port, err := net.SplitHostPort(l)
		if err != nil || port == "" || portNumber(port) < 0 {
			continue
		}
		out = append(out, adminAddr{host: strings.ToLower(host), port: portNumber(port)})
	}
	return out
}

// checkRedirect is the shared client's redirect rule: at most maxRedirects,
// never to an admin address: refused here from the URL (names resolved
// through resolver), and marked (markHop) so that the connection the hop
// makes or reuses is refused if its address is the admin listener's,
// however the name resolves then.
func checkRedirect(admin []adminAddr, resolver *net.Resolver) func(*http.Request, []*http.Request) error {
	return func(req *http.Request, via []*http.Request) error {
		// via holds the original request and the redirects followed.
		if len(via) > maxRedirects {
			return fmt.Errorf("stopped after %d redirects", maxRedirects)
		}
		if toAdmin(req.Context(), resolver, admin, req.URL) {
			return fmt.Errorf("%w (%s)", errAdminRedirect, hostPort(req.URL))
		}
		markHop(req, admin)
		return nil
	}
}

// toAdmin reports whether u may reach the admin listener: its port is an
// admin port (compared as numbers: ":09090" is port 9090, as the dialer
// reads it) and its host is the admin host or any address of this machine
// (a loopback, an unspecified or an interface address, or a name resolving
// to one). Erring on the side of refusal, a name that cannot be resolved on
// an admin port counts as local.
func toAdmin(ctx context.Context, resolver *net.Resolver, admin []adminAddr, u *url.URL) bool {
	host, port := strings.ToLower(u.Hostname()), portNumber(portOf(u))
	onPort := false
	for _, a := range admin {
		if a.port != port {
			continue
		}
		if a.host == host {
			return true
		}
		onPort = true
	}
	if !onPort {
		return false
	}
	var ips []net.IP
	if ip := net.ParseIP(strings.SplitN(host, "%", 2)[0]); ip != nil {
		ips = []net.IP{ip}
	} else {
		addrs, err := resolver.LookupIPAddr(ctx, host)
		if err != nil {
			return true
		}
		for _, a := range addrs {
			ips = append(ips, a.IP)
		}
	}
	for _, ip := range ips {
		if isLocalIP(ip) {
			return true
		}
	}
	return false
}

func hasIP(addrs []net.Addr, ip net.IP) bool {
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && n.IP.Equal(ip) {
			return true
		}
	}
	return false
}

// portOf returns u's port, or the default port of its scheme.
func portOf(u *url.URL) string {
	if p := u.Port(); p != "" {
		return p
	}
	if strings.EqualFold(u.Scheme, "https") {
		return "443"
	}
	return "80"
}

// hostPort returns u's host:port with the default port filled in.
func hostPort(u *url.URL) string {
	return net.JoinHostPort(strings.ToLower(u.Hostname()), portOf(u))
}

// origin is u's scheme, host and port.
func origin(u *url.URL) string {
	return strings.ToLower(u.Scheme) + "://" + hostPort(u)
}

// pollerRedirect wraps the shared client's redirect rule base with the
// source's: only GET and HEAD follow a redirect, and only when follow is
// true (otherwise the 3xx is the answer); once a redirect leaves the
// original scheme, host and port, no configured header (every header value
// is a secret) nor the Referer (the URL may hold one) is sent again.
func pollerRedirect(follow bool, base func(*http.Request, []*http.Request) error) func(*http.Request, []*http.Request) error {
	return func(req *http.Request, via []*http.Request) error {
		first := via[0]
		if !follow || (first.Method != http.MethodGet && first.Method != http.MethodHead) {
			return http.ErrUseLastResponse
		}
		if base != nil {
			if err := base(req, via); err != nil {
				return err
			}
		}
		home := origin(first.URL)
		left := origin(req.URL) != home
		for _, r := range via[1:] {
			left = left || origin(r.URL) != home
		}
		if left {
			// net/http copied the first request's headers (the configured
			// ones) and set Referer; drop them all.
			clear(req.Header)
		}
		return nil
	}
}
