package sources

import (
	"fmt"
	"net/http"
	"net/url"
	"runtime"
	"sync"
	"sync/atomic"
	"time"
	"weak"

	"github.com/pacer-dev/pacer/config"
)

// NewClientTransport returns a transport like NewTransport(maxConns) with
// the client settings c (nil: the built-in ones): c's TLS settings, its
// proxy_url (else the environment's proxy), and HTTP/1.1 only when c turns
// HTTP/2 off.
func NewClientTransport(maxConns int, c *config.Client) (*http.Transport, error) {
	maxConns = max(maxConns, 1)
	dialer := newDialer(nil)
	t := &http.Transport{
		Proxy:                  http.ProxyFromEnvironment,
		DialContext:            dialer.DialContext,
		ForceAttemptHTTP2:      true,
		MaxIdleConns:           maxConns,
		MaxIdleConnsPerHost:    maxConns,
		MaxConnsPerHost:        maxConns,
		IdleConnTimeout:        90 * time.Second,
		TLSHandshakeTimeout:    10 * time.Second,
		ExpectContinueTimeout:  1 * time.Second,
		MaxResponseHeaderBytes: MaxHeaderBytes,
	}
	if c == nil {
		return t, nil
	}
	conf, err := c.TLSConfig()
	if err != nil {
		return nil, err
	}
	t.TLSClientConfig = conf
	if c.ProxyURL != "" {
		u, err := url.Parse(c.ProxyURL)
		if err != nil {
			return nil, fmt.Errorf("proxy_url: invalid URL")
		}
		t.Proxy = http.ProxyURL(u)
	}
	var protos http.Protocols
	protos.SetHTTP1(true)
	protos.SetHTTP2(c.HTTP2Enabled())
	t.Protocols = &protos
	t.ForceAttemptHTTP2 = c.HTTP2Enabled()
	return t, nil
}

// Transports is the set of transports of the http sources: one
// *http.Transport per distinct client settings (config.Client.Key), shared
// by every source with those settings so that their connections are
// reused, each sized to one connection cap (see NewTransport).
//
// The transport of the built-in settings lives as long as the set. Any
// other lives while a poller uses it: For hands out a handle that the
// pollers hold, and once the last of them is gone (a reload removed or
// changed its sources) the garbage collector's cleanup closes that
// transport's idle connections and forgets it. So the set never holds more
// transports than the loaded configurations have distinct settings.
//
// The connections of all of them together stay within one budget of
// 2 × the cap (connBudget): one in use and one idle per poll in flight.
//
// A *Transports is an http.RoundTripper (the built-in settings' transport)
// and is safe for concurrent use.
type Transports struct {
	mu     sync.Mutex
	size   int
	def    *transportSlot
	byKey  map[string]*transportSlot
	budget *connBudget
	// bufs lends the pollers over these transports the buffers they read
	// and digest answers through (one per poll in flight, not one
	// allocated per poll).
	bufs *readBuffers
}

// transportSlot is the current transport of one client setting.
type transportSlot struct {
	key    string
	client *config.Client
	budget *connBudget // the set's
	cur    atomic.Pointer[http.Transport]
	handle weak.Pointer[clientTransport] // nil for the built-in settings
}

// clientTransport is the RoundTripper that the pollers of one client
// setting hold; it sends through the slot's current transport.
type clientTransport struct {
	slot *transportSlot
	bufs *readBuffers // the set's
}

// RoundTrip sends req through the current transport of the setting.
func (c *clientTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	return c.slot.cur.Load().RoundTrip(req)
}

var (
	_ http.RoundTripper = (*Transports)(nil)
	_ clientTransports  = (*Transports)(nil)
)

// NewTransports returns a set sized for maxConns polls in flight.
func NewTransports(maxConns int) *Transports {
	p := &Transports{size: max(maxConns, 1), byKey: map[string]*transportSlot{}, bufs: &readBuffers{}}
	p.budget = &connBudget{shed: p.closeIdleExcept}
	p.budget.limit.Store(int64(2 * p.size))
	p.def = &transportSlot{budget: p.budget}
	t, _ := p.def.build(p.size) // never fails without settings
	p.def.cur.Store(t)
	return p
}

// build returns a transport of sl's settings sized for n polls in flight,
// its connections counted in the set's budget.
func (sl *transportSlot) build(n int) (*http.Transport, error) {
	t, err := NewClientTransport(n, sl.client)
	if err != nil {
		return nil, err
	}
	t.DialContext = sl.budget.dialer(sl, t.DialContext)
	return t, nil
}

