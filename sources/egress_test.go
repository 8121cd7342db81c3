package sources

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestHTTPRedirectAdminPortAsNumber: a redirect to the admin port written
// with leading zeros (":0P", ":00P"), which the dialer reads as P, is
// refused like ":P", for GET and HEAD, to 127.0.0.1, localhost and [::1],
// whether the admin listens on its address or on every one.
func TestHTTPRedirectAdminPortAsNumber(t *testing.T) {
	admin, adminHits := recorder(t, nil)
	a, _ := recorder(t, redirectTo)
	port := fmt.Sprint(admin.Listener.Addr().(*net.TCPAddr).Port)
	for _, listen := range []string{admin.Listener.Addr().String(), "0.0.0.0:" + port} {
		tr := NewTransport(2)
		t.Cleanup(tr.CloseIdleConnections)
		client := NewClient(tr, []string{listen})
		for _, to := range []string{"http://127.0.0.1:0" + port, "http://localhost:00" + port, "http://[::1]:0" + port} {
			for _, method := range []string{"GET", "HEAD"} {
				src := httpSource(a.URL + "/r?to=" + to + "/api/sources")
				src.Method = method
				res, _ := pollWithin(t, NewHTTP(src, client, nil), 5*time.Second)
				if want := "redirect to the admin listener refused"; !strings.Contains(errText(res.Err), want) {
					t.Errorf("admin %s, %s to %s: Err = %q, want %q", listen, method, to, errText(res.Err), want)
				}
			}
		}
	}
	if got := drain(adminHits); len(got) != 0 {
		t.Errorf("the admin listener was reached: %+v", got)
	}
}

// dnsServer starts a DNS server on loopback that answers every A query
// with the next address of answers (the last one once they run out) and
// every other query with no record, and returns a resolver that asks it.
func dnsServer(t *testing.T, answers ...string) *net.Resolver {
	t.Helper()
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	t.Cleanup(func() { pc.Close(); wg.Wait() })
	wg.Add(1)
	go func() {
		defer wg.Done()
		buf := make([]byte, 1500)
		n := 0
		for {
			k, from, err := pc.ReadFrom(buf)
			if err != nil {
				return
			}
			ip := net.ParseIP(answers[min(n, len(answers)-1)]).To4()
			resp, isA := dnsAnswer(buf[:k], ip)
			if isA {
				n++
			}
			if resp != nil {
				pc.WriteTo(resp, from)
			}
		}
	}()
	return &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "udp", pc.LocalAddr().String())
	}}
}

// dnsAnswer answers the one-question DNS query q: with ip when it asks for
// an A record (isA), with no record otherwise; nil for a malformed query.
func dnsAnswer(q []byte, ip net.IP) (resp []byte, isA bool) {
	if len(q) < 12 || q[4] != 0 || q[5] != 1 {
		return nil, false
	}
	i := 12
	for i < len(q) && q[i] != 0 {
		i += int(q[i]) + 1
	}
	end := i + 5 // the root label, type and class
	if end > len(q) {
		return nil, false
	}
	isA = q[i+1] == 0 && q[i+2] == 1
	an := byte(0)
	if isA {
		an = 1
	}
	resp = append([]byte{q[0], q[1], 0x81, 0x80, 0, 1, 0, an, 0, 0, 0, 0}, q[12:end]...)
	if isA {
		resp = append(resp, 0xc0, 12, 0, 1, 0, 1, 0, 0, 0, 0, 0, 4)
		resp = append(resp, ip...)
	}
	return resp, isA
}

// rebindClient returns a client that follows redirects under the rule of
// admin listening on listen, whose redirect check and dialer both resolve
// names through resolver.
func rebindClient(t *testing.T, listen string, resolver *net.Resolver) *http.Client {
	t.Helper()
	tr := NewTransport(2)
	tr.DialContext = newDialer(resolver).DialContext
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr, CheckRedirect: checkRedirect(parseAdmin([]string{listen}), resolver)}
}

// TestHTTPRedirectRebinding: a redirect to a name on the admin port whose
// DNS answer is not local when the redirect is checked and local when the
// connection is made (DNS rebinding) is refused when dialing, from the
// address dialled. A source whose own URL is that name and port is polled
// (the demo config polls pacer's own /healthz).
func TestHTTPRedirectRebinding(t *testing.T) {
	admin, adminHits := recorder(t, nil)
	a, _ := recorder(t, redirectTo)
	port := fmt.Sprint(admin.Listener.Addr().(*net.TCPAddr).Port)
	target := "http://rebind.test:" + port
	for _, listen := range []string{"0.0.0.0:" + port, admin.Listener.Addr().String()} {
		// The check sees 192.0.2.1 (TEST-NET), the dialer 127.0.0.1.
		client := rebindClient(t, listen, dnsServer(t, "192.0.2.1", "127.0.0.1"))
		src := httpSource(a.URL + "/r?to=" + target + "/api/sources")
		res, _ := pollWithin(t, NewHTTP(src, client, nil), 5*time.Second)
		if want := "127.0.0.1:" + port + ": redirect to the admin listener refused"; !strings.Contains(errText(res.Err), want) {
			t.Errorf("admin %s: Err = %q, want %q", listen, errText(res.Err), want)
		}
		if got := drain(adminHits); len(got) != 0 {
			t.Errorf("admin %s: the admin listener was reached: %+v", listen, got)
		}
		// The source's own URL on the admin listener is polled.
		client = rebindClient(t, listen, dnsServer(t, "127.0.0.1"))
		own := httpSource(target + "/healthz")
		if res, _ := pollWithin(t, NewHTTP(own, client, nil), 5*time.Second); res.Err != nil {
			t.Errorf("admin %s: a source on the admin listener: %v", listen, res.Err)
		}
		if got := drain(adminHits); len(got) != 1 || got[0].path != "/healthz" {
			t.Errorf("admin %s: the admin listener saw %+v, want one GET /healthz", listen, got)
		}
	}
}

