package conditions

import (
	"bytes"
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
)

// TestFindProjection checks which selects run natively: a list's items
// by a path of fields and constant indexes, and nothing else.
func TestFindProjection(t *testing.T) {
	for _, c := range []struct {
		kind Kind
		sel  string
		want string // the projection's root, path and field, or "" for none
	}{
		{HTTP, `body.json.items.map(i, i.id)`, `body.json ["items"] ["id"]`},
		{HTTPS, `body.json.a["b c"][2].map(x, x.p.q[0])`, `body.json ["a" "b c" 2] ["p" "q" 0]`},
		{HTTP, `body.json.map(x, x)`, `body.json [] []`},
		{Exec, `stdout.json.items.map(i, i.name)`, `stdout.json ["items"] ["name"]`},
		{HTTP, `body.json.items.map(i, i.id + 1)`, ``},
		{HTTP, `body.json.items.map(i, i.id > 1, i.id)`, ``},
		{HTTP, `body.json.items.filter(i, i.id > 1)`, ``},
		{HTTP, `body.json.items.map(i, body.json.n)`, ``},
		{HTTP, `body.json.items.map(i, has(i.id))`, ``},
		{HTTP, `body.json.items.map(i, i[1.5])`, ``},
		{HTTP, `[1, 2].map(i, i)`, ``},
		{HTTP, `body.json.items`, ``},
		{HTTP, `body.json.items.map(i, [i.id])`, ``},
	} {
		s, probs := NewCompiler(nil).Compile(c.kind, nil, c.sel)
		if len(probs) > 0 {
			t.Fatalf("%s: %v", c.sel, probs)
		}
		got := ""
		if p := s.sel.proj; p != nil {
			got = fmt.Sprintf("%s %s %s", p.root, keysString(p.path), keysString(p.field))
		}
		if got != c.want {
			t.Errorf("%s: projection %q, want %q", c.sel, got, c.want)
		}
	}
}

func keysString(keys []ref.Val) string {
	var parts []string
	for _, k := range keys {
		if s, ok := k.(types.String); ok {
			parts = append(parts, strconv.Quote(string(s)))
		} else {
			parts = append(parts, fmt.Sprint(k.Value()))
		}
	}
	return "[" + strings.Join(parts, " ") + "]"
}

// celSelect is select's outcome through the CEL program alone.
func celSelect(t testing.TB, s *Set, in *Input) Outcome {
	t.Helper()
	vs := s.vars(in)
	defer vs.release()
	return s.sel.selectCEL(t.Context(), vs, vs.inputSize(s.sel))
}

// sameAsCEL fails t when Evaluate's select outcome is not the CEL
// program's, and reports whether the projection ran natively.
func sameAsCEL(t testing.TB, sel, body string) (native bool) {
	t.Helper()
	s, probs := NewCompiler(nil).Compile(HTTP, nil, sel)
	if len(probs) > 0 || s.sel.proj == nil {
		return false
	}
	want := celSelect(t, s, httpInput(body))
	got := s.Evaluate(t.Context(), httpInput(body))
	if fmt.Sprint(got.Err) != fmt.Sprint(want.Err) || !bytes.Equal(got.Selected, want.Selected) {
		t.Fatalf("select %s on %q:\nnative %q, %v\nCEL    %q, %v", sel, body, got.Selected, got.Err, want.Selected, want.Err)
	}
	vs := s.vars(httpInput(body))
	defer vs.release()
	_, native = s.sel.proj.run(vs)
	if native && want.Err != nil {
		t.Fatalf("select %s on %q: native ran where CEL fails: %v", sel, body, want.Err)
	}
	return native
}

