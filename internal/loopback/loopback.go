// Package loopback holds the one meaning of "loopback" for the requests
// the admin listener serves, shared by the API's guard (package admin) and
// the status page (package dashboard): the client's own address, the
// connection's remote address, is a loopback address.
package loopback

import (
	"net"
	"net/http"
	"net/netip"
)

// ClientAddr reports whether r's client address (the connection's remote
// address) is a loopback address: the client runs on this machine.
//
// Both uses ask it of the same client. The status page grants its actions
// without a token to such a client. The guard refuses such a client a Host
// that is neither an IP address nor localhost: a DNS-rebinding page in a
// browser on this machine (evil.example resolved to 127.0.0.1) connects
// from a loopback address, so the clients the page trusts are the ones the
// guard protects.
//
// The local address is not asked: a remote client forwarded to a loopback
// address by NAT (route_localnet, a container's port forwarding) arrives on
// 127.0.0.1 from its own address, and is not on this machine; a client that
// binds a loopback address and connects to another address of this machine
// is on it.
func ClientAddr(r *http.Request) bool {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return false
	}
	a, err := netip.ParseAddr(host)
	return err == nil && a.Unmap().IsLoopback()
}
