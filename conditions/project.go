package conditions

import (
	"strings"

	"github.com/google/cel-go/common/ast"
	"github.com/google/cel-go/common/operators"
	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
)

// A projection is the commonest select, a list's items by one field:
// ROOT.PATH.map(v, v.FIELD) with ROOT body.json or stdout.json and PATH
// and FIELD fields or constant indexes (`body.json.items.map(i, i.id)`).
// It runs on the body's tape without the interpreter, which builds a
// one-element list and resolves the variable through a frame for each
// item (~1 µs an item, most of issue 23's select).
//
// The native run only takes the plain case: every key present in an
// object, every index within a list, PATH a list, every value one that
// appendCanonical writes. Anything else (a missing key, a map iterated by
// its keys, a value of another type) runs the CEL program instead, which
// gives that case's value or error; in the plain case both give the same
// bytes (FuzzProjection compares them). It runs only for an input within
// the bound under which the program would run without the cost tracker
// (costbound.go), so that an input whose projection the limit would stop
// is still stopped.
type projection struct {
	root  string    // varBodyJSON or varStdoutJSN
	path  []ref.Val // from root to the list: types.String or types.Int
	field []ref.Val // from each item to its value
}

// findProjection returns the projection that the checked expression a
// is, or nil.
func findProjection(a *ast.AST) *projection {
	e := a.Expr()
	if e.Kind() != ast.ComprehensionKind {
		return nil
	}
	c := e.AsComprehension()
	if c.HasIterVar2() || !isEmptyList(c.AccuInit()) || !isTrue(c.LoopCondition()) ||
		!isIdent(c.Result(), c.AccuVar()) {
		return nil
	}
	step := c.LoopStep()
	if step.Kind() != ast.CallKind {
		return nil
	}
	call := step.AsCall()
	if call.FunctionName() != operators.Add || len(call.Args()) != 2 || !isIdent(call.Args()[0], c.AccuVar()) ||
		call.Args()[1].Kind() != ast.ListKind {
		return nil
	}
	l := call.Args()[1].AsList()
	if len(l.Elements()) != 1 || len(l.OptionalIndices()) != 0 {
		return nil
	}
	field, ok := keysFrom(l.Elements()[0], func(name string) bool { return name == c.IterVar() })
	if !ok {
		return nil
	}
	var root string
	path, ok := keysFrom(c.IterRange(), func(name string) bool {
		root = name
		return name == varBodyJSON || name == varStdoutJSN
	})
	if !ok {
		return nil
	}
	return &projection{root: root, path: path, field: field}
}

// keysFrom returns the keys of the path e (pathOf) when it starts from an
// identifier that isRoot accepts.
func keysFrom(e ast.Expr, isRoot func(string) bool) ([]ref.Val, bool) {
	root, steps, ok := pathOf(e)
	if !ok || !isRoot(root.AsIdent()) {
		return nil, false
	}
	keys := make([]ref.Val, len(steps))
	for i, st := range steps {
		keys[i] = st.key
	}
	return keys, true
}

func isEmptyList(e ast.Expr) bool {
	return e.Kind() == ast.ListKind && len(e.AsList().Elements()) == 0
}

func isTrue(e ast.Expr) bool {
	return e.Kind() == ast.LiteralKind && e.AsLiteral() == types.True
}

func isIdent(e ast.Expr, name string) bool {
	return e.Kind() == ast.IdentKind && e.AsIdent() == name
}

// run returns the canonical JSON of the projection of vs's body, or ok
// false when it is not the plain case (above).
func (p *projection) run(vs *vars) (_ []byte, ok bool) {
	if _, err := vs.bodyJSON(strings.TrimSuffix(p.root, ".json")); err != nil {
		return nil, false
	}
	t := vs.tape
	list, ok := t.walk(0, p.path)
	if !ok || t.nodes[list].kind != kindArray {
		return nil, false
	}
	b := make([]byte, 0, 64)
	b = append(b, '[')
	for e := list + 1; e < t.nodes[list].next; e = t.nodes[e].next {
		v, ok := t.walk(e, p.field)
		if !ok {
			return nil, false
		}
		if e > list+1 {
			b = append(b, ',')
		}
		if b, ok = t.appendCanonical(b, v); !ok {
			return nil, false
		}
	}
	return append(b, ']'), true
}

// walk applies keys to the node i: a string key to an object, an int key
// to an array; ok is false for a key missing or of the other kind.
func (t *tape) walk(i uint32, keys []ref.Val) (_ uint32, ok bool) {
	for _, k := range keys {
		n := &t.nodes[i]
		switch k := k.(type) {
		case types.String:
			if n.kind != kindObject {
				return 0, false
			}
			if i, ok = t.member(i, string(k)); !ok {
				return 0, false
			}
		case types.Int:
			if n.kind != kindArray || k < 0 {
				return 0, false
			}
			e := i + 1
			for range k {
				if e >= n.next {
					return 0, false
				}
				e = t.nodes[e].next
			}
			if e >= n.next {
				return 0, false
			}
			i = e
		}
	}
	return i, true
}

// appendCanonical appends the canonical JSON of the node i: numbers and
// plain strings from the tape, other values through their CEL value.
func (t *tape) appendCanonical(b []byte, i uint32) ([]byte, bool) {
	n := &t.nodes[i]
	switch n.kind {
	case kindNumber:
		if raw := t.b[n.start:n.end]; isShortInt(raw) {
			return append(b, raw...), true // what parsing and writing it gives
		}
		return appendFloat(b, t.number(i))
	case kindString:
		if n.plain {
			return appendSimple(b, t.b[n.start+1:n.end-1])
		}
	}
	return appendCanonical(b, jsonValue(t, i), 1)
}

// isShortInt reports whether the number raw is an integer of at most 15
// digits: a float64 holds it exactly, and encoding/json writes that float
// with the same digits (JSON has no leading zeros; -0 is written "-0").
func isShortInt(raw []byte) bool {
	if len(raw) > 0 && raw[0] == '-' {
		raw = raw[1:]
	}
	if len(raw) == 0 || len(raw) > 15 {
		return false
	}
	for _, c := range raw {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}
