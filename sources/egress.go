package sources

import (
	"context"
	"net"
	"net/http"
	"net/http/httptrace"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// The admin listener is refused to redirect hops where the address is
// known for certain: at the connection. checkRedirect's look at the URL
// compares what the URL says, and what it says is not what is dialled: a
// name may resolve to another address when dialled (DNS rebinding). So
// checkRedirect marks the context of each redirect hop (hopContext), and
// the transports' dialer refuses a hop's connection to a local address on
// an admin port (refuseAdminHop, its Control hook, which sees the address
// actually dialled); a kept-alive connection handed to a hop is checked
// the same way before anything is written on it (hopGuard.gotConn).
// A source's own request is never marked: a source whose configured URL is
// the admin listener (pacer's own /healthz) is polled.

// newDialer returns the dialer of the http sources' transports, resolving
// names through resolver (nil: the default one); its Control hook refuses
// a redirect hop's connection to the admin listener (refuseAdminHop).
func newDialer(resolver *net.Resolver) *net.Dialer {
	return &net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second, Resolver: resolver,
		ControlContext: refuseAdminHop}
}

// hopKey is the context key of a redirect hop's hopGuard.
type hopKey struct{}

// hopGuard is what a redirect hop's connections are checked against.
type hopGuard struct {
	admin []adminAddr
}

// hopContext returns ctx marked as a redirect hop's: its connections to a
// local address on one of admin's ports are refused. It only adds values:
// a cancelable context here would stay registered with the poll's
// (a worker's long-lived context, see scheduler.pollTimeouts) after the
// hop, one more for every redirect followed.
func hopContext(ctx context.Context, admin []adminAddr) context.Context {
	g := &hopGuard{admin: admin}
	ctx = context.WithValue(ctx, hopKey{}, g)
	return httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{GotConn: g.gotConn})
}

// markHop makes req, a redirect hop about to be sent, carry hopContext.
// net/http sends the very request CheckRedirect was given, so its context
// is replaced in place.
func markHop(req *http.Request, admin []adminAddr) {
	if len(admin) > 0 {
		*req = *req.WithContext(hopContext(req.Context(), admin))
	}
}

// refuseAdminHop is the dialer's Control hook: on a redirect hop (a
// context from hopContext) it refuses address, the IP and port about to be
// connected to, when that is the admin listener.
func refuseAdminHop(ctx context.Context, network, address string, _ syscall.RawConn) error {
	if g, _ := ctx.Value(hopKey{}).(*hopGuard); g != nil && g.refuses(address) {
		return errAdminRedirect
	}
	return nil
}

// gotConn checks the connection a redirect hop is about to be written on
// (new or kept alive): one to the admin listener is closed before a byte
// is written on it. The write fails; net/http retries a request that
// wrote nothing on a kept-alive connection with another connection, and
// a new one is refused when dialled (refuseAdminHop).
func (g *hopGuard) gotConn(info httptrace.GotConnInfo) {
	if addr := info.Conn.RemoteAddr(); addr != nil && g.refuses(addr.String()) {
		info.Conn.Close()
	}
}

// refuses reports whether address (IP:port, as dialled) may be the admin
// listener: its port is an admin port, compared as a number, and its IP is
// one of this host's (a loopback, an unspecified or an interface address:
// a listener on every address answers on each of them, and the admin host
// is one of them).
func (g *hopGuard) refuses(address string) bool {
	host, p, err := net.SplitHostPort(address)
	if err != nil {
		return true
	}
	port, err := strconv.Atoi(p)
	if err != nil {
		return true
	}
	onPort := false
	for _, a := range g.admin {
		onPort = onPort || a.port == port
	}
	if !onPort {
		return false
	}
	ip := net.ParseIP(strings.SplitN(host, "%", 2)[0])
	return ip == nil || isLocalIP(ip)
}

// isLocalIP reports whether ip is an address of this host.
func isLocalIP(ip net.IP) bool {
	if ip.IsLoopback() || ip.IsUnspecified() {
		return true
	}
	local, err := net.InterfaceAddrs()
	return err != nil || hasIP(local, ip)
}

// portNumber returns the number of a port as written in a URL or a listen
// address (leading zeros allowed, as the dialer reads them; a service name
// as the resolver knows it), or -1.
func portNumber(p string) int {
	n, err := net.LookupPort("tcp", p)
	if err != nil {
		return -1
	}
	return n
}
