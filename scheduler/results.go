package scheduler

import (
	"time"

	"github.com/pacer-dev/pacer/sources"
	"github.com/pacer-dev/pacer/store"
)

// result is what a successful poll fetched (contract 9.1, 9.2): the digest
// of its body or stdout ("" for a 304), whether it was a 304, and the
// validators of a 200 answer.
type result struct {
	digest      string
	notModified bool
	validators  sources.Validators
}

// resultOf is the result of a successful poll's res.
func resultOf(res sources.Result) result {
	return result{
		digest:      res.Digest,
		notModified: res.NotModified,
		validators:  sources.Validators{ETag: res.ETag, LastModified: res.LastModified},
	}
}

// priorOf is the validators a source's next GET sends: those of its last
// delivered result.
func priorOf(st *store.SourceState) sources.Validators {
	return sources.Validators{ETag: st.ETag, LastModified: st.LastModified}
}

// changedResult reports whether r differs from the last delivered result
// of st: not a 304, and a digest other than the one stored (a source's
// first result is a change).
func changedResult(st *store.SourceState, r result) bool {
	return !r.notModified && r.digest != st.Digest
}

// deliverResult records r, the result of a successful poll that ended at
// end, as st's last delivered result: a changed result's digest, time and
// count, and the validators of the answer (a 304 keeps those it confirmed).
// Until delivery (contract 9.3) exists, every successful result is
// delivered when its poll ends; delivery will call this only once the
// result is handed over, so that a result not delivered is fetched again
// without conditional headers and compared to the last delivered digest.
func deliverResult(st *store.SourceState, r result, changed bool, end time.Time) {
	if r.notModified {
		if r.validators.ETag != "" { // a 304 may carry the entity's new ETag
			st.ETag = r.validators.ETag
		}
		return
	}
	st.ETag, st.LastModified = r.validators.ETag, r.validators.LastModified
	if changed {
		st.Digest = r.digest
		st.ChangesTotal++
		st.LastChangedAt = ptr(end)
	}
}
