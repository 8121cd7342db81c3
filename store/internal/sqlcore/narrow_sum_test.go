package sqlcore

import (
	"reflect"
	"testing"
	"time"

	"github.com/pacer-dev/pacer/domain"
)

// The sum of a state row changes with every field of domain.SourceState
// that a narrow upsert does not write (hotColumns), so that a field added
// to the state, and to stateArgs, cannot be left out of it: the row would
// then never be written whole when only that field changed. Fields the
// row does not take from the state (UpdatedAt: the commit's time) and the
// hot ones are the only exceptions.
func TestSumCoversState(t *testing.T) {
	notSummed := map[string]bool{
		"UpdatedAt": true,                                                                                   // the row's updated_at is the commit's time
		"NextRunAt": true, "LastRunAt": true, "LastSuccessAt": true, "PollsTotal": true, "HistorySeq": true, // hotColumns
	}
	now := time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC)
	base := domain.SourceState{Name: "a", Fingerprint: "f", LastError: "e", BreakerUntil: &now, RemindAt: &now}
	k := newKnownRows()
	sumOf := func(st domain.SourceState) rowSum { return k.sum(&stateRow{key: 1, updated: 2, st: &st}) }
	want := sumOf(base)
	if again := sumOf(base); again != want {
		t.Fatalf("the same state summed twice: %v and %v", want, again)
	}
	typ := reflect.TypeOf(base)
	for i := range typ.NumField() {
		f := typ.Field(i)
		changed := base
		v := reflect.ValueOf(&changed).Elem().Field(i)
		switch f.Type.Kind() {
		case reflect.String:
			v.SetString(v.String() + "x")
		case reflect.Int, reflect.Int64:
			v.SetInt(v.Int() + 1)
		case reflect.Bool:
			v.SetBool(!v.Bool())
		case reflect.Pointer:
			if f.Type != reflect.TypeOf(&now) {
				t.Fatalf("field %s of type %s: teach this test (and sum) its type", f.Name, f.Type)
			}
			later := now.Add(time.Second)
			if v.IsNil() {
				v.Set(reflect.ValueOf(&later))
			} else {
				v.Set(reflect.Zero(f.Type)) // nil, not the time
			}
		case reflect.Struct:
			if f.Type != reflect.TypeOf(now) {
				t.Fatalf("field %s of type %s: teach this test (and sum) its type", f.Name, f.Type)
			}
			v.Set(reflect.ValueOf(now.Add(time.Hour)))
		default:
			t.Fatalf("field %s of kind %s: teach this test (and sum) its kind", f.Name, f.Type.Kind())
		}
		got := sumOf(changed)
		switch {
		case notSummed[f.Name] && got != want:
			t.Errorf("%s (not a summed column) changed the sum", f.Name)
		case !notSummed[f.Name] && got == want:
			t.Errorf("%s changed, the sum did not: a state differing only there would be written narrow, the change lost", f.Name)
		}
	}
}

// Summing a row allocates nothing (issue 25: the boxing of stateArgs had
// added ~20 allocations a row).
func TestSumAllocatesNothing(t *testing.T) {
	now := time.Now()
	st := domain.SourceState{Name: "a", Fingerprint: "f", LastError: "e", BreakerUntil: &now}
	k := newKnownRows()
	row := &stateRow{key: 1, st: &st}
	k.sum(row)
	if n := testing.AllocsPerRun(100, func() { k.sum(row) }); n != 0 {
		t.Errorf("sum allocates %.0f times a row", n)
	}
}
