// Package big breaks each house rule once (TestCheckerFails).
package big

import (
	"errors"
	"io"
)

// counter is package-level state.
var counter int

// errs is not a sentinel error but a slice of them.
var errs = []error{errors.New("a")}

// ErrEnd names a value of another package that is not one of its Err
// sentinels: it counts as state.
var ErrEnd = io.EOF

// long is 61 lines.
func long() int {
	x := 0
	x++
	x++
	x++
	x++
	x++
	x++
	x++
	x++
	x++
	x++
	x++
	x++
	x++
	x++
	x++
	x++
	x++
	x++
	x++
	x++
	x++
	x++
	x++
	x++
	x++
	x++
	x++
	x++
	x++
	x++
	x++
	x++
	x++
	x++
	x++
	x++
	x++
	x++
	x++
	x++
	x++
	x++
	x++
	x++
	x++
	x++
	x++
	x++
	x++
	x++
	x++
	x++
	x++
	x++
	x++
	x++
	x++
	return x
}

// Wide has 21 fields and 3 methods.
type Wide struct {
	f0  int
	f1  int
	f2  int
	f3  int
	f4  int
	f5  int
	f6  int
	f7  int
	f8  int
	f9  int
	f10 int
	f11 int
	f12 int
	f13 int
	f14 int
	f15 int
	f16 int
	f17 int
	f18 int
	f19 int
	f20 int
}

func (t *Wide) M0() {}
func (t *Wide) M1() {}
func (w *Wide) longMethod() int {
	x := 0
	x++
	x++
	x++
	x++
	x++
	x++
	x++
	x++
	x++
	x++
	x++
	x++
	x++
	x++
	x++
	x++
	x++
	x++
	x++
	x++
	x++
	x++
	x++
	x++
	x++
	x++
	x++
	x++
	x++
	x++
	x++
	x++
	x++
	x++
	x++
	x++
	x++
	x++
	x++
	x++
	x++
	x++
	x++
	x++
	x++
	x++
	x++
	x++
	x++
	x++
	x++
	x++
	x++
	x++
	x++
	x++
	x++
	return x
}

// Many has 31 methods.
type Many struct{}

func (t *Many) M0()  {}
func (t *Many) M1()  {}
func (t *Many) M2()  {}
func (t *Many) M3()  {}
func (t *Many) M4()  {}
func (t *Many) M5()  {}
func (t *Many) M6()  {}
func (t *Many) M7()  {}
func (t *Many) M8()  {}
func (t *Many) M9()  {}
func (t *Many) M10() {}
func (t *Many) M11() {}
func (t *Many) M12() {}
func (t *Many) M13() {}
func (t *Many) M14() {}
func (t *Many) M15() {}
func (t *Many) M16() {}
func (t *Many) M17() {}
func (t *Many) M18() {}
func (t *Many) M19() {}
func (t *Many) M20() {}
func (t *Many) M21() {}
func (t *Many) M22() {}
func (t *Many) M23() {}
func (t *Many) M24() {}
func (t *Many) M25() {}
func (t *Many) M26() {}
func (t *Many) M27() {}
func (t *Many) M28() {}
func (t *Many) M29() {}
func (t *Many) M30() {}
