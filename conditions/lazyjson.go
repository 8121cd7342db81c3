package conditions

import (
	"encoding/json"
	"errors"
	"reflect"
	"strconv"

	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
	"github.com/google/cel-go/common/types/traits"
)

// The CEL values of body.json (and stdout.json), read from a tape: an
// object or an array is a view of its node, decoded member by member as
// an expression reads it; a scalar is decoded when it is reached. Each has
// the value json.Unmarshal into an any and CEL's adapter give (numbers
// doubles, duplicate keys the last one's value): the operations that are
// not on the path of field selection, indexing and iteration (equality,
// conversion, size of an object, concatenation, membership) run on that
// value, made once per view (mat).

// bigObject is the number of members above which an object's keys are
// indexed in a map on first lookup instead of scanned.
const bigObject = 16

// jsonValue is the CEL value of the node i of t.
func jsonValue(t *tape, i uint32) ref.Val {
	n := &t.nodes[i]
	switch n.kind {
	case kindObject:
		return &jsonObject{t: t, i: i}
	case kindArray:
		return &jsonList{t: t, i: i}
	case kindString:
		return types.String(t.str(i))
	case kindNumber:
		return types.Double(t.number(i))
	case kindTrue:
		return types.True
	case kindFalse:
		return types.False
	}
	return types.NullValue
}

// str decodes the string node i.
func (t *tape) str(i uint32) string {
	n := &t.nodes[i]
	if n.plain {
		return string(t.b[n.start+1 : n.end-1])
	}
	var s string
	_ = json.Unmarshal(t.b[n.start:n.end], &s) // checked: cannot fail
	return s
}

// number decodes the number node i as json.Unmarshal does.
func (t *tape) number(i uint32) float64 {
	n := &t.nodes[i]
	raw := t.b[n.start:n.end]
	if len(raw) <= 15 {
		neg := raw[0] == '-'
		if neg {
			raw = raw[1:]
		}
		var v uint64
		for _, c := range raw {
			if c < '0' || c > '9' {
				goto slow
			}
			v = v*10 + uint64(c-'0')
		}
		f := float64(v) // exact: under 2^53
		if neg {
			f = -f
		}
		return f
	}
slow:
	f, _ := strconv.ParseFloat(string(t.b[n.start:n.end]), 64) // checked: cannot fail
	return f
}

// keyIs reports whether the key node i is key.
func (t *tape) keyIs(i uint32, key string) bool {
	n := &t.nodes[i]
	if n.plain {
		return string(t.b[n.start+1:n.end-1]) == key
	}
	return t.str(i) == key
}

// member returns the value node of key in the object node o: the last
// one, as json.Unmarshal keeps.
func (t *tape) member(o uint32, key string) (uint32, bool) {
	end := t.nodes[o].next
	if idx, ok := t.big[o]; ok {
		v, found := idx[key]
		return v, found
	}
	var got uint32
	found, count := false, 0
	for k := o + 1; k < end; k = t.nodes[k+1].next {
		count++
		if t.keyIs(k, key) {
			got, found = k+1, true
		}
	}
	if count > bigObject {
		idx := make(map[string]uint32, count)
		for k := o + 1; k < end; k = t.nodes[k+1].next {
			idx[t.str(k)] = k + 1
		}
		if t.big == nil {
			t.big = map[uint32]map[string]uint32{}
		}
		t.big[o] = idx
	}
	return got, found
}

// materialize is node i as encoding/json and CEL's adapter make it.
func (t *tape) materialize(i uint32) ref.Val {
	n := &t.nodes[i]
	var v any
	if err := json.Unmarshal(t.b[n.start:n.end], &v); err != nil {
		return types.WrapErr(err)
	}
	return types.DefaultTypeAdapter.NativeToValue(v)
}

// jsonObject is a JSON object (a traits.Mapper).
type jsonObject struct {
	t   *tape
	i   uint32
	mat ref.Val
}

var _ traits.Mapper = (*jsonObject)(nil)

// value is the object as a CEL map, made on first use.
func (o *jsonObject) value() ref.Val {
	if o.mat == nil {
		o.mat = o.t.materialize(o.i)
	}
	return o.mat
}

// mapper is value as a traits.Mapper.
func (o *jsonObject) mapper() traits.Mapper { return o.value().(traits.Mapper) }

// Find returns the value of key, read from the tape for a string key.
func (o *jsonObject) Find(key ref.Val) (ref.Val, bool) {
	if s, ok := key.(types.String); ok {
		v, found := o.t.member(o.i, string(s))
		if !found {
			return nil, false
		}
		return jsonValue(o.t, v), true
	}
	return o.mapper().Find(key)
}

// Get returns the value of key, or the error of a missing one.
func (o *jsonObject) Get(key ref.Val) ref.Val {
	if v, found := o.Find(key); found {
		return v
	}
	return o.mapper().Get(key)
}

