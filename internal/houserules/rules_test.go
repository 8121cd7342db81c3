package houserules

import (
	"slices"
	"strings"
	"testing"
)

// TestCheckerFails: on testdata/house each rule fails once, in package
// big (a 501-line file, 61-line functions, a type of 21 fields and 3
// methods, one of 31 methods, two package-level vars), and nothing of
// package ok fails, which stands at every limit and holds what the rules
// allow (sentinel errors, go:embed vars, a `var _ I` check, a test file,
// a nested testdata folder).
func TestCheckerFails(t *testing.T) {
	v, err := Check("testdata/house", House())
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, x := range v {
		got = append(got, x.Key())
	}
	want := []string{
		"fields big.Wide",
		"file big/long.go",
		"func big.Wide.longMethod",
		"func big.long",
		"methods big.Many",
		"var big.ErrEnd",
		"var big.counter",
		"var big.errs",
	}
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Errorf("violations:\n  %s\nwant:\n  %s", strings.Join(got, "\n  "), strings.Join(want, "\n  "))
	}
	for _, x := range v {
		if !strings.HasPrefix(x.Where, "big/") {
			t.Errorf("%s: not in big/", x)
		}
	}
}

// TestAllowList: a violation the list does not name fails, and so does an
// entry that names no violation; a listed violation passes.
func TestAllowList(t *testing.T) {
	v := []Violation{
		{Where: "a/a.go:3", What: "func f is 61 lines (limit 60)", Rule: RuleFunc, Name: "a.f"},
		{Where: "a/a.go:9", What: "package-level var x", Rule: RuleVar, Name: "a.x"},
	}
	got := AgainstAllowList(v, map[string]string{"func a.f": "issue 21", "file a/gone.go": "issue 21"})
	all := strings.Join(got, "\n")
	if len(got) != 2 || !strings.Contains(all, `"file a/gone.go"`) || !strings.Contains(all, "[var a.x]") {
		t.Errorf("AgainstAllowList = %q, want the stale entry file a/gone.go and the unlisted var a.x", got)
	}
	if got := AgainstAllowList(v, map[string]string{"func a.f": "", "var a.x": ""}); len(got) != 0 {
		t.Errorf("everything listed: %q, want nothing", got)
	}
}
