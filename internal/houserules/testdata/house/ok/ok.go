// Package ok stays within every house rule, at its limits (TestCheckerFails).
package ok

import (
	"embed"
	"errors"
	"fmt"
	"io"
)

// ErrA and friends are sentinel errors.
var ErrA = errors.New("a")

var (
	ErrB       = fmt.Errorf("b: %w", ErrA)
	errC, errD = errors.New("c"), errors.New("d")
	ErrEOF     = io.ErrUnexpectedEOF // another package's sentinel, given again
)

//go:embed ok.go
var files embed.FS

var (
	//go:embed ok.go
	source string
)

var _ io.Writer = (*Narrow)(nil)

// atLimit is 60 lines.
func atLimit() int {
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
	return x
}

// Narrow has 20 fields and 3 methods.
type Narrow struct {
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
}

func (t *Narrow) M0()                         {}
func (t *Narrow) M1()                         {}
func (n *Narrow) Write(p []byte) (int, error) { return len(p), nil }

// Plain has 21 fields and 2 methods: data, not behaviour.
type Plain struct {
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

func (t *Plain) M0() {}
func (t *Plain) M1() {}

// Thirty has 30 methods.
type Thirty struct{}

func (t *Thirty) M0()  {}
func (t *Thirty) M1()  {}
func (t *Thirty) M2()  {}
func (t *Thirty) M3()  {}
func (t *Thirty) M4()  {}
func (t *Thirty) M5()  {}
func (t *Thirty) M6()  {}
func (t *Thirty) M7()  {}
func (t *Thirty) M8()  {}
func (t *Thirty) M9()  {}
func (t *Thirty) M10() {}
func (t *Thirty) M11() {}
func (t *Thirty) M12() {}
func (t *Thirty) M13() {}
func (t *Thirty) M14() {}
func (t *Thirty) M15() {}
func (t *Thirty) M16() {}
func (t *Thirty) M17() {}
func (t *Thirty) M18() {}
func (t *Thirty) M19() {}
func (t *Thirty) M20() {}
func (t *Thirty) M21() {}
func (t *Thirty) M22() {}
func (t *Thirty) M23() {}
func (t *Thirty) M24() {}
func (t *Thirty) M25() {}
func (t *Thirty) M26() {}
func (t *Thirty) M27() {}
func (t *Thirty) M28() {}
func (t *Thirty) M29() {}
