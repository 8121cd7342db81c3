package policy

import (
	"time"

	"github.com/pacer-dev/pacer/domain"
	"github.com/pacer-dev/pacer/sources"
)

// Result is what a successful poll fetched (contract 9.1, 9.2): the digest
// of its body or stdout ("" for a 304), whether it was a 304, and the
// validators of a 200 answer.
type Result struct {
	Digest      string
	NotModified bool
	Validators  sources.Validators
}

// ResultOf is the result of a successful poll's res.
func ResultOf(res sources.Result) Result {
	return Result{
		Digest:      res.Digest,
		NotModified: res.NotModified,
		Validators:  sources.Validators{ETag: res.ETag, LastModified: res.LastModified},
	}
}

// PriorOf is the validators a source's next GET sends: those of its last
// delivered result.
func PriorOf(st *domain.SourceState) sources.Validators {
	return sources.Validators{ETag: st.ETag, LastModified: st.LastModified}
}

// Changed reports whether r differs from the last delivered result
// of st: not a 304, and a digest other than the one stored (a source's
// first result is a change).
func Changed(st *domain.SourceState, r Result) bool {
	return !r.NotModified && r.Digest != st.Digest
}

// deliverResult records r, the result of a successful poll that ended at
// end, as st's last delivered result: a changed result's digest, time and
// count, and the validators of the answer (a 304 keeps those it confirmed).
// A successful poll's result is a delivered one: delivery (contract 9.3,
// delivery.deliver) runs inside the poll, and a failed delivery fails the
// poll instead, leaving the last delivered digest in place and the
// validators cleared (ForgetValidators), so that the result is fetched
// again without conditional headers and compared to that digest.
func deliverResult(st *domain.SourceState, r Result, changed bool, end time.Time) {
	if r.NotModified {
		if r.Validators.ETag != "" { // a 304 may carry the entity's new ETag
			st.ETag = r.Validators.ETag
		}
		return
	}
	st.ETag, st.LastModified = r.Validators.ETag, r.Validators.LastModified
	if changed {
		st.Digest = r.Digest
		st.ChangesTotal++
		st.LastChangedAt = UTCPtr(end)
	}
}

// ForgetValidators clears st's validators after a failed delivery, so
// that the next GET is unconditional and fetches the undelivered result
// again (contract 9.4); the digest stays the last delivered one.
func ForgetValidators(st *domain.SourceState) {
	st.ETag, st.LastModified = "", ""
}
