package conditions

import (
	"slices"
	"strconv"

	"github.com/google/cel-go/common/ast"
	"github.com/google/cel-go/common/operators"
	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
	"github.com/google/cel-go/common/types/traits"
)

// probe is a value an expression reads that a failure message names: a
// variable followed by fields and constant indexes (body.json.status,
// headers["content-type"], body.json.items[0]).
type probe struct {
	name string
	root string    // the variable
	keys []ref.Val // types.String or types.Int, applied in turn
}

// findProbes returns the probes of the checked expression a: each longest
// path of fields and constant indexes from a variable, once, in the order
// of the expression.
func findProbes(a *ast.AST) []probe {
	refs := a.ReferenceMap()
	type found struct {
		p       probe
		id, sub int64 // the path's expression, and the path it extends (0: none)
	}
	var all []found
	ast.PreOrderVisit(a.Expr(), ast.NewExprVisitor(func(e ast.Expr) {
		root, steps, ok := pathOf(e)
		if !ok {
			return
		}
		r, ok := refs[root.ID()]
		if !ok || r.Value != nil || r.Name == "" {
			return
		}
		p := probe{name: r.Name, root: r.Name}
		for _, st := range steps {
			p = p.with(st.key, st.suffix())
		}
		all = append(all, found{p: p, id: e.ID(), sub: operandID(e)})
	}))
	extended := map[int64]bool{}
	for _, f := range all {
		extended[f.sub] = true
	}
	var out []probe
	seen := map[string]bool{}
	for _, f := range all {
		if !extended[f.id] && !seen[f.p.name] {
			seen[f.p.name] = true
			out = append(out, f.p)
		}
	}
	return out
}

// pathStep is one step of a path: a field selection (key a types.String)
// or a constant index (a types.String or types.Int).
type pathStep struct {
	key   ref.Val
	field bool
}

// suffix is the step as a name writes it: ".f", ["k"] or [2].
func (st pathStep) suffix() string {
	switch k := st.key.(type) {
	case types.String:
		if st.field {
			return "." + string(k)
		}
		return "[" + strconv.Quote(string(k)) + "]"
	case types.Int:
		return "[" + strconv.FormatInt(int64(k), 10) + "]"
	}
	return ""
}

// pathOf returns the identifier that e applies fields and constant indexes
// to, and those steps from the identifier out; ok is false for any other
// expression (probes and projections are such paths).
func pathOf(e ast.Expr) (root ast.Expr, steps []pathStep, ok bool) {
	for {
		switch e.Kind() {
		case ast.IdentKind:
			slices.Reverse(steps)
			return e, steps, true
		case ast.SelectKind:
			s := e.AsSelect()
			if s.IsTestOnly() {
				return nil, nil, false
			}
			steps, e = append(steps, pathStep{key: types.String(s.FieldName()), field: true}), s.Operand()
		case ast.CallKind:
			c := e.AsCall()
			if c.FunctionName() != operators.Index || len(c.Args()) != 2 || c.Args()[1].Kind() != ast.LiteralKind {
				return nil, nil, false
			}
			switch k := c.Args()[1].AsLiteral().(type) {
			case types.String, types.Int:
				steps, e = append(steps, pathStep{key: k}), c.Args()[0]
			default:
				return nil, nil, false
			}
		default:
			return nil, nil, false
		}
	}
}

// operandID is the ID of the expression a path step e applies to, or 0
// for an identifier.
func operandID(e ast.Expr) int64 {
	switch e.Kind() {
	case ast.SelectKind:
		return e.AsSelect().Operand().ID()
	case ast.CallKind:
		return e.AsCall().Args()[0].ID()
	}
	return 0
}

// with returns p extended by key, written suffix in its name.
func (p probe) with(key ref.Val, suffix string) probe {
	keys := append(p.keys[:len(p.keys):len(p.keys)], key)
	return probe{name: p.name + suffix, root: p.root, keys: keys}
}

// value resolves p against the variables of vs, or reports false when it
// cannot (a missing key, a value that is no map or list).
func (p probe) value(vs *vars) (ref.Val, bool) {
	raw, ok := vs.ResolveName(p.root)
	if !ok {
		return nil, false
	}
	v := types.DefaultTypeAdapter.NativeToValue(raw)
	for _, k := range p.keys {
		if types.IsError(v) {
			return nil, false
		}
		switch c := v.(type) {
		case traits.Mapper:
			got, found := c.Find(k)
			if !found {
				return nil, false
			}
			v = got
		case traits.Lister:
			i, isInt := k.(types.Int)
			if !isInt || i < 0 || i >= c.Size().(types.Int) {
				return nil, false
			}
			v = c.Get(i)
		default:
			return nil, false
		}
	}
	if types.IsError(v) {
		return nil, false
	}
	return v, true
}
