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

// Bytes returns the result when it is held in memory (not spooled).
func (c *Capture) Bytes() ([]byte, bool) {
	if c == nil || c.f != nil || c.done {
		return nil, false
	}
	return c.buf, true
}
