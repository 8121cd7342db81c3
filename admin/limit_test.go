package admin_test

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pacer-dev/pacer/admin"
)

// countingListener counts the connections accepted from the kernel that
// are still open, and the peak of that count.
type countingListener struct {
	net.Listener
	open, peak atomic.Int64
}

func (l *countingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	n := l.open.Add(1)
	for p := l.peak.Load(); n > p && !l.peak.CompareAndSwap(p, n); p = l.peak.Load() {
	}
	return &countingConn{Conn: c, l: l}, nil
}

type countingConn struct {
	net.Conn
	l    *countingListener
	once sync.Once
}

func (c *countingConn) Close() error {
	c.once.Do(func() { c.l.open.Add(-1) })
	return c.Conn.Close()
}

// limitedServer serves "ok" on a loopback listener capped at n
// connections; it returns the address and the counting listener below the
// cap.
func limitedServer(t *testing.T, n int) (string, *countingListener) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	cl := &countingListener{Listener: ln}
	lim := admin.LimitListener(cl, n)
	srv := admin.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = io.WriteString(w, "ok")
	}), lim)
	done := make(chan error, 1)
	go func() { done <- srv.Serve(lim) }()
	t.Cleanup(func() {
		_ = srv.Close()
		if err := <-done; !errors.Is(err, http.ErrServerClosed) {
			t.Errorf("Serve: %v", err)
		}
	})
	return ln.Addr().String(), cl
}

// keepAlive opens a connection, makes one keep-alive request on it and
// leaves it open (idle, as far as the server knows).
func keepAlive(t *testing.T, addr string) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	if err := get(c); err != nil {
		t.Fatalf("first request: %v", err)
	}
	return c
}

// get sends GET / on c and reads the answer.
func get(c net.Conn) error {
	if err := c.SetDeadline(time.Now().Add(10 * time.Second)); err != nil {
		return err
	}
	if _, err := io.WriteString(c, "GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"); err != nil {
		return err
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK || string(body) != "ok" {
		return fmt.Errorf("answer %d %q", resp.StatusCode, body)
	}
	return nil
}

// Idle keep-alives beyond the cap do not hold descriptors: each new client
// is served, by closing the connection idle the longest, and the server
// never holds more than the cap plus the one being accepted.
func TestLimiterEvictsIdleKeepAlives(t *testing.T) {
	for _, c := range []struct{ limit, clients int }{{1, 5}, {4, 40}, {32, 200}} {
		t.Run(fmt.Sprintf("limit%d", c.limit), func(t *testing.T) {
			addr, cl := limitedServer(t, c.limit)
			conns := make([]net.Conn, 0, c.clients)
			for i := 0; i < c.clients; i++ {
				conns = append(conns, keepAlive(t, addr))
			}
			if p := cl.peak.Load(); p > int64(c.limit)+1 {
				t.Errorf("%d idle keep-alives: the server held %d connections at once, cap %d (+1 being accepted)",
					c.clients, p, c.limit)
			}
			// The most recent ones are still served on their connection.
			if err := get(conns[len(conns)-1]); err != nil {
				t.Errorf("the newest keep-alive was closed: %v", err)
			}
			// The oldest was closed by the server to make room.
			if err := get(conns[0]); err == nil {
				t.Errorf("the oldest idle keep-alive still served with %d clients over a cap of %d", c.clients, c.limit)
			}
			// And a fresh client is answered.
			if err := get(keepAlive(t, addr)); err != nil {
				t.Errorf("a new client after %d keep-alives: %v", c.clients, err)
			}
		})
	}
}

// A connection that sent no request yet is not idle and is not closed for
// a newcomer: the newcomer waits until it ends (the server's header
// timeout bounds that wait), and the cap holds meanwhile.
func TestLimiterWaitsForBusyConnections(t *testing.T) {
	addr, cl := limitedServer(t, 1)
	silent, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()
	// The silent connection is accepted (it holds the one slot).
	deadline := time.Now().Add(10 * time.Second)
	for cl.open.Load() < 1 {
		if time.Now().After(deadline) {
			t.Fatal("the silent connection was not accepted")
		}
		time.Sleep(5 * time.Millisecond)
	}
	answered := make(chan error, 1)
	go func() {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			answered <- err
			return
		}
		defer c.Close()
		answered <- get(c)
	}()
	// Nothing frees the slot: the newcomer must not be answered (check for
	// a while), and the server holds at most the slot plus one.
	never := time.NewTimer(300 * time.Millisecond)
	select {
	case err := <-answered:
		t.Fatalf("a second client was served while the only slot was held (err %v)", err)
	case <-never.C:
	}
	if p := cl.peak.Load(); p > 2 {
		t.Errorf("the server held %d connections with a cap of 1", p)
	}
	_ = silent.Close()
	select {
	case err := <-answered:
		if err != nil {
			t.Fatalf("the waiting client, once the slot was free: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the waiting client was not served after the slot was freed")
	}
}

// Closing the limiter ends an Accept that waits for a slot.
func TestLimiterCloseEndsWaitingAccept(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	lim := admin.LimitListener(ln, 1)
	var held []net.Conn
	for i := 0; i < 2; i++ {
		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		held = append(held, c)
	}
	first, err := lim.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer first.Close()
	got := make(chan error, 1)
	go func() {
		c, err := lim.Accept() // the second client: no slot, nothing idle
		if err == nil {
			_ = c.Close()
		}
		got <- err
	}()
	if err := lim.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-got:
		if !errors.Is(err, net.ErrClosed) {
			t.Errorf("Accept after Close: %v, want net.ErrClosed", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Accept still waits after Close")
	}
	_ = held
}

// The server's limits are set: a request header over 64 KiB is refused.
func TestServerCapsHeaderBytes(t *testing.T) {
	addr, _ := limitedServer(t, 4)
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	big := strings.Repeat("a", 200<<10)
	if _, err := io.WriteString(c, "GET / HTTP/1.1\r\nHost: x\r\nX-Big: "+big+"\r\n\r\n"); err != nil {
		t.Logf("write: %v (the server may close early)", err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("no answer to an oversized header: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusRequestHeaderFieldsTooLarge {
		t.Errorf("a 200 KiB header got %d, want 431", resp.StatusCode)
	}
}
