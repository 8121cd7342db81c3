// Package loopback holds the one meaning of "loopback" for the requests
// the admin listener serves, shared by the API's guard (package admin) and
// the status page (package dashboard).
package loopback

import (
	"net"
	"net/http"
	"net/netip"
)

// Request reports whether r came over the loopback interface: the local
// address its connection was accepted on, or the client's address, is a
// loopback address.
//
// The guard asks it before checking the Host of a request (a page in a
// browser on this machine may be a DNS-rebinding one): checking more
// requests is the safe side. Granting is Client's question. The admin guard used to look
// at the local address and the page at the remote one; they agree for
// every connection to a loopback address (it comes from one), and only
// "either end" is right for a client that binds a loopback address and
// connects to another address of this machine (it is still on this
// machine, and the local address alone would miss it).
func Request(r *http.Request) bool {
	if la, ok := r.Context().Value(http.LocalAddrContextKey).(net.Addr); ok && isLoopback(la.String()) {
		return true
	}
	return isLoopback(r.RemoteAddr)
}

// Client reports whether r's client is on this machine by its own address
// (the connection's remote address is a loopback address): the question to
// ask before granting anything, such as the status page's actions without a
// token. Request's "either end" would also count a remote client forwarded
// to a loopback address by NAT (route_localnet, a container's port
// forwarding), whose connection arrives on 127.0.0.1 from its own address.
func Client(r *http.Request) bool { return isLoopback(r.RemoteAddr) }

// isLoopback reports whether hostport's host is a loopback IP address.
func isLoopback(hostport string) bool {
	host, _, err := net.SplitHostPort(hostport)
	if err != nil {
		return false
	}
	a, err := netip.ParseAddr(host)
	return err == nil && a.Unmap().IsLoopback()
}
