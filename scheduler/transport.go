package scheduler

import (
	"net/http"
	"sync/atomic"

	"github.com/pacer-dev/pacer/sources"
)

// transport is the RoundTripper of every http source: the shared
// *http.Transport sized to the concurrency cap, replaced when a reload
// changes the cap (its connection pool is sized once and cannot be resized
// in place).
type transport struct {
	cur  atomic.Pointer[http.Transport]
	size atomic.Int64
}

var _ http.RoundTripper = (*transport)(nil)

func newTransport(size int) *transport {
	t := &transport{}
	t.resize(size)
	return t
}

// RoundTrip sends req through the current transport.
func (t *transport) RoundTrip(req *http.Request) (*http.Response, error) {
	return t.cur.Load().RoundTrip(req)
}

// resize switches to a transport sized for n polls in flight, if n differs.
// Requests on the old one finish; its idle connections are closed.
func (t *transport) resize(n int) {
	if int64(n) == t.size.Load() {
		return
	}
	t.size.Store(int64(n))
	if old := t.cur.Swap(sources.NewTransport(n)); old != nil {
		old.CloseIdleConnections()
	}
}

// close closes the idle connections of the current transport.
func (t *transport) close() {
	t.cur.Load().CloseIdleConnections()
}
