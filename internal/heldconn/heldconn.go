// Package heldconn is a connection held against a count until its first
// Close: the admin listener's slots (admin.Limiter) and the sources'
// budget of open connections both count a connection from when they hand
// it out to when it is closed, once, however many times Close is called.
package heldconn

import (
	"io"
	"net"
	"sync/atomic"
)

// Conn is a net.Conn that calls its release function at its first Close,
// after closing the connection; a later Close only closes again.
type Conn struct {
	net.Conn
	release func(*Conn)
	closed  atomic.Bool
}

// New returns c held until its first Close, which calls release with the
// returned *Conn (the key its holder may have filed it under).
func New(c net.Conn, release func(*Conn)) *Conn {
	return &Conn{Conn: c, release: release}
}

// Close closes the connection and, the first time, releases it.
func (c *Conn) Close() error {
	err := c.Conn.Close()
	if c.closed.CompareAndSwap(false, true) {
		c.release(c)
	}
	return err
}

// ReadFrom keeps the connection's own ReadFrom (sendfile or splice of a
// spooled result to a webhook, of a response body to an admin client).
func (c *Conn) ReadFrom(r io.Reader) (int64, error) {
	if rf, ok := c.Conn.(io.ReaderFrom); ok {
		return rf.ReadFrom(r)
	}
	return io.Copy(struct{ io.Writer }{c.Conn}, r)
}
