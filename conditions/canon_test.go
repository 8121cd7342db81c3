package conditions

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/google/cel-go/common/types"
)

// FuzzCanonical compares canonicalJSON's fast writer with its
// encoding/json path on the value of any JSON document and on a few CEL
// values that JSON does not make.
func FuzzCanonical(f *testing.F) {
	for _, s := range []string{`[1,2.5,-0,1e21,1e-7,123456789.125,null,true,"a b",{"b":1,"a":[{}]}]`, `{"x<":"\u00e9","y":"\n"}`,
		`[1e-6,1e20,-3.4e-300,5e-324]`, `"\u2028"`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, doc []byte) {
		var v any
		if json.Unmarshal(doc, &v) != nil {
			return
		}
		for _, val := range []any{v, []any{v, int64(-7), uint64(9)}, map[string]any{"k": v}} {
			cv := types.DefaultTypeAdapter.NativeToValue(val)
			got, gerr := canonicalJSON(cv)
			want, werr := canonicalSlow(cv)
			if !bytes.Equal(got, want) || (gerr == nil) != (werr == nil) {
				t.Fatalf("%q: fast %s (%v), encoding/json %s (%v)", doc, got, gerr, want, werr)
			}
		}
	})
}
