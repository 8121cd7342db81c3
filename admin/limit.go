package admin

import (
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/pacer-dev/pacer/internal/heldconn"
)

// Timeouts and sizes of the admin server (see NewServer).
const (
	readHeaderTimeout = 5 * time.Second
	readTimeout       = 30 * time.Second
	writeTimeout      = 60 * time.Second
	idleTimeout       = 30 * time.Second
	maxHeaderBytes    = 64 << 10
)

// Limiter caps the connections an admin listener holds open, so that
// clients of the admin port cannot use up the descriptors that polls need
// (contract rule 7.3): at most n accepted connections are open at once,
// plus the one being accepted. When all n are held and a new client
// connects, the connection idle the longest (a keep-alive between
// requests) is closed to make room; when none is idle, the new client
// waits in the kernel's backlog until one ends (each is bounded by the
// server's timeouts). Its ConnState method must be the server's ConnState
// hook (NewServer sets it).
type Limiter struct {
	net.Listener
	slots chan struct{}
	done  chan struct{}
	close sync.Once
	// wake is signalled when a connection turns idle, for an Accept that
	// waits for a slot.
	wake chan struct{}

	mu   sync.Mutex
	idle map[*heldconn.Conn]time.Time // idle since
}

// LimitListener returns ln capped at n open connections (n >= 1).
func LimitListener(ln net.Listener, n int) *Limiter {
	return &Limiter{
		Listener: ln,
		slots:    make(chan struct{}, max(n, 1)),
		done:     make(chan struct{}),
		wake:     make(chan struct{}, 1),
		idle:     map[*heldconn.Conn]time.Time{},
	}
}

// Accept accepts the next connection once it can hold it: at once while
// fewer than n are open; else after closing the longest-idle connection,
// or, with none idle, once an open one ends.
func (l *Limiter) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	for {
		select {
		case l.slots <- struct{}{}:
			return heldconn.New(c, l.release), nil
		default:
		}
		if l.evictIdle() {
			continue // its Close freed a slot (unless a racing Accept took it)
		}
		select {
		case l.slots <- struct{}{}:
			return heldconn.New(c, l.release), nil
		case <-l.wake: // one turned idle: evict it
		case <-l.done:
			_ = c.Close()
			return nil, net.ErrClosed
		}
	}
}

// Close closes the listener; an Accept waiting for a slot returns.
func (l *Limiter) Close() error {
	l.close.Do(func() { close(l.done) })
	return l.Listener.Close()
}

// ConnState tracks which connections are idle between requests.
func (l *Limiter) ConnState(c net.Conn, s http.ConnState) {
	lc, ok := c.(*heldconn.Conn)
	if !ok {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if s == http.StateIdle {
		l.idle[lc] = time.Now()
		select {
		case l.wake <- struct{}{}:
		default:
		}
	} else {
		delete(l.idle, lc)
	}
}

// evictIdle closes the connection idle the longest and reports whether
// there was one.
func (l *Limiter) evictIdle() bool {
	l.mu.Lock()
	var oldest *heldconn.Conn
	var since time.Time
	for c, t := range l.idle {
		if oldest == nil || t.Before(since) {
			oldest, since = c, t
		}
	}
	delete(l.idle, oldest)
	l.mu.Unlock()
	if oldest == nil {
		return false
	}
	_ = oldest.Close() // the client retries an idempotent request elsewhere
	return true
}

// release gives the slot of c, an accepted connection, back when it is
// closed (once: heldconn).
func (l *Limiter) release(c *heldconn.Conn) {
	l.mu.Lock()
	delete(l.idle, c)
	l.mu.Unlock()
	<-l.slots
}

// NewServer returns the admin HTTP server for h on l, with bounded header
// size and read, write and idle times (a keep-alive is closed after 30 s
// idle; a client has 5 s to send its request header).
func NewServer(h http.Handler, l *Limiter) *http.Server {
	return &http.Server{
		Handler:           h,
		ReadHeaderTimeout: readHeaderTimeout,
		ReadTimeout:       readTimeout,
		WriteTimeout:      writeTimeout,
		IdleTimeout:       idleTimeout,
		MaxHeaderBytes:    maxHeaderBytes,
		ConnState:         l.ConnState,
	}
}
