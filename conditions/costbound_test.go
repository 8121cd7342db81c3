package conditions

import (
	"strings"
	"testing"
)

// checkUntracked asserts that when x runs untracked on in, the tracked
// program counts a cost within CostLimit on it: the static bound held.
func checkUntracked(t *testing.T, x *compiled, in *Input) {
	t.Helper()
	vs := &vars{in: in, tapes: &(&Set{}).tapes}
	defer vs.release()
	if x.program(vs.inputSize(x)) == x.prg {
		return
	}
	_, det, err := x.prg.ContextEval(t.Context(), vs)
	if err != nil && strings.Contains(err.Error(), "cost limit") {
		t.Fatalf("%q runs untracked but exceeds the cost limit tracked", x.text)
	}
	if det != nil && det.ActualCost() != nil && *det.ActualCost() > CostLimit {
		t.Fatalf("%q runs untracked but costs %d tracked", x.text, *det.ActualCost())
	}
}

// TestUntracked checks which expressions run without the cost tracker:
// the bounded ones on a 10 KiB body, not a loop over a 1 MiB body, nor
// one that reads tls, nor nested loops over the body.
func TestUntracked(t *testing.T) {
	small, big := httpInput(bench10K()), httpInput(`[`+strings.Repeat(`1,`, 512<<10)+`1]`)
	for _, c := range []struct {
		expr       string
		kind       Kind
		small, big bool // untracked on each
	}{
		{`status == 200`, HTTP, true, true},
		{`body.json.status == "ok"`, HTTP, true, true},
		{`body.json.items.map(i, i.id)`, HTTP, true, false},
		{`body.json.items.map(i, body.json.items.map(j, j.id))`, HTTP, false, false}, // 100² steps
		{`body.text.matches("^a+$")`, HTTP, true, false},
		{`headers["a"] == "b"`, HTTP, true, true},
		{`tls.not_after - now > duration("336h")`, HTTPS, false, false},
	} {
		s, probs := NewCompiler(nil).Compile(c.kind, nil, c.expr)
		if len(probs) > 0 {
			t.Fatal(probs)
		}
		x := s.sel
		for _, in := range []struct {
			in   *Input
			want bool
		}{{small, c.small}, {big, c.big}} {
			vs := &vars{in: in.in, tapes: &(&Set{}).tapes}
			if got := x.program(vs.inputSize(x)) != x.prg; got != in.want {
				t.Errorf("%q on %d bytes: untracked %v, want %v (limit %d)", c.expr, in.in.Body.Size(), got, in.want, x.fast.limit)
			}
			checkUntracked(t, x, in.in)
		}
	}
}
