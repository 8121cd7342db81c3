package breaker

import (
	"math"
	"math/rand/v2"
	"testing"
	"time"
)

// almost reports whether got is within tol of want.
func almost(got, want, tol time.Duration) bool {
	d := got - want
	if d < 0 {
		d = -d
	}
	return d <= tol
}

func TestBackoffDelay(t *testing.T) {
	std := Backoff{Initial: time.Second, Max: 15 * time.Minute, Multiplier: 2}
	below1 := math.Nextafter(1, 0) // the largest r in [0, 1)
	tests := []struct {
		name string
		b    Backoff
		k    int
		r    float64
		want time.Duration
		tol  time.Duration
	}{
		{"k=0 no failure", std, 0, 0.5, 0, 0},
		{"k<0 no failure", std, -3, 0.5, 0, 0},
		{"k=MinInt no failure", std, math.MinInt, 0.5, 0, 0},
		{"k=1 is Initial", std, 1, 0.5, time.Second, 0},
		{"k=2 doubles", std, 2, 0.5, 2 * time.Second, 0},
		{"k=3 doubles again", std, 3, 0.5, 4 * time.Second, 0},
		{"k=10", std, 10, 0.5, 512 * time.Second, 0},
		{"k=11 capped at Max", std, 11, 0.5, 15 * time.Minute, 0},
		{"k=64 capped at Max", std, 64, 0.5, 15 * time.Minute, 0},
		{"k=1e6 capped at Max", std, 1_000_000, 0.5, 15 * time.Minute, 0},
		{"k=MaxInt capped at Max", std, math.MaxInt, 0.5, 15 * time.Minute, 0},
		{"multiplier 3", Backoff{Initial: 100 * time.Millisecond, Max: time.Hour, Multiplier: 3}, 4, 0.5, 2700 * time.Millisecond, 0},
		{"multiplier 1.5", Backoff{Initial: time.Second, Max: time.Hour, Multiplier: 1.5}, 3, 0.5, 2250 * time.Millisecond, 0},
		{"multiplier 1 stays at Initial", Backoff{Initial: 3 * time.Second, Max: time.Hour, Multiplier: 1}, 50, 0.5, 3 * time.Second, 0},
		{"multiplier 1 huge k", Backoff{Initial: 3 * time.Second, Max: time.Hour, Multiplier: 1}, math.MaxInt, 0.5, 3 * time.Second, 0},
		{"multiplier 0 treated as 1", Backoff{Initial: 3 * time.Second, Max: time.Hour}, 7, 0.5, 3 * time.Second, 0},
		{"multiplier <1 never shrinks", Backoff{Initial: 3 * time.Second, Max: time.Hour, Multiplier: 0.5}, 7, 0.5, 3 * time.Second, 0},
		{"multiplier NaN treated as 1", Backoff{Initial: 3 * time.Second, Max: time.Hour, Multiplier: math.NaN()}, 7, 0.5, 3 * time.Second, 0},
		{"multiplier +Inf capped", Backoff{Initial: time.Second, Max: time.Hour, Multiplier: math.Inf(1)}, 2, 0.5, time.Hour, 0},
		{"Max < Initial gives Initial", Backoff{Initial: 10 * time.Second, Max: time.Second, Multiplier: 2}, 5, 0.5, 10 * time.Second, 0},
		{"Max < Initial k=1", Backoff{Initial: 10 * time.Second, Max: time.Second, Multiplier: 2}, 1, 0.5, 10 * time.Second, 0},
		{"Max 0 gives Initial", Backoff{Initial: 10 * time.Second, Multiplier: 2}, 5, 0.5, 10 * time.Second, 0},
		{"Max = MaxInt64 huge k no overflow", Backoff{Initial: time.Second, Max: math.MaxInt64, Multiplier: 2}, math.MaxInt, 0.5, math.MaxInt64, 0},
		{"Max = MaxInt64 with jitter up no overflow", Backoff{Initial: time.Second, Max: math.MaxInt64, Multiplier: 2, Jitter: 0.5}, math.MaxInt, below1, math.MaxInt64, 0},
		{"zero value k=1", Backoff{}, 1, 0.5, 0, 0},
		{"zero value k=MaxInt", Backoff{}, math.MaxInt, 0.9, 0, 0},
		{"zero Initial with Max", Backoff{Max: time.Hour, Multiplier: 2, Jitter: 0.1}, 5, 0.9, 0, 0},
		{"negative Initial", Backoff{Initial: -time.Second, Max: time.Hour, Multiplier: 2}, 5, 0.5, 0, 0},

		// Jitter 0.1 spreads over [0.9d, 1.1d).
		{"jitter r=0 low edge", Backoff{Initial: time.Second, Max: time.Hour, Multiplier: 2, Jitter: 0.1}, 1, 0, 900 * time.Millisecond, time.Microsecond},
		{"jitter r->1 high edge", Backoff{Initial: time.Second, Max: time.Hour, Multiplier: 2, Jitter: 0.1}, 1, below1, 1100 * time.Millisecond, time.Microsecond},
		{"jitter r=0.5 centre", Backoff{Initial: time.Second, Max: time.Hour, Multiplier: 2, Jitter: 0.1}, 1, 0.5, time.Second, 0},
		{"jitter r=0.25", Backoff{Initial: time.Second, Max: time.Hour, Multiplier: 2, Jitter: 0.1}, 1, 0.25, 950 * time.Millisecond, time.Microsecond},
		{"jitter on k=4", Backoff{Initial: time.Second, Max: time.Hour, Multiplier: 2, Jitter: 0.1}, 4, 0, 7200 * time.Millisecond, time.Microsecond},
		{"jitter on the cap", Backoff{Initial: time.Second, Max: time.Minute, Multiplier: 2, Jitter: 0.1}, 1000, 0, 54 * time.Second, time.Microsecond},
		{"jitter r<0 is centre", Backoff{Initial: time.Second, Max: time.Hour, Multiplier: 2, Jitter: 0.1}, 1, -0.3, time.Second, 0},
		{"jitter r=1 is centre", Backoff{Initial: time.Second, Max: time.Hour, Multiplier: 2, Jitter: 0.1}, 1, 1, time.Second, 0},
		{"jitter r NaN is centre", Backoff{Initial: time.Second, Max: time.Hour, Multiplier: 2, Jitter: 0.1}, 1, math.NaN(), time.Second, 0},
		{"jitter >= 1 ignored", Backoff{Initial: time.Second, Max: time.Hour, Multiplier: 2, Jitter: 1}, 1, 0, time.Second, 0},
		{"negative jitter ignored", Backoff{Initial: time.Second, Max: time.Hour, Multiplier: 2, Jitter: -0.5}, 1, 0, time.Second, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := tc.b.Delay(tc.k, tc.r)
			if got < 0 {
				t.Fatalf("Delay(%d, %v) = %v: negative", tc.k, tc.r, got)
			}
			if !almost(got, tc.want, tc.tol) {
				t.Fatalf("Delay(%d, %v) = %v, want %v (+/- %v)", tc.k, tc.r, got, tc.want, tc.tol)
			}
		})
	}
}

