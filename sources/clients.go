package sources

import (
	"net/http"
	"runtime"
	"sync"
	"weak"

	"github.com/pacer-dev/pacer/config"
)

// Clients derives from one base client (see NewClient) the client of each
// redirect rule and client settings a source may have, once: the http
// pollers of 100,000 sources then share a handful of clients instead of
// each holding its own copy and redirect closure (80 bytes a source).
// A client is held weakly, as Transports holds its transports: once no
// poller holds it (the sources of its settings were reloaded away) it is
// dropped, and with it the transport of those settings. Safe for
// concurrent use.
type Clients struct {
	base *http.Client
	mu   sync.Mutex // guards m
	m    map[clientKey]weak.Pointer[http.Client]
}

// clientKey tells apart the clients a source may need: whether it follows
// redirects, and its client settings (config.Client.Key, "" for none).
type clientKey struct {
	follow   bool
	settings string
}

// NewClients returns the clients derived from base, which must not be nil.
func NewClients(base *http.Client) *Clients {
	return &Clients{base: base, m: map[clientKey]weak.Pointer[http.Client]{}}
}

// For returns the client src's poller sends through.
func (c *Clients) For(src *config.Source) *http.Client {
	k := clientKey{follow: follows(src), settings: src.Client.Key()}
	c.mu.Lock()
	defer c.mu.Unlock()
	if cl := c.m[k].Value(); cl != nil {
		return cl
	}
	cl := deriveClient(c.base, src)
	wp := weak.Make(cl)
	c.m[k] = wp
	runtime.AddCleanup(cl, c.forget, clientEntry{k, wp})
	return cl
}

// clientEntry is one client of Clients.m, for forget.
type clientEntry struct {
	key clientKey
	wp  weak.Pointer[http.Client]
}

// forget drops the entry of a client no poller holds any more (unless
// the key has a newer client).
func (c *Clients) forget(e clientEntry) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m[e.key] == e.wp {
		delete(c.m, e.key)
	}
}

// held returns how many clients are held (for tests).
func (c *Clients) held() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.m)
}

// follows reports whether src follows redirects (follow_redirects, true
// when unset).
func follows(src *config.Source) bool {
	return src.FollowRedirects == nil || *src.FollowRedirects
}

// deriveClient returns base with src's redirect rule and the transport of
// its client settings; it shares base's transport(s).
func deriveClient(base *http.Client, src *config.Source) *http.Client {
	own := *base
	own.CheckRedirect = pollerRedirect(follows(src), base.CheckRedirect)
	own.Transport = transportFor(base.Transport, src.Client)
	return &own
}
