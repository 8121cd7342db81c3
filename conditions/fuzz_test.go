package conditions

import (
	"testing"
)

// FuzzConditions compiles any expression as a condition and a select of
// every kind and evaluates what compiles against a JSON body: nothing
// panics, a problem has a message, a failed evaluation an error, and an
// expression that runs without the cost tracker costs within the limit.
func FuzzConditions(f *testing.F) {
	for _, s := range []string{`status == 200`, `body.json.status == "ok"`, `tls.not_after - now > duration("336h")`,
		`body.json.items.map(i, i.id)`, `headers["x"].startsWith("a")`, `stdout.json.ready`, `exit_code == 0`,
		`duration < duration("2s")`, `body.text.matches("^a+$")`, `status ==`, `1 / 0 == 1`, `[1,2].all(x, x > 0)`} {
		f.Add(s, `{"status":"ok","items":[{"id":1}]}`)
	}
	c := NewCompiler(nil)
	f.Fuzz(func(t *testing.T, expr, body string) {
		for k := range nKinds {
			set, probs := c.Compile(k, []string{expr}, "")
			for _, p := range probs {
				if p.String() == "" {
					t.Fatalf("a problem without a message for %q", expr)
				}
			}
			if set != nil {
				in := httpInput(body)
				checkUntracked(t, set.conds[0], in)
				out := set.Evaluate(t.Context(), in)
				if out.Err == nil && out.Condition != "" {
					t.Fatalf("a condition named without an error")
				}
			}
			if sel, _ := c.Compile(k, nil, expr); sel != nil {
				checkUntracked(t, sel.sel, httpInput(body))
				out := sel.Evaluate(t.Context(), httpInput(body))
				if (out.Err == nil) == (out.Selected == nil) {
					t.Fatalf("select %q: %v, %q", expr, out.Err, out.Selected)
				}
			}
		}
	})
}
