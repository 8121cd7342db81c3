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
// A successful poll's result is a delivered one: delivery (contract 9.3,
// delivery.deliver) runs inside the poll, and a failed delivery fails the
// poll instead, leaving the last delivered digest in place and the
// validators cleared (forgetValidators), so that the result is fetched
// again without conditional headers and compared to that digest.
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

// forgetValidators clears st's validators after a failed delivery, so
// that the next GET is unconditional and fetches the undelivered result
// again (contract 9.4); the digest stays the last delivered one.
func forgetValidators(st *store.SourceState) {
	st.ETag, st.LastModified = "", ""
}
