package conditions

import (
	"math"
	"slices"
	"strconv"

	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
	"github.com/google/cel-go/common/types/traits"
)

// appendCanonical appends the canonical JSON of v to b for the common
// values of a select (numbers, bools, null, ASCII strings without
// escapes, and lists and string-keyed maps of them), as canonicalJSON's
// encoding/json path writes them but without its reflection and its
// intermediate Go values; ok is false for any other value, which that
// path then writes (FuzzCanonical compares the two).
func appendCanonical(b []byte, v ref.Val, depth int) (_ []byte, ok bool) {
	if depth > maxDepth {
		return b, false
	}
	switch t := v.(type) {
	case types.Null:
		return append(b, "null"...), true
	case types.Bool:
		return strconv.AppendBool(b, bool(t)), true
	case types.Int:
		return strconv.AppendInt(b, int64(t), 10), true
	case types.Uint:
		return strconv.AppendUint(b, uint64(t), 10), true
	case types.Double:
		return appendFloat(b, float64(t))
	case types.String:
		return appendSimple(b, string(t))
	case traits.Mapper:
		return appendMap(b, t, depth)
	case traits.Lister:
		b = append(b, '[')
		n := int(t.Size().(types.Int))
		for i := range n {
			if i > 0 {
				b = append(b, ',')
			}
			if b, ok = appendCanonical(b, t.Get(types.Int(i)), depth+1); !ok {
				return b, false
			}
		}
		return append(b, ']'), true
	}
	return b, false
}

// appendFloat writes f as encoding/json does (ES6 number to string).
func appendFloat(b []byte, f float64) ([]byte, bool) {
	if math.IsInf(f, 0) || math.IsNaN(f) {
		return b, false
	}
	format := byte('f')
	if abs := math.Abs(f); abs != 0 && (abs < 1e-6 || abs >= 1e21) {
		format = 'e'
	}
	b = strconv.AppendFloat(b, f, format, -1, 64)
	if n := len(b); format == 'e' && n >= 4 && b[n-4] == 'e' && b[n-3] == '-' && b[n-2] == '0' {
		b[n-2] = b[n-1]
		b = b[:n-1]
	}
	return b, true
}

// appendSimple writes s (a string's bytes) quoted when it needs no escape.
func appendSimple[T string | []byte](b []byte, s T) ([]byte, bool) {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x7f || c == '"' || c == '\\' {
			return b, false
		}
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"'), true
}

// appendMap writes a map of string keys, its keys sorted.
func appendMap(b []byte, m traits.Mapper, depth int) (_ []byte, ok bool) {
	var keys []string
	for it := m.Iterator(); it.HasNext() == types.True; {
		k, isStr := it.Next().(types.String)
		if !isStr {
			return b, false
		}
		keys = append(keys, string(k))
	}
	slices.Sort(keys)
	b = append(b, '{')
	for i, k := range keys {
		if i > 0 {
			b = append(b, ',')
		}
		if b, ok = appendSimple(b, k); !ok {
			return b, false
		}
		b = append(b, ':')
		if b, ok = appendCanonical(b, m.Get(types.String(k)), depth+1); !ok {
			return b, false
		}
	}
	return append(b, '}'), true
}
