package admin

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
)

// TestGuardAsksTheClientAddress: the guard's Host check applies to the
// clients whose own address is a loopback address (loopback.ClientAddr,
// the status page's meaning too), whatever address they reached.
func TestGuardAsksTheClientAddress(t *testing.T) {
	ok := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusNoContent) })
	cases := []struct {
		local, remote string
		want          int
	}{
		{"127.0.0.1:9090", "127.0.0.1:5000", http.StatusForbidden},
		{"192.0.2.10:9090", "127.0.0.1:5000", http.StatusForbidden}, // bound to loopback, on this machine
		{"127.0.0.1:9090", "192.0.2.7:5000", http.StatusNoContent},  // NAT-forwarded remote client
		{"192.0.2.10:9090", "192.0.2.7:5000", http.StatusNoContent},
	}
	for _, c := range cases {
		r := httptest.NewRequest(http.MethodGet, "/api/sources", nil)
		r.Host = "evil.example"
		r.RemoteAddr = c.remote
		la, err := net.ResolveTCPAddr("tcp", c.local)
		if err != nil {
			t.Fatal(err)
		}
		r = r.WithContext(context.WithValue(r.Context(), http.LocalAddrContextKey, net.Addr(la)))
		w := httptest.NewRecorder()
		guard(ok).ServeHTTP(w, r)
		if w.Code != c.want {
			t.Errorf("local %s remote %s, Host evil.example: %d, want %d", c.local, c.remote, w.Code, c.want)
		}
	}
}
