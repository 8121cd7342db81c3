package conditions

import (
	"bytes"
	"context"
	"crypto/x509"
	"crypto/x509/pkix"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"
)

// memBody is a Body in memory, as a sources.Capture of a small answer.
type memBody struct{ b []byte }

func (m memBody) Size() int64 { return int64(len(m.b)) }
func (m memBody) Reader() *io.SectionReader {
	return io.NewSectionReader(bytes.NewReader(m.b), 0, int64(len(m.b)))
}

var now0 = time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC)

func httpInput(body string) *Input {
	return &Input{
		Status: 200, ExitCode: -1,
		Header:   http.Header{"Content-Type": {"application/json"}, "X-Token": {"s3cret", "two"}},
		Body:     memBody{[]byte(body)},
		Duration: 1500 * time.Millisecond, Now: now0,
		Cert: &x509.Certificate{NotAfter: now0.Add(10 * 24 * time.Hour), DNSNames: []string{"a.example", "b.example"},
			Issuer: pkix.Name{CommonName: "test ca"}, Subject: pkix.Name{CommonName: "a.example"}},
	}
}

func mustSet(t *testing.T, k Kind, conds []string, sel string) *Set {
	t.Helper()
	s, probs := NewCompiler(nil).Compile(k, conds, sel)
	if len(probs) > 0 {
		t.Fatalf("Compile(%q, %q): %v", conds, sel, probs)
	}
	return s
}

// TestEvaluateVariables checks every variable, true and false, and the
// failure message naming what the condition read.
func TestEvaluateVariables(t *testing.T) {
	body := `{"status":"degraded","items":[{"id":1},{"id":2}],"n":3}`
	cases := []struct {
		kind Kind
		cond string
		ok   bool
		msg  string // the failure's error, when !ok
	}{
		{HTTPS, `status == 200`, true, ""},
		{HTTPS, `status == 201`, false, `condition failed: status == 201 (status = 200)`},
		{HTTPS, `headers["content-type"] == "application/json"`, true, ""},
		{HTTPS, `headers["x-token"] == "x"`, false, `condition failed: headers["x-token"] == "x" (headers["x-token"] = "s3cret, two")`},
		{HTTPS, `body.text.contains("degraded")`, true, ""},
		{HTTPS, `body.json.status == "ok"`, false, `condition failed: body.json.status == "ok" (body.json.status = "degraded")`},
		{HTTPS, `body.json.n == 3`, true, ""},
		{HTTPS, `body.json.items.size() == 2`, true, ""},
		{HTTPS, `duration < duration("1s")`, false, `condition failed: duration < duration("1s") (duration = 1.5s)`},
		{HTTPS, `duration < duration("2s")`, true, ""},
		{HTTPS, `now == timestamp("2026-12-07T12:00:00Z")`, true, ""},
		{HTTPS, `tls.not_after - now > duration("336h")`, false,
			`condition failed: tls.not_after - now > duration("336h") (tls.not_after = 2026-12-17T12:00:00Z, now = 2026-12-07T12:00:00Z)`},
		{HTTPS, `tls.not_after - now > duration("168h")`, true, ""},
		{HTTPS, `tls.issuer == "CN=test ca" && tls.subject == "CN=a.example"`, true, ""},
		{HTTPS, `"b.example" in tls.dns_names`, true, ""},
		{HTTPS, `body.json.missing == 1`, false, `condition failed: body.json.missing == 1: no such key: missing`},
		{HTTPS, `body.json.status`, false, `condition failed: body.json.status: the value is string, not a bool (body.json.status = "degraded")`},
	}
	for _, c := range cases {
		s := mustSet(t, c.kind, []string{c.cond}, "")
		out := s.Evaluate(t.Context(), httpInput(body))
		if c.ok != (out.Err == nil) {
			t.Errorf("%s: err %v, want ok=%v", c.cond, out.Err, c.ok)
			continue
		}
		if !c.ok && (out.Err.Error() != c.msg || out.Condition != c.cond) {
			t.Errorf("%s:\n got %q (condition %q)\nwant %q", c.cond, out.Err, out.Condition, c.msg)
		}
	}
}

