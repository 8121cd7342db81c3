package conditions

import (
	"math"
	"sync"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/checker"
)

// An expression whose cost is bounded below CostLimit for the poll at hand
// runs without cel-go's cost tracker (which took a quarter of issue 23's
// poll: it observes every step of a comprehension). cel-go's static
// estimate of its cost, made with every value reachable from a variable
// at most as large as the largest of the poll's input, is an upper bound
// of what the tracker would count, so that the limit cannot be reached
// and the tracker has nothing to stop. The largest value is the body's
// bytes for body.text, the most members of an object or array or bytes
// of a string of the body for body.json (its tape counts them), the
// headers' bytes for headers. Any other expression, and every one that
// reads tls, runs with the tracker and its limit as before; both programs
// are interrupted after EvalTimeout.

// sizeBound is a checker.CostEstimator that bounds by n the size of every
// value reachable from a variable.
type sizeBound struct{ n uint64 }

var _ checker.CostEstimator = sizeBound{}

// EstimateSize bounds a node that is a variable or a path from one.
func (s sizeBound) EstimateSize(node checker.AstNode) *checker.SizeEstimate {
	if len(node.Path()) == 0 {
		return nil
	}
	return &checker.SizeEstimate{Min: 0, Max: s.n}
}

// EstimateCallCost leaves every call to cel-go's own estimate.
func (sizeBound) EstimateCallCost(string, string, *checker.AstNode, []checker.AstNode) *checker.CallEstimate {
	return nil
}

// untracked is an expression's program without the cost tracker and the
// largest input size it may run on, made on its first evaluation (so that
// validating a configuration pays for neither).
type untracked struct {
	once  sync.Once
	prg   cel.Program // nil: never untracked
	limit uint64      // the largest input, in bytes
}

// program returns the program to evaluate x with on an input of n bytes:
// the untracked one when the estimate allows it, else x.prg.
func (x *compiled) program(n uint64) cel.Program {
	if x.bounded(n) {
		return x.fast.prg
	}
	return x.prg
}

// bounded reports whether x's cost on an input of n bytes is bounded
// within CostLimit, so that it runs without the tracker.
func (x *compiled) bounded(n uint64) bool {
	u := &x.fast
	u.once.Do(func() { u.prg, u.limit = x.untrack() })
	return u.prg != nil && n <= u.limit
}

// untrack makes the untracked program of x and the largest input size
// (inputSize) whose estimate is within CostLimit, or nil.
func (x *compiled) untrack() (cel.Program, uint64) {
	if x.reads&readsTLS != 0 || x.env == nil || x.checked == nil {
		return nil, 0
	}
	within := func(n uint64) bool {
		est, err := x.env.EstimateCost(x.checked, sizeBound{n: n})
		return err == nil && est.Max <= CostLimit
	}
	if !within(0) {
		return nil, 0
	}
	lo, hi := uint64(0), uint64(MaxEvalBody)+1 // within(lo); hi: not known
	if within(hi) {
		lo = hi
	}
	for lo+1 < hi {
		if mid := lo + (hi-lo)/2; within(mid) {
			lo = mid
		} else {
			hi = mid
		}
	}
	prg, err := x.env.Program(x.checked, cel.InterruptCheckFrequency(64))
	if err != nil {
		return nil, 0
	}
	return prg, lo
}

// inputSize bounds the size of every value that x reads from vs (see
// above), or is MaxUint64 when it reads a body that is not JSON (whose
// evaluation fails at once).
func (vs *vars) inputSize(x *compiled) uint64 {
	var n uint64
	if x.reads&readsText != 0 && vs.in.Body != nil {
		n = uint64(max(vs.in.Body.Size(), 0))
	}
	if x.reads&readsJSON != 0 {
		if _, err := vs.bodyJSON(x.what()); err != nil {
			return math.MaxUint64
		}
		n = max(n, uint64(vs.tape.maxSize))
	}
	if x.reads&readsHeaders != 0 {
		var h uint64
		for k, v := range vs.in.Header {
			h += uint64(len(k)) + 2
			for _, s := range v {
				h += uint64(len(s)) + 2
			}
		}
		n = max(n, h)
	}
	return n
}

// what names the variable whose JSON x reads in an error: "body", or
// "stdout" for an exec source.
func (x *compiled) what() string {
	if x.key.kind == Exec {
		return "stdout"
	}
	return "body"
}
