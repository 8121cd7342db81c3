package breaker

import (
	"math"
	"time"
)

// Backoff is the exponential backoff policy of contract rule 3.4
// (config.Backoff is this type): after the
// k-th consecutive failure the next attempt is not before
// now + min(Max, Initial*Multiplier^(k-1)), spread by +/- Jitter.
//
// The zero value never delays: Delay returns 0 for every k.
type Backoff struct {
	Initial    time.Duration
	Max        time.Duration
	Multiplier float64
	Jitter     float64 // fraction in [0, 1): 0.1 spreads the delay over +/-10%
}

// Delay returns the delay after the k-th consecutive failure. r in [0, 1)
// places the delay inside the jitter band (0.5 is the centre); it is a
// parameter so that Delay stays a pure function. k <= 0 means no failure and
// yields 0. The result never overflows: any exponent that would exceed Max
// yields Max.
func (b Backoff) Delay(k int, r float64) time.Duration {
	if k <= 0 || b.Initial <= 0 {
		return 0
	}
	limit := b.Max
	if limit <= 0 || limit < b.Initial {
		limit = b.Initial
	}
	mult := b.Multiplier
	if mult < 1 || math.IsNaN(mult) {
		mult = 1
	}
	d := float64(b.Initial) * math.Pow(mult, float64(k-1))
	if math.IsInf(d, 0) || math.IsNaN(d) || d > float64(limit) {
		d = float64(limit)
	}
	if j := b.Jitter; j > 0 && j < 1 {
		if r < 0 || r >= 1 || math.IsNaN(r) {
			r = 0.5
		}
		d *= 1 + j*(2*r-1)
	}
	if d >= math.MaxInt64 {
		return time.Duration(math.MaxInt64)
	}
	return time.Duration(d)
}

// NextAttemptAt returns the earliest time of the next attempt after the k-th
// consecutive failure observed at now. r in [0, 1) is the position in the
// jitter band, as for Delay (the scheduler draws it at random).
func (b Backoff) NextAttemptAt(now time.Time, k int, r float64) time.Time {
	return now.Add(b.Delay(k, r))
}
