package conditions

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/cel-go/common/types"
)

// checkTape asserts that the tape accepts doc exactly when json.Unmarshal
// into an any does, and that the lazy value of an accepted one writes the
// same canonical JSON (or fails the same way) as the decoded value, with
// the same size and equality.
func checkTape(t *testing.T, doc []byte) {
	t.Helper()
	var v any
	wantErr := json.Unmarshal(doc, &v)
	var tp tape
	err := tp.reset(doc)
	if (err == nil) != (wantErr == nil) {
		t.Fatalf("%q: tape says %v, encoding/json %v", doc, err, wantErr)
	}
	if err != nil {
		return
	}
	want := types.DefaultTypeAdapter.NativeToValue(v)
	got := jsonValue(&tp, 0)
	wj, werr := canonicalJSON(want)
	gj, gerr := canonicalJSON(got)
	if !bytes.Equal(wj, gj) || (werr == nil) != (gerr == nil) {
		t.Fatalf("%q: lazy %s (%v), decoded %s (%v)", doc, gj, gerr, wj, werr)
	}
	if got.Equal(want) != types.True || want.Equal(got) != types.True {
		t.Fatalf("%q: lazy and decoded values differ", doc)
	}
	if s, ok := want.(interface{ Size() types.Int }); ok && got.(interface{ Size() types.Int }).Size() != s.Size() {
		t.Fatalf("%q: sizes differ", doc)
	}
}

// TestTape compares the tape with encoding/json on the edges of the
// grammar: nesting, number range, escapes, invalid UTF-8, duplicate keys.
func TestTape(t *testing.T) {
	for _, doc := range []string{``, ` `, `null`, `true`, `false`, `nul`, `0`, `-0`, `01`, `1.`, `.5`, `1e`, `1e+`, `1E-2`,
		`-`, `1e400`, `-1e400`, `1e-400`, strings.Repeat("9", 310), strings.Repeat("9", 400) + ".5", `123456789012345678901234567890`,
		`9007199254740993`, `"a\u00e9\ud800b"`, `"\x"`, `"\u12"`, "\"a\x01\"", "\"\xff\xfe\"", `"é"`, `{"a":1,"a":2}`,
		`{"a":1,"b":{"c":[1,2,{"d":null}]}}`, `{"a" 1}`, `{"a":1,}`, `[1,]`, `[1 2]`, `{,}`, `[]`, `{}`, ` [ ] `, `[1] x`,
		"\ufeff{}", `{"k\u0041":1,"kA":2}`, "{\"\xff\":1,\"\xfe\":2}", `[` + strings.Repeat(`{"x":1},`, 40) + `1]`,
		`{` + strings.Repeat(`"k":1,"j":2,`, 20) + `"k":3}`} {
		checkTape(t, []byte(doc))
	}
	for _, depth := range []int{999, 1000, 1001, maxNesting, maxNesting + 1} {
		checkTape(t, []byte(strings.Repeat("[", depth)+strings.Repeat("]", depth)))
	}
	for _, depth := range []int{999, 1000, 1001} { // encoding/json takes seconds on 10,000 objects
		checkTape(t, []byte(strings.Repeat(`{"a":`, depth)+"1"+strings.Repeat("}", depth)))
	}
	for _, depth := range []int{maxNesting, maxNesting + 1} {
		var tp tape
		doc := []byte(strings.Repeat(`{"a":`, depth) + "1" + strings.Repeat("}", depth))
		if err := tp.reset(doc); (err == nil) != (depth == maxNesting) {
			t.Fatalf("%d nested objects: %v", depth, err)
		}
	}
}

// TestTapeLookups reads a large object's keys (indexed after the first
// lookup) and a list by index, the last duplicate key winning.
func TestTapeLookups(t *testing.T) {
	var b strings.Builder
	b.WriteString(`{`)
	for i := range 100 {
		b.WriteString(`"k` + strings.Repeat("x", i%7) + `":` + strings.Repeat("1", 1+i%3) + `,`)
	}
	b.WriteString(`"z":[10,20,30]}`)
	checkTape(t, []byte(b.String()))
	var tp tape
	if err := tp.reset([]byte(b.String())); err != nil {
		t.Fatal(err)
	}
	o := jsonValue(&tp, 0).(*jsonObject)
	for range 2 {
		if v, ok := o.Find(types.String("kxx")); !ok || v != types.Double(1) {
			t.Fatalf("kxx = %v, %v", v, ok)
		}
		if o.Contains(types.String("nope")) != types.False {
			t.Fatal("nope found")
		}
		if z := o.Get(types.String("z")).(*jsonList); z.Get(types.Int(2)) != types.Double(30) || !types.IsError(z.Get(types.Int(3))) {
			t.Fatal("z[2] or z[3]")
		}
	}
}

// FuzzTape compares the tape with encoding/json on any document.
func FuzzTape(f *testing.F) {
	for _, s := range []string{`{"status":"ok","items":[{"id":1,"tags":["a"]}]}`, `[1e5,-0.5,"\u00e9",null,true,false]`,
		`{"a":1,"a":{"b":[]}}`, `1e400`, "\"\xff\"", `{"a" :[ 1 , 2 ] }`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, doc []byte) {
		checkTape(t, doc)
	})
}

// TestTapeWordAtATime checks the scan's eight-byte steps (strings and
// runs of spaces) with each byte a string must not hold as it is, and
// each kind of space, at every position of a long string or run.
func TestTapeWordAtATime(t *testing.T) {
	for _, c := range []string{`"`, `\`, `\n`, `\u0041`, "\x00", "\x1f", "\x7f", "\x80", "é", "\xff", " ", "~"} {
		for pos := range 20 {
			s := strings.Repeat("a", pos) + c + strings.Repeat("b", 20-pos)
			checkTape(t, []byte(`{"k`+s+`":"`+s+`"}`))
		}
	}
	for _, c := range []string{" ", "\t", "\n", "\r", "x", "\x00", "\xa0"} {
		for pos := range 20 {
			sp := strings.Repeat(" ", pos) + c + strings.Repeat(" ", 20-pos)
			checkTape(t, []byte(sp+`[`+sp+`1`+sp+`,`+sp+`"a"`+sp+`]`+sp))
		}
	}
}