// TestEvaluateExec checks the exec variables.
func TestEvaluateExec(t *testing.T) {
	in := &Input{ExitCode: 0, Body: memBody{[]byte(`{"ready":true}` + "\n")}, Duration: time.Second, Now: now0}
	s := mustSet(t, Exec, []string{`exit_code == 0`, `stdout.json.ready`, `stdout.text.startsWith("{")`}, `stdout.json`)
	out := s.Evaluate(t.Context(), in)
	if out.Err != nil || string(out.Selected) != `{"ready":true}` {
		t.Fatalf("Evaluate = %v, %s", out.Err, out.Selected)
	}
	in.Body = memBody{[]byte("not json")}
	out = mustSet(t, Exec, []string{`stdout.json.ready`}, "").Evaluate(t.Context(), in)
	if want := "condition failed: stdout.json.ready: stdout is not JSON"; out.Err == nil || out.Err.Error() != want {
		t.Fatalf("Evaluate = %v, want %s", out.Err, want)
	}
	out = mustSet(t, Exec, nil, `stdout.json`).Evaluate(t.Context(), in)
	if want := "select: stdout is not JSON"; out.Err == nil || out.Err.Error() != want {
		t.Fatalf("Evaluate = %v, want %s", out.Err, want)
	}
}

// TestSelect checks the canonical JSON of select: keys sorted, whatever
// the body's order.
func TestSelect(t *testing.T) {
	s := mustSet(t, HTTP, []string{`status == 200`}, `body.json.items.map(i, {"id": i.id, "b": "x"})`)
	a := s.Evaluate(t.Context(), httpInput(`{"ts": 1, "items":[{"id":1,"z":0},{"id":2}]}`))
	b := s.Evaluate(t.Context(), httpInput(`{"items":[{"z":5,"id":1},{"id":2}], "ts": 2}`))
	want := `[{"b":"x","id":1},{"b":"x","id":2}]`
	if a.Err != nil || string(a.Selected) != want || string(b.Selected) != want {
		t.Fatalf("Selected = %s / %s (%v), want %s", a.Selected, b.Selected, a.Err, want)
	}
	out := s.Evaluate(t.Context(), httpInput(`<html>`))
	if want := "select: body is not JSON"; out.Err == nil || out.Err.Error() != want {
		t.Fatalf("Evaluate = %v, want %s", out.Err, want)
	}
}

// TestCostLimit checks that a loop over a large array stops at the cost
// limit with a clear error.
func TestCostLimit(t *testing.T) {
	big := "[" + strings.Repeat("0,", 200_000) + "0]"
	for _, e := range []string{`body.json.map(x, x).size() > 0`, `body.json.all(x, x >= 0)`} {
		s := mustSet(t, HTTP, []string{e}, "")
		start := time.Now()
		out := s.Evaluate(t.Context(), httpInput(big))
		if out.Err == nil || !strings.Contains(out.Err.Error(), "condition failed: "+e+": evaluation stopped: ") {
			t.Fatalf("Evaluate = %v", out.Err)
		}
		if d := time.Since(start); d > 5*time.Second {
			t.Errorf("%s took %v to stop", e, d)
		}
	}
}