// TestBackoffDelayMonotonic checks, for every k up to well past the cap,
// that the delay grows by Multiplier until Max and then stays there.
func TestBackoffDelayMonotonic(t *testing.T) {
	for _, b := range []Backoff{
		{Initial: time.Second, Max: 15 * time.Minute, Multiplier: 2},
		{Initial: time.Millisecond, Max: 24 * time.Hour, Multiplier: 10},
		{Initial: time.Nanosecond, Max: math.MaxInt64, Multiplier: 2},
		{Initial: time.Hour, Max: math.MaxInt64, Multiplier: 1e300},
	} {
		prev := time.Duration(0)
		for k := 1; k <= 2000; k++ {
			d := b.Delay(k, 0.5)
			if d < prev || d > b.Max || d <= 0 {
				t.Fatalf("%+v: Delay(%d) = %v after %v", b, k, d, prev)
			}
			if prev > 0 && d < b.Max {
				if want := float64(prev) * b.Multiplier; math.Abs(float64(d)-want) > want*1e-9 {
					t.Fatalf("%+v: Delay(%d) = %v, want %v*%v", b, k, d, prev, b.Multiplier)
				}
			}
			prev = d
		}
		if prev != b.Max {
			t.Fatalf("%+v: Delay(2000) = %v, want Max", b, prev)
		}
	}
}

func TestBackoffNextAttemptAt(t *testing.T) {
	now := time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)
	b := Backoff{Initial: time.Second, Max: 15 * time.Minute, Multiplier: 2, Jitter: 0.1}

	if got, want := b.NextAttemptAt(now, 3, 0.5), now.Add(4*time.Second); !got.Equal(want) {
		t.Fatalf("NextAttemptAt(k=3, 0.5) = %v, want %v", got, want)
	}
	if got := b.NextAttemptAt(now, 0, 0.9); !got.Equal(now) {
		t.Fatalf("NextAttemptAt(k=0) = %v, want now", got)
	}
	if got := (Backoff{}).NextAttemptAt(now, 42, rand.Float64()); !got.Equal(now) {
		t.Fatalf("zero Backoff NextAttemptAt = %v, want now", got)
	}

	for _, k := range []int{1, 3, 11, 1_000_000, math.MaxInt} {
		d := b.Delay(k, 0.5)
		lo, hi := now.Add(d*9/10), now.Add(d*11/10)
		var below, above int
		for range 1000 {
			at := b.NextAttemptAt(now, k, rand.Float64())
			if at.Before(lo) || at.After(hi) {
				t.Fatalf("k=%d: NextAttemptAt = now+%v, outside [%v, %v]", k, at.Sub(now), d*9/10, d*11/10)
			}
			if at.Before(now.Add(d)) {
				below++
			} else if at.After(now.Add(d)) {
				above++
			}
		}
		// The jitter is really random: both sides of the centre occur.
		if below == 0 || above == 0 {
			t.Fatalf("k=%d: 1000 samples: %d below and %d above the centre", k, below, above)
		}
	}
}