// TestHTTPRedirectRebindingReusedConnection: a redirect hop is not sent
// over a kept-alive connection to the admin listener either (one a source
// whose own URL is the admin listener left idle under the same name).
func TestHTTPRedirectRebindingReusedConnection(t *testing.T) {
	admin, adminHits := recorder(t, nil)
	a, _ := recorder(t, redirectTo)
	port := fmt.Sprint(admin.Listener.Addr().(*net.TCPAddr).Port)
	target := "http://rebind.test:" + port
	// The source's own poll dials 127.0.0.1, the redirect's check then
	// sees 192.0.2.1; any later dial gets 127.0.0.1.
	client := rebindClient(t, "0.0.0.0:"+port, dnsServer(t, "127.0.0.1", "192.0.2.1", "127.0.0.1"))
	if res, _ := pollWithin(t, NewHTTP(httpSource(target+"/healthz"), client, nil), 5*time.Second); res.Err != nil {
		t.Fatalf("a source on the admin listener: %v", res.Err)
	}
	src := httpSource(a.URL + "/r?to=" + target + "/api/sources")
	res, _ := pollWithin(t, NewHTTP(src, client, nil), 5*time.Second)
	if want := "redirect to the admin listener refused"; !strings.Contains(errText(res.Err), want) {
		t.Errorf("Err = %q, want %q", errText(res.Err), want)
	}
	if got := drain(adminHits); len(got) != 1 || got[0].path != "/healthz" {
		t.Errorf("the admin listener saw %+v, want only the source's own GET /healthz", got)
	}
}

// TestDialRefusesAdminOnRedirectHop: the dialer's check sees the address
// dialled (any resolution of any name ends there): on a redirect hop,
// every local address on an admin port is refused, other ports and
// other addresses are not; outside a redirect hop nothing is refused.
func TestDialRefusesAdminOnRedirectHop(t *testing.T) {
	admin := parseAdmin([]string{"0.0.0.0:8080", "127.0.0.1:9090"})
	hop := hopContext(context.Background(), admin)
	local := []string{"127.0.0.1", "127.0.0.2", "0.0.0.0", "::1", "::"}
	if addrs, err := net.InterfaceAddrs(); err == nil {
		for _, a := range addrs {
			if n, ok := a.(*net.IPNet); ok && !n.IP.IsLoopback() && !n.IP.IsLinkLocalUnicast() {
				local = append(local, n.IP.String())
			}
		}
	}
	for _, ip := range local {
		for _, port := range []string{"8080", "9090"} {
			addr := net.JoinHostPort(ip, port)
			if err := refuseAdminHop(hop, "tcp", addr, nil); err == nil {
				t.Errorf("redirect hop dialing %s: not refused", addr)
			}
			if err := refuseAdminHop(context.Background(), "tcp", addr, nil); err != nil {
				t.Errorf("a source's own dial to %s: %v", addr, err)
			}
		}
	}
	for _, addr := range []string{"127.0.0.1:8081", "192.0.2.1:8080", "[2001:db8::1]:9090"} {
		if err := refuseAdminHop(hop, "tcp", addr, nil); err != nil {
			t.Errorf("redirect hop dialing %s: %v", addr, err)
		}
	}
}

// plainCtx is a context the context package does not know: what derives a
// cancelable context from it starts a goroutine that waits for it (or for
// that context's cancellation).
type plainCtx struct{ done chan struct{} }

func (c plainCtx) Deadline() (time.Time, bool) { return time.Time{}, false }
func (c plainCtx) Done() <-chan struct{}       { return c.done }

// Err is context.Canceled once done is closed, as the Context contract
// asks (a derived context still waiting on it when the test closes done
// would panic on a nil error).
func (c plainCtx) Err() error {
	select {
	case <-c.done:
		return context.Canceled
	default:
		return nil
	}
}
func (c plainCtx) Value(any) any { return nil }

// A redirect hop leaves nothing registered with the poll's context once
// the poll is over: the scheduler's worker context lives across polls, and
// one cancelable context per hop would pile up on it (seen here as the
// goroutines that wait on a context of unknown type).
func TestHTTPRedirectHopLeavesNothingBehind(t *testing.T) {
	b := newServer(t, func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("ok")) })
	a := newServer(t, func(w http.ResponseWriter, r *http.Request) { redirectTo(w, r) })
	tr := NewTransport(2)
	t.Cleanup(tr.CloseIdleConnections)
	client := NewClient(tr, []string{"127.0.0.1:1"}) // an admin listener: hops are marked
	p := NewHTTP(httpSource(a.URL+"/r?to="+b.URL+"/x"), client, nil)
	ctx := plainCtx{done: make(chan struct{})}
	defer close(ctx.done)
	if res := p.Poll(ctx); res.Err != nil {
		t.Fatal(res.Err)
	}
	base := runtime.NumGoroutine()
	for range 50 {
		if res := p.Poll(ctx); res.Err != nil {
			t.Fatal(res.Err)
		}
	}
	eventually(t, 5*time.Second, "the goroutines back to their number before the polls", func() bool {
		return runtime.NumGoroutine() <= base+5
	})
}
