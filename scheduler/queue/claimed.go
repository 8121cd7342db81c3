package queue

import "time"

// The polls in flight, as a shutdown sees them: a claimed poll is in the
// queue's claimed list until its end (Unclaim), so that a shutdown whose
// cancelled polls do not end in their grace can still record each of them
// as interrupted (contract rule 3.10) instead of leaving them as a crash
// would (Abandon). The list is a slice (removal swaps the last in), and a
// slot knows its position: no allocation per poll, no cost per idle source.

// claim is one claimed poll.
type claim[V any] struct {
	s     *Slot[V]
	token uint64    // Claim's answer, checked by Unclaim
	gen   uint64    // the generation it was dispatched with
	at    time.Time // when it was claimed
}

// Claim records s, in flight, as claimed at now by a job of generation
// gen, and returns the claim's token (for Unclaim). Owner's lock.
func (q *Queue[V]) Claim(s *Slot[V], gen uint64, now time.Time) uint64 {
	q.claims++
	s.claim = int32(len(q.claimed))
	q.claimed = append(q.claimed, claim[V]{s: s, token: q.claims, gen: gen, at: now})
	return q.claims
}

// Unclaim ends the claim token of s and reports whether it was still
// claimed: false when a shutdown abandoned it meanwhile (its end was
// recorded then, and nothing more is to be done). Owner's lock.
func (q *Queue[V]) Unclaim(s *Slot[V], token uint64) bool {
	i := int(s.claim)
	if i < 0 || q.claimed[i].token != token {
		return false
	}
	last := len(q.claimed) - 1
	if i != last {
		q.claimed[i] = q.claimed[last]
		q.claimed[i].s.claim = int32(i)
	}
	q.claimed[last] = claim[V]{}
	q.claimed = q.claimed[:last]
	s.claim = -1
	return true
}

// Abandoned is a claimed poll a shutdown gave up waiting for.
type Abandoned[V any] struct {
	Source    V
	Gen       uint64    // the generation it was dispatched with
	ClaimedAt time.Time // when it was claimed
}

// Abandon forgets every claimed poll, so that its Unclaim fails, and
// returns them. Owner's lock.
func (q *Queue[V]) Abandon() []Abandoned[V] {
	out := make([]Abandoned[V], 0, len(q.claimed))
	for _, c := range q.claimed {
		out = append(out, Abandoned[V]{Source: c.s.v, Gen: c.gen, ClaimedAt: c.at})
		c.s.claim = -1
	}
	clear(q.claimed)
	q.claimed = q.claimed[:0]
	return out
}

// EachClaimed calls fn with the source of each claimed poll (in flight).
// Owner's lock.
func (q *Queue[V]) EachClaimed(fn func(v V)) {
	for _, c := range q.claimed {
		fn(c.s.v)
	}
}