// closeIdleExcept closes the idle connections of every transport but
// keep's (the connection budget is reached).
func (p *Transports) closeIdleExcept(keep *transportSlot) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.def != keep {
		p.def.cur.Load().CloseIdleConnections()
	}
	for _, sl := range p.byKey {
		if sl != keep {
			sl.cur.Load().CloseIdleConnections()
		}
	}
}

// OpenConns returns how many connections the transports have open, in use
// or idle.
func (p *Transports) OpenConns() int64 { return p.budget.open.Load() }

// connBudget returns the budget of open connections.
func (p *Transports) connBudget() int64 { return p.budget.limit.Load() }

// RoundTrip sends req with the built-in settings.
func (p *Transports) RoundTrip(req *http.Request) (*http.Response, error) {
	return p.def.cur.Load().RoundTrip(req)
}

// For returns the RoundTripper of the client settings c, shared with every
// caller whose settings have the same key. Settings that cannot be built
// (only a Client built by hand, with a bad file, can fail) yield a
// RoundTripper whose every request fails with that error.
func (p *Transports) For(c *config.Client) http.RoundTripper {
	key := c.Key()
	if key == "" {
		return p
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if sl := p.byKey[key]; sl != nil {
		if h := sl.handle.Value(); h != nil {
			return h
		}
	}
	sl := &transportSlot{key: key, client: c, budget: p.budget}
	t, err := sl.build(p.size)
	if err != nil {
		return failingTransport{err: fmt.Errorf("client settings: %w", err)}
	}
	sl.cur.Store(t)
	h := &clientTransport{slot: sl, bufs: p.bufs}
	sl.handle = weak.Make(h)
	p.byKey[key] = sl
	runtime.AddCleanup(h, p.forget, sl)
	return h
}

// forget drops sl once no poller holds its handle, closing its idle
// connections (requests in flight finish).
func (p *Transports) forget(sl *transportSlot) {
	p.mu.Lock()
	if p.byKey[sl.key] == sl {
		delete(p.byKey, sl.key)
	}
	p.mu.Unlock()
	sl.cur.Load().CloseIdleConnections()
}

// Len returns how many transports the set holds (the built-in one
// included).
func (p *Transports) Len() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return 1 + len(p.byKey)
}

// Resize switches every transport to one sized for n polls in flight, if n
// differs (a connection pool is sized once and cannot be resized in
// place). Requests on the old ones finish; their idle connections are
// closed.
func (p *Transports) Resize(n int) {
	n = max(n, 1)
	p.mu.Lock()
	defer p.mu.Unlock()
	if n == p.size {
		return
	}
	p.size = n
	p.budget.limit.Store(int64(2 * n))
	p.def.swap(n)
	for _, sl := range p.byKey {
		sl.swap(n)
	}
}

// swap replaces sl's transport by one sized for n. The settings built
// before, so they build again; should they not, the old transport stays.
func (sl *transportSlot) swap(n int) {
	t, err := sl.build(n)
	if err != nil {
		return
	}
	sl.cur.Swap(t).CloseIdleConnections()
}

// CloseIdleConnections closes the idle connections of every transport.
func (p *Transports) CloseIdleConnections() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.def.cur.Load().CloseIdleConnections()
	for _, sl := range p.byKey {
		sl.cur.Load().CloseIdleConnections()
	}
}

// readBuffers is a pool of the buffers of digestBuf bytes that the http
// pollers read and digest answers through: at most about one per poll in
// flight is in use, and the garbage collector may drop the idle ones.
type readBuffers struct{ pool sync.Pool }

// get returns a buffer from the pool, or a new one.
func (b *readBuffers) get() *[digestBuf]byte {
	if buf, ok := b.pool.Get().(*[digestBuf]byte); ok {
		return buf
	}
	return new([digestBuf]byte)
}

// put returns buf to the pool; its caller no longer refers to it.
func (b *readBuffers) put(buf *[digestBuf]byte) { b.pool.Put(buf) }

// bufferLender is a RoundTripper that lends read buffers (*Transports and
// the handles of its client settings).
type bufferLender interface{ readBuffers() *readBuffers }

var (
	_ bufferLender = (*Transports)(nil)
	_ bufferLender = (*clientTransport)(nil)
)

func (p *Transports) readBuffers() *readBuffers      { return p.bufs }
func (c *clientTransport) readBuffers() *readBuffers { return c.bufs }

// buffersOf returns the read buffers lent by rt, or nil.
func buffersOf(rt http.RoundTripper) *readBuffers {
	if l, ok := rt.(bufferLender); ok {
		return l.readBuffers()
	}
	return nil
}

// failingTransport fails every request with err.
type failingTransport struct{ err error }

// RoundTrip returns the error.
func (f failingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Body != nil {
		req.Body.Close()
	}
	return nil, f.err
}
