package conditions

import (
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
	var pathOf func(e ast.Expr) (probe, int64, bool)
	pathOf = func(e ast.Expr) (probe, int64, bool) {
		switch e.Kind() {
		case ast.IdentKind:
			if r, ok := refs[e.ID()]; ok && r.Value == nil && r.Name != "" {
				return probe{name: r.Name, root: r.Name}, 0, true
			}
		case ast.SelectKind:
			s := e.AsSelect()
			if p, _, ok := pathOf(s.Operand()); ok && !s.IsTestOnly() {
				return p.with(types.String(s.FieldName()), "."+s.FieldName()), s.Operand().ID(), true
			}
		case ast.CallKind:
			c := e.AsCall()
			if c.FunctionName() != operators.Index || len(c.Args()) != 2 || c.Args()[1].Kind() != ast.LiteralKind {
				break
			}
			p, _, ok := pathOf(c.Args()[0])
			switch k := c.Args()[1].AsLiteral().(type) {
			case types.String:
				if ok {
					return p.with(k, "["+strconv.Quote(string(k))+"]"), c.Args()[0].ID(), true
				}
			case types.Int:
				if ok {
					return p.with(k, "["+strconv.FormatInt(int64(k), 10)+"]"), c.Args()[0].ID(), true
				}
			}
		}
		return probe{}, 0, false
	}
	ast.PreOrderVisit(a.Expr(), ast.NewExprVisitor(func(e ast.Expr) {
		if p, sub, ok := pathOf(e); ok {
			all = append(all, found{p: p, id: e.ID(), sub: sub})
		}
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
