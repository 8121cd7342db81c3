package sources

import (
	"net/http"

	"github.com/pacer-dev/pacer/conditions"
)

// forConditions keeps in res what the conditions of its source read of
// the answer besides its body: the headers, the peer's certificate.
func forConditions(set *conditions.Set, resp *http.Response, res *Result) {
	if set.NeedsHeaders() || set.NeedsTLS() {
		res.Answer = resp
	}
}

// lentCapture returns an empty Capture whose first buffer is borrowed
// from bufs, for a result that only the conditions read: no allocation
// for a body of up to digestBuf bytes (16 KiB), most answers. The buffer
// goes back to bufs when the result outgrows it or on Close, so that
// nothing may refer to the Capture's bytes after Close (Bytes, Reader):
// the conditions' tape lets go of them when Evaluate returns.
func lentCapture(bufs *readBuffers) *Capture {
	c := NewCapture("")
	c.lent, c.bufs = bufs.get(), bufs
	c.buf = c.lent[:0]
	return c
}

// giveBack returns a borrowed buffer to its pool; its callers call it
// once buf no longer refers to it (grown into a new array, spooled,
// closed).
func (c *Capture) giveBack() {
	if c.lent != nil {
		c.bufs.put(c.lent)
		c.lent = nil
	}
}

// Bytes returns the result when it is held in memory (not spooled),
// valid until Close.
func (c *Capture) Bytes() ([]byte, bool) {
	if c == nil || c.f != nil || c.done {
		return nil, false
	}
	return c.buf, true
}
