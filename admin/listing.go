package admin

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net/http"
	"time"

	"github.com/pacer-dev/pacer/scheduler/view"
)

// GET /api/sources answers every source at once. At 100,000 sources a
// listing holds about 126 MiB while it is built and written (the source
// objects, then 41 MB of JSON), for about 2 s: four at once took the
// daemon from 402 to 1,028 MiB (issue 20, item 16d). One listing is built
// at a time; listingsWaiting more wait for their turn, at most
// listingTurn each; the others are told to come back (503 with
// Retry-After) instead of piling up.
const (
	listingsAtOnce  = 1
	listingsWaiting = 8
	listingTurn     = 30 * time.Second
)

func (a *api) list(w http.ResponseWriter, r *http.Request) {
	if !a.listings.Take(r.Context()) {
		w.Header().Set("Retry-After", "2")
		writeError(w, http.StatusServiceUnavailable, "other listings of every source are being built; try again in a few seconds")
		return
	}
	defer a.listings.Give()
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	if r.Method == http.MethodHead {
		return
	}
	// The array is written a chunk of sources at a time, each object as
	// writeJSON would encode it: what was one buffer of 41 MB at 100,000
	// sources is a chunk's.
	bw := bufio.NewWriterSize(w, 64<<10)
	sep := []byte("[")
	err := a.c.ExplainAll(func(xs []view.Explained) error {
		for i := range xs {
			b, err := json.Marshal(&xs[i])
			if err != nil {
				return fmt.Errorf("encode %s: %w", xs[i].Name, err)
			}
			if _, err := bw.Write(sep); err != nil {
				return err // the client went away
			}
			if _, err := bw.Write(EscapeJSON(b)); err != nil {
				return err
			}
			sep = []byte(",")
		}
		return nil
	})
	if err != nil {
		// The status is sent: the client sees a truncated array.
		a.log.Warn("GET /api/sources cut short", "err", err)
		return
	}
	if string(sep) == "[" {
		_, _ = bw.WriteString("[")
	}
	_, _ = bw.WriteString("]\n")
	_ = bw.Flush() // the client went away: nothing to do
}
