package sources

import (
	"context"
	"net"
	"sync/atomic"

	"github.com/pacer-dev/pacer/internal/heldconn"
)

// connBudget is the one budget of open connections that every transport
// of a Transports shares (contract section 7: a poll in flight may hold
// its connection and one idle in the pool, so 2 × the cap in all). Each
// transport's pool is sized to the cap on its own, so N client settings
// could otherwise keep N caps of idle connections (issue 20 item 11: 8
// settings held 242 sockets under a cap of 48 and exhausted the
// descriptors).
//
// It counts the connections that the transports dial and that are not yet
// closed. A dial that would take the count past the budget first closes
// the idle connections of every other transport (their pools can only be
// emptied whole; the dialing transport keeps its own, which the polls of
// its setting are about to reuse). It never refuses a dial: a poll that
// holds its permits gets its connection, and the count then stays within
// the connections in use plus one transport's idle ones.
//
// The choice over a per-transport share of the budget (MaxIdleConnsPerHost
// = cap / settings): a share fixed in advance starves the setting that is
// busy now (a group of sources that fire together) to keep idle ones for
// settings that are quiet, and needs resizing whenever a setting comes or
// goes; closing idle connections only when the budget is reached costs
// nothing per poll (one atomic add per dial and per close).
type connBudget struct {
	open  atomic.Int64
	limit atomic.Int64
	// shed closes the idle connections of every transport but the one of
	// keep.
	shed func(keep *transportSlot)
}

// dialFunc is the signature of http.Transport.DialContext.
type dialFunc = func(ctx context.Context, network, addr string) (net.Conn, error)

// dialer wraps dial, the dialer of sl's transport, to count its
// connections against the budget.
func (b *connBudget) dialer(sl *transportSlot, dial dialFunc) dialFunc {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		// Counted from before the dial: dials made at once each see the
		// others, and each one past the budget sheds.
		if b.open.Add(1) > b.limit.Load() {
			b.shed(sl)
		}
		c, err := dial(ctx, network, addr)
		if err != nil {
			b.open.Add(-1)
			return nil, err
		}
		return heldconn.New(c, b.release), nil
	}
}

// count returns c counted as open until its first Close.
func (b *connBudget) count(c net.Conn) net.Conn {
	b.open.Add(1)
	return heldconn.New(c, b.release)
}

// release takes a connection off the count, at its first Close
// (heldconn).
func (b *connBudget) release(*heldconn.Conn) { b.open.Add(-1) }
