package conditions

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
	"github.com/google/cel-go/common/types/traits"
)

// maxDepth bounds the nesting of a value made JSON.
const maxDepth = 1000

// canonicalJSON writes v as JSON with the keys of every object sorted (the
// bytes that select's digest is taken of, rule 9.2, and that delivery
// sends): null, bools, numbers, strings, lists and maps; bytes in base64,
// durations as "1.5s" and timestamps in RFC 3339, as CEL's JSON mapping
// writes them.
func canonicalJSON(v ref.Val) ([]byte, error) {
	if b, ok := appendCanonical(nil, v, 0); ok {
		return b, nil
	}
	return canonicalSlow(v)
}

// canonicalSlow is canonicalJSON through Go values and encoding/json.
func canonicalSlow(v ref.Val) ([]byte, error) {
	n, err := native(v, 0)
	if err != nil {
		return nil, err
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(n); err != nil {
		return nil, fmt.Errorf("cannot write the value as JSON: %w", err)
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}

// errDepth is the error of a value nested too deeply.
var errDepth = errors.New("the value is nested too deeply")

// native converts v to what encoding/json writes as its JSON.
func native(v ref.Val, depth int) (any, error) {
	if depth > maxDepth {
		return nil, errDepth
	}
	switch t := v.(type) {
	case types.Null:
		return nil, nil
	case types.Bool:
		return bool(t), nil
	case types.Int:
		return int64(t), nil
	case types.Uint:
		return uint64(t), nil
	case types.Double:
		if math.IsNaN(float64(t)) || math.IsInf(float64(t), 0) {
			return nil, fmt.Errorf("%v has no JSON form", float64(t))
		}
		return float64(t), nil
	case types.String:
		return string(t), nil
	case types.Bytes:
		return []byte(t), nil
	case types.Duration:
		return t.Duration.String(), nil
	case types.Timestamp:
		return t.Time.UTC().Format(time.RFC3339Nano), nil
	case traits.Mapper:
		return nativeMap(t, depth)
	case traits.Lister:
		out := make([]any, 0, int(t.Size().(types.Int)))
		for it := t.Iterator(); it.HasNext() == types.True; {
			e, err := native(it.Next(), depth+1)
			if err != nil {
				return nil, err
			}
			out = append(out, e)
		}
		return out, nil
	}
	if types.IsError(v) {
		return nil, fmt.Errorf("%v", v)
	}
	return nil, fmt.Errorf("a value of type %s has no JSON form", v.Type().TypeName())
}

// nativeMap converts a map; its keys are strings (others written as
// their JSON).
func nativeMap(m traits.Mapper, depth int) (map[string]any, error) {
	out := make(map[string]any, int(m.Size().(types.Int)))
	for it := m.Iterator(); it.HasNext() == types.True; {
		k := it.Next()
		key, ok := k.(types.String)
		if !ok {
			kb, err := canonicalJSON(k)
			if err != nil {
				return nil, err
			}
			key = types.String(kb)
		}
		e, err := native(m.Get(k), depth+1)
		if err != nil {
			return nil, err
		}
		out[string(key)] = e
	}
	return out, nil
}