// TestCompileProblems checks the problems of 14.4 with their columns.
func TestCompileProblems(t *testing.T) {
	long := "status == 200 && " + strings.Repeat("status == 200 && ", 300) + "true"
	cases := []struct {
		kind  Kind
		conds []string
		sel   string
		want  []string // Index: String()
	}{
		{HTTP, []string{`status == 200`, `status ==`}, "", []string{"1: column 10: Syntax error: mismatched input '<EOF>' expecting {'[', '{', '(', '.', '-', '!', 'true', 'false', 'null', NUM_FLOAT, NUM_INT, NUM_UINT, STRING, BYTES, IDENTIFIER}"}},
		{HTTP, []string{`tls.not_after > now`}, "", []string{"0: column 1: tls is only set for https sources: on an http:// URL this can never hold"}},
		{HTTP, []string{`stdout.text == ""`}, "", []string{"0: column 1: stdout is only set for exec sources"}},
		{Exec, []string{`status == 200`}, "", []string{"0: column 1: status is only set for http sources (an exec source has stdout and exit_code)"}},
		{Exec, []string{`body.json.x`}, "", []string{"0: column 1: body is only set for http sources (an exec source has stdout and exit_code)"}},
		{HTTP, []string{`status + 1`}, "", []string{"0: column 1: a condition must be a bool, this is int"}},
		{HTTP, []string{`status == "x"`}, "", []string{"0: column 8: found no matching overload for '_==_' applied to '(int, string)'"}},
		{HTTP, []string{long}, "", []string{"0: expression is 5121 bytes long: at most 4096 (4 KiB) are allowed"}},
		{HTTP, []string{" "}, "", []string{"0: expression is empty"}},
		{HTTP, make33(), "", []string{"-2: 33 conditions: at most 32 are allowed"}},
		{HTTP, nil, "body.json.(", []string{"-1: column 11: Syntax error: no viable alternative at input '.('"}},
	}
	for _, c := range cases {
		_, probs := NewCompiler(nil).Compile(c.kind, c.conds, c.sel)
		var got []string
		for _, p := range probs {
			got = append(got, itoa(p.Index)+": "+p.String())
		}
		if strings.Join(got, "\n") != strings.Join(c.want, "\n") {
			t.Errorf("%q %q:\n got %q\nwant %q", c.conds, c.sel, got, c.want)
		}
	}
}

func make33() []string {
	out := make([]string, 33)
	for i := range out {
		out[i] = "status == 200"
	}
	return out
}

func itoa(i int) string {
	if i < 0 {
		return "-" + string(rune('0'-i))
	}
	return string(rune('0' + i))
}

// TestCompilerReuse checks that a compiler reuses the previous load's
// expressions by their text, and forgets those no longer used.
func TestCompilerReuse(t *testing.T) {
	c1 := NewCompiler(nil)
	s1, _ := c1.Compile(HTTP, []string{`status == 200`}, `body.json`)
	c1.Seal(nil)
	c2 := NewCompiler(c1)
	s2, _ := c2.Compile(HTTP, []string{`status == 200`}, `body.json`)
	x2, _ := c2.Compile(HTTP, []string{`status == 200`, `duration < duration("1s")`}, "")
	c2.Seal(nil)
	if s1 != s2 || x2.conds[0] != s1.conds[0] {
		t.Fatalf("the second load compiled again what the first did")
	}
	c3 := NewCompiler(c2)
	c3.Seal(slices.Values([]*Set{s1}))
	if len(c3.exprs) != 2 || len(c3.sets) != 1 || c3.prev != nil {
		t.Fatalf("a sealed compiler keeps %d expressions, %d sets and its previous one", len(c3.exprs), len(c3.sets))
	}
	c4 := NewCompiler(c3)
	if s4, _ := c4.Compile(HTTP, []string{`status == 200`}, `body.json`); s4 != s1 {
		t.Fatalf("a live set was compiled again")
	}
	if !s1.NeedsBody() || s1.NeedsHeaders() || s1.NeedsTLS() || !s1.Selects() {
		t.Fatalf("reads of %v wrong", s1.Conditions())
	}
}

// Bytes is the body in memory, as sources.Capture gives it.
func (m memBody) Bytes() ([]byte, bool) { return m.b, true }

// TestEvaluateInterrupted checks that an expression with a loop stops
// when its context is done (a poll's timeout), with a clear error, while
// one without a loop, which has nothing to interrupt, still runs.
func TestEvaluateInterrupted(t *testing.T) {
	body := "[" + strings.Repeat("1,", 5000) + "1]"
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	s := mustSet(t, HTTP, []string{`body.json.all(x, x >= 0)`}, "")
	if out := s.Evaluate(t.Context(), httpInput(body)); out.Err != nil {
		t.Fatalf("Evaluate = %v, want it to hold", out.Err)
	}
	out := s.Evaluate(ctx, httpInput(body))
	if out.Err == nil || !strings.Contains(out.Err.Error(), "evaluation stopped: it ran longer than") {
		t.Fatalf("Evaluate after the context ended = %v", out.Err)
	}
	if out := mustSet(t, HTTP, []string{`status == 200`}, "").Evaluate(ctx, httpInput(body)); out.Err != nil {
		t.Fatalf("Evaluate without a loop = %v", out.Err)
	}
}