// Contains reports whether the object has key.
func (o *jsonObject) Contains(key ref.Val) ref.Val {
	if s, ok := key.(types.String); ok {
		_, found := o.t.member(o.i, string(s))
		return types.Bool(found)
	}
	return o.mapper().Contains(key)
}

// Iterator iterates over the keys.
func (o *jsonObject) Iterator() traits.Iterator { return o.mapper().Iterator() }

// Size is the number of distinct keys.
func (o *jsonObject) Size() ref.Val { return o.mapper().Size() }

// ConvertToNative converts as a CEL map does.
func (o *jsonObject) ConvertToNative(t reflect.Type) (any, error) {
	return o.value().ConvertToNative(t)
}

// ConvertToType converts as a CEL map does.
func (o *jsonObject) ConvertToType(t ref.Type) ref.Val {
	if t == types.MapType {
		return o
	}
	return o.value().ConvertToType(t)
}

// Equal compares as a CEL map does.
func (o *jsonObject) Equal(other ref.Val) ref.Val { return o.value().Equal(other) }

// Type is map.
func (o *jsonObject) Type() ref.Type { return types.MapType }

// Value is the map[string]any of json.Unmarshal.
func (o *jsonObject) Value() any { return o.value().Value() }

// jsonList is a JSON array (a traits.Lister).
type jsonList struct {
	t     *tape
	i     uint32
	elems []uint32 // the elements' nodes, made on first use
	mat   ref.Val
}

var _ traits.Lister = (*jsonList)(nil)

// index returns the elements' nodes.
func (l *jsonList) index() []uint32 {
	if l.elems == nil {
		l.elems = make([]uint32, 0, 8)
		for e := l.i + 1; e < l.t.nodes[l.i].next; e = l.t.nodes[e].next {
			l.elems = append(l.elems, e)
		}
	}
	return l.elems
}

// value is the array as a CEL list, made on first use.
func (l *jsonList) value() ref.Val {
	if l.mat == nil {
		l.mat = l.t.materialize(l.i)
	}
	return l.mat
}

// lister is value as a traits.Lister.
func (l *jsonList) lister() traits.Lister { return l.value().(traits.Lister) }

// Get returns the element at an int index, read from the tape.
func (l *jsonList) Get(idx ref.Val) ref.Val {
	if n, ok := idx.(types.Int); ok {
		if es := l.index(); n >= 0 && int64(n) < int64(len(es)) {
			return jsonValue(l.t, es[n])
		}
	}
	return l.lister().Get(idx)
}

// Size is the number of elements.
func (l *jsonList) Size() ref.Val { return types.Int(len(l.index())) }

// Iterator iterates over the elements, read from the tape.
func (l *jsonList) Iterator() traits.Iterator { return &jsonIter{l: l, es: l.index()} }

// Add concatenates as a CEL list does.
func (l *jsonList) Add(other ref.Val) ref.Val { return l.lister().Add(other) }

// Contains tests membership as a CEL list does.
func (l *jsonList) Contains(v ref.Val) ref.Val { return l.lister().Contains(v) }

// ConvertToNative converts as a CEL list does.
func (l *jsonList) ConvertToNative(t reflect.Type) (any, error) { return l.value().ConvertToNative(t) }

// ConvertToType converts as a CEL list does.
func (l *jsonList) ConvertToType(t ref.Type) ref.Val {
	if t == types.ListType {
		return l
	}
	return l.value().ConvertToType(t)
}

// Equal compares as a CEL list does.
func (l *jsonList) Equal(other ref.Val) ref.Val { return l.value().Equal(other) }

// Type is list.
func (l *jsonList) Type() ref.Type { return types.ListType }

// Value is the []any of json.Unmarshal.
func (l *jsonList) Value() any { return l.value().Value() }

// jsonIter iterates over a jsonList's elements.
type jsonIter struct {
	l   *jsonList
	es  []uint32
	pos int
}

var _ traits.Iterator = (*jsonIter)(nil)

// errIterator is the error of an operation an iterator does not have.
var errIterator = errors.New("an iterator has no such operation")

// HasNext reports whether an element is left.
func (it *jsonIter) HasNext() ref.Val { return types.Bool(it.pos < len(it.es)) }

// Next returns the next element.
func (it *jsonIter) Next() ref.Val {
	if it.pos >= len(it.es) {
		return nil
	}
	it.pos++
	return jsonValue(it.l.t, it.es[it.pos-1])
}

// ConvertToNative is not supported.
func (it *jsonIter) ConvertToNative(reflect.Type) (any, error) { return nil, errIterator }

// ConvertToType is not supported.
func (it *jsonIter) ConvertToType(ref.Type) ref.Val { return types.WrapErr(errIterator) }

// Equal is not supported.
func (it *jsonIter) Equal(ref.Val) ref.Val { return types.WrapErr(errIterator) }

// Type is CEL's iterator type.
func (it *jsonIter) Type() ref.Type { return types.IteratorType }

// Value is nil.
func (it *jsonIter) Value() any { return nil }
