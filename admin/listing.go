package admin

import (
	"net/http"
	"time"
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
	writeJSON(w, http.StatusOK, a.c.ExplainSources(nil))
}
