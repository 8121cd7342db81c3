package loopback

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
)

func TestRequest(t *testing.T) {
	cases := []struct {
		local, remote string
		want          bool
	}{
		{"127.0.0.1:9090", "127.0.0.1:5000", true},
		{"[::1]:9090", "[::1]:5000", true},
		{"[::ffff:127.0.0.1]:9090", "[::ffff:127.0.0.1]:5000", true},
		{"127.0.0.2:9090", "127.0.0.9:5000", true},
		// A client bound to a loopback address, connected to another
		// address of this machine: on this machine.
		{"192.0.2.10:9090", "127.0.0.1:5000", true},
		{"127.0.0.1:9090", "192.0.2.7:5000", true},
		{"192.0.2.10:9090", "192.0.2.7:5000", false},
		{"[::]:9090", "[2001:db8::1]:5000", false},
		{"", "127.0.0.1:5000", true},
		{"", "not an address", false},
		{"", "localhost:5000", false}, // RemoteAddr is always an IP
	}
	for _, c := range cases {
		r := httptest.NewRequest(http.MethodGet, "/", nil)
		r.RemoteAddr = c.remote
		if c.local != "" {
			la, err := net.ResolveTCPAddr("tcp", c.local)
			if err != nil {
				t.Fatal(err)
			}
			r = r.WithContext(context.WithValue(r.Context(), http.LocalAddrContextKey, net.Addr(la)))
		}
		if got := Request(r); got != c.want {
			t.Errorf("local %q remote %q: %v, want %v", c.local, c.remote, got, c.want)
		}
	}
}

// TestClient: granting asks for the client's own address; a remote client
// forwarded by NAT to a loopback address (its connection arrives on
// 127.0.0.1 from its own address) is not on this machine.
func TestClient(t *testing.T) {
	cases := []struct {
		local, remote string
		want          bool
	}{
		{"127.0.0.1:9090", "127.0.0.1:5000", true},
		{"[::1]:9090", "[::1]:5000", true},
		{"192.0.2.10:9090", "127.0.0.1:5000", true},
		{"127.0.0.1:9090", "192.0.2.7:5000", false}, // NAT to loopback (route_localnet)
		{"192.0.2.10:9090", "192.0.2.7:5000", false},
	}
	for _, c := range cases {
		r := httptest.NewRequest(http.MethodGet, "/", nil)
		r.RemoteAddr = c.remote
		la, err := net.ResolveTCPAddr("tcp", c.local)
		if err != nil {
			t.Fatal(err)
		}
		r = r.WithContext(context.WithValue(r.Context(), http.LocalAddrContextKey, net.Addr(la)))
		if got := Client(r); got != c.want {
			t.Errorf("local %q remote %q: %v, want %v", c.local, c.remote, got, c.want)
		}
	}
}