// TestProjectionSameAsCEL checks the native projection against the CEL
// program: the same bytes in the plain case, CEL's value or error in the
// others.
func TestProjectionSameAsCEL(t *testing.T) {
	var big strings.Builder
	big.WriteString(`{"items":[{`)
	for i := range 40 {
		fmt.Fprintf(&big, `"k%d":%d,`, i, i)
	}
	big.WriteString(`"id":"last"}]}`)
	for _, c := range []struct {
		sel, body string
		native    bool
	}{
		{`body.json.items.map(i, i.id)`, `{"items":[{"id":1},{"id":2.5},{"id":-3e2}]}`, true},
		{`body.json.items.map(i, i.id)`, `{"items":[{"id":-0},{"id":0},{"id":-999999999999999},{"id":1234567890123456789},{"id":0.000001},{"id":1e21}]}`, true},
		{`body.json.items.map(i, i.id)`, `{"items":[{"id":"a"},{"id":"\u0041"}]}`, true},
		{`body.json.items.map(i, i.id)`, `{"items":[{"id":"a"},{"id":"é\n"},{"id":"del\u007f"}]}`, false}, // escaped: the slow path
		{`body.json.items.map(i, i.id)`, `{"items":[{"id":null},{"id":true},{"id":[1,{"b":2,"a":1}]},{"id":{}}]}`, true},
		{`body.json.items.map(i, i.id)`, `{"items":[{"id":1,"id":2}],"items":[{"id":3,"id":4}]}`, true},
		{`body.json.items.map(i, i.id)`, `{"items":[]}`, true},
		{`body.json.items.map(i, i.id)`, big.String(), true},
		{`body.json.items.map(i, i.id)`, `{"items":[{"id":1},{"no":2}]}`, false},
		{`body.json.items.map(i, i.id)`, `{"items":{"id":1}}`, false},
		{`body.json.items.map(i, i.id)`, `{"items":[1]}`, false},
		{`body.json.items.map(i, i.id)`, `{"other":[]}`, false},
		{`body.json.items.map(i, i.id)`, `[]`, false},
		{`body.json.items.map(i, i.id)`, `not json`, false},
		{`body.json.items.map(i, i.id)`, `{"items":[{"id":1e400}]}`, false},
		{`body.json[1].map(i, i[0])`, `[[9],[[1],[2,3]]]`, true},
		{`body.json[2].map(i, i[0])`, `[[9],[[1],[2,3]]]`, false},
		{`body.json[-1].map(i, i)`, `[[9]]`, false},
		{`body.json.map(i, i[1])`, `[[1,2],[3]]`, false},
		{`body.json.map(x, x)`, `[1,"a",null]`, true},
	} {
		if got := sameAsCEL(t, c.sel, c.body); got != c.native {
			t.Errorf("select %s on %q: native %v, want %v", c.sel, c.body, got, c.native)
		}
	}
}

// TestProjectionKeepsCostLimit checks that a projection over an input
// beyond the cost bound is not run natively: the cost limit stops it as
// it stops the CEL program.
func TestProjectionKeepsCostLimit(t *testing.T) {
	big := "[" + strings.Repeat(`{"id":1},`, 200_000) + `{"id":1}]`
	s := mustSet(t, HTTP, nil, `body.json.map(x, x.id)`)
	out := s.Evaluate(t.Context(), httpInput(big))
	if out.Err == nil || !strings.Contains(out.Err.Error(), "select: evaluation stopped: ") {
		t.Fatalf("Evaluate = %v, %d bytes selected", out.Err, len(out.Selected))
	}
}

// FuzzProjection compares the native projection with the CEL program on
// any body and any path.
func FuzzProjection(f *testing.F) {
	f.Add(`{"items":[{"id":1},{"id":"x"}]}`, "items", "id", 0)
	f.Add(`[[1,2],[3,4]]`, "", "", 1)
	f.Add(`[[-0,1e2,12345678901234567],[0.1,-1]]`, "", "", 0)
	f.Add(`{"a":{"b":[{"c":[true,null]}]}}`, "a", "c", 0)
	f.Fuzz(func(t *testing.T, body, list, field string, idx int) {
		for _, sel := range []string{
			fmt.Sprintf(`body.json[%s].map(i, i[%s])`, strconv.Quote(list), strconv.Quote(field)),
			fmt.Sprintf(`body.json[%s].map(i, i[%d])`, strconv.Quote(list), idx),
			fmt.Sprintf(`body.json[%d].map(i, i[%s])`, idx, strconv.Quote(field)),
			fmt.Sprintf(`body.json.map(i, i[%s][%s])`, strconv.Quote(list), strconv.Quote(field)),
			`body.json.map(i, i)`,
		} {
			sameAsCEL(t, sel, body)
		}
	})
}
