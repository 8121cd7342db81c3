package conditions

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
)

// bench10K is a 10 KiB JSON document of 100 items.
func bench10K() string {
	var items []string
	for i := range 100 {
		items = append(items, fmt.Sprintf(`{"id":%d,"name":"item %d","price":%d.5,"tags":["a","b"]}`, i, i, i))
	}
	body := `{"status":"ok","generated_at":"2026-12-07T12:00:00Z","items":[` + strings.Join(items, ",") + `]}`
	return body + strings.Repeat(" ", max(0, 10<<10-len(body)))
}

// BenchmarkEvaluate is the evaluation of three conditions and a select on
// a 10 KiB JSON body, and its parts.
//
//	go test ./conditions -run '^$' -bench BenchmarkEvaluate -benchtime=2000x
func BenchmarkEvaluate(b *testing.B) {
	body := []byte(bench10K())
	b.Run("parse-json", func(b *testing.B) {
		b.ReportAllocs()
		for range b.N {
			var v any
			if err := json.Unmarshal(body, &v); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("tape", func(b *testing.B) {
		b.ReportAllocs()
		b.SetBytes(int64(len(body)))
		var t tape
		for range b.N {
			if err := t.reset(body); err != nil {
				b.Fatal(err)
			}
		}
	})
	for _, c := range []struct {
		name  string
		conds []string
		sel   string
	}{
		{"status", []string{`status == 200`}, ""},
		{"json-status", []string{`body.json.status == "ok"`}, ""},
		{"select", nil, `body.json.items.map(i, i.id)`},
		{"all", []string{`status == 200`, `duration < duration("2s")`, `body.json.status == "ok"`}, `body.json.items.map(i, i.id)`},
	} {
		b.Run(c.name, func(b *testing.B) {
			s, probs := NewCompiler(nil).Compile(HTTP, c.conds, c.sel)
			if len(probs) > 0 {
				b.Fatal(probs)
			}
			in := httpInput(string(body))
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				if out := s.Evaluate(b.Context(), in); out.Err != nil {
					b.Fatal(out.Err)
				}
			}
		})
	}
}
