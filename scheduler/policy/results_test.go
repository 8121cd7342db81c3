package policy

import (
	"crypto/sha256"
	"encoding/hex"
	"testing"
	"time"

	"github.com/pacer-dev/pacer/domain"
	"github.com/pacer-dev/pacer/sources"
)

// TestDeliverResult: Apply's rule for a successful poll's result
// (contract 9.1, 9.2): the first result is a change; an equal digest or a
// 304 is not; a change moves the digest, the count and last_changed_at; the
// validators are the last answer's (a 304 keeps them, taking a new ETag it
// carries); a failure touches none of it.
func TestDeliverResult(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	src := testSource()
	tm := NewTiming("x", src.Schedule)
	v1 := sources.Validators{ETag: `"1"`, LastModified: "Tue, 01 Dec 2026 09:00:00 GMT"}
	ok := func(digest string, v sources.Validators, notModified bool) Outcome {
		return Outcome{Kind: domain.OutcomeSuccess, Result: Result{Digest: digest, Validators: v, NotModified: notModified}}
	}
	steps := []struct {
		name    string
		o       Outcome
		changed bool
		want    domain.SourceState // only the result's fields are compared
	}{
		{"first result", ok(sha("a"), v1, false), true,
			domain.SourceState{ETag: v1.ETag, LastModified: v1.LastModified, Digest: sha("a"), ChangesTotal: 1}},
		{"same digest, no validators", ok(sha("a"), sources.Validators{}, false), false,
			domain.SourceState{Digest: sha("a"), ChangesTotal: 1}},
		{"same digest again", ok(sha("a"), v1, false), false,
			domain.SourceState{ETag: v1.ETag, LastModified: v1.LastModified, Digest: sha("a"), ChangesTotal: 1}},
		{"304", ok("", sources.Validators{}, true), false,
			domain.SourceState{ETag: v1.ETag, LastModified: v1.LastModified, Digest: sha("a"), ChangesTotal: 1}},
		{"304 with a new ETag", ok("", sources.Validators{ETag: `"2"`}, true), false,
			domain.SourceState{ETag: `"2"`, LastModified: v1.LastModified, Digest: sha("a"), ChangesTotal: 1}},
		{"failure", Outcome{Kind: domain.OutcomeFailure, Err: "boom"}, false,
			domain.SourceState{ETag: `"2"`, LastModified: v1.LastModified, Digest: sha("a"), ChangesTotal: 1}},
		{"new digest", ok(sha("b"), v1, false), true,
			domain.SourceState{ETag: v1.ETag, LastModified: v1.LastModified, Digest: sha("b"), ChangesTotal: 2}},
	}
	var st domain.SourceState
	var lastChange time.Time
	for i, s := range steps {
		end := t0.Add(time.Duration(i) * time.Minute)
		s.o.Start, s.o.End, s.o.Brk.State = end, end, "closed"
		if got := s.o.Kind == domain.OutcomeSuccess && Changed(&st, s.o.Result); got != s.changed {
			t.Errorf("%s: changed %v, want %v", s.name, got, s.changed)
		}
		st = Apply(st, src, tm, s.o)
		if s.changed {
			lastChange = end
		}
		got := domain.SourceState{ETag: st.ETag, LastModified: st.LastModified, Digest: st.Digest, ChangesTotal: st.ChangesTotal}
		if got != s.want {
			t.Errorf("%s: result fields %+v, want %+v", s.name, got, s.want)
		}
		if st.LastChangedAt == nil || !st.LastChangedAt.Equal(lastChange) {
			t.Errorf("%s: last_changed_at %v, want %v", s.name, st.LastChangedAt, lastChange)
		}
		if p := PriorOf(&st); p.ETag != st.ETag || p.LastModified != st.LastModified {
			t.Errorf("%s: next GET sends %+v, want the stored validators", s.name, p)
		}
	}
}

func sha(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}
