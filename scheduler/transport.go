package scheduler

import (
	"github.com/pacer-dev/pacer/sources"
)

// transport is the RoundTripper of every http source: a sources.Transports,
// one *http.Transport per distinct client settings (tls, proxy_url, http2),
// each sized to the concurrency cap and replaced when a reload changes the
// cap (a connection pool is sized once and cannot be resized in place).
// The pollers get the transport of their source's settings from it (For);
// one no source uses any more is closed and dropped once its last poller is
// gone.
type transport struct {
	*sources.Transports
}

func newTransport(size int) *transport {
	return &transport{Transports: sources.NewTransports(size)}
}

// resize switches every transport to one sized for n polls in flight, if n
// differs. Requests on the old ones finish; their idle connections are
// closed.
func (t *transport) resize(n int) {
	t.Resize(n)
}

// close closes the idle connections of every transport.
func (t *transport) close() {
	t.CloseIdleConnections()
}
