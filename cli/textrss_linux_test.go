package cli

import (
	"os"
	"strconv"
	"strings"
	"testing"
)

func TestReadOnlyMapping(t *testing.T) {
	const exe = "/usr/bin/pacer d"
	cases := []struct {
		line   string
		ok     bool
		lo, hi uintptr
	}{
		{"00403000-00fd4000 r-xp 00003000 fe:00 10027997 /usr/bin/pacer d", true, 0x403000, 0xfd4000},
		{"00fd4000-01d5e000 r--p 00bd4000 fe:00 10027997 /usr/bin/pacer d", true, 0xfd4000, 0x1d5e000},
		{"01d61000-01e0d000 rw-p 01961000 fe:00 10027997 /usr/bin/pacer d", false, 0, 0},
		{"7f4ad30a0000-7f4ad31f6000 r-xp 00026000 fe:00 326269 /usr/lib/libc.so.6", false, 0, 0},
		{"bfa99400000-bfa9ac00000 rw-p 00000000 00:00 0", false, 0, 0},
		{"zz-01 r-xp 0 fe:00 1 /usr/bin/pacer d", false, 0, 0},
	}
	for _, c := range cases {
		lo, hi, ok := readOnlyMapping(c.line, exe)
		if ok != c.ok || lo != c.lo || hi != c.hi {
			t.Errorf("readOnlyMapping(%q) = %#x, %#x, %v; want %#x, %#x, %v", c.line, lo, hi, ok, c.lo, c.hi, c.ok)
		}
	}
}

// TestTrimTextRSS: after the trim the process runs on (its code and
// read-only data fault back in) and its relocated data is intact: a
// formatted number and a parsed one still agree.
func TestTrimTextRSS(t *testing.T) {
	trimTextRSS()
	for i := range 1000 {
		s := strconv.Itoa(i * 7919)
		if n, err := strconv.Atoi(s); err != nil || n != i*7919 {
			t.Fatalf("round trip of %d: %d, %v", i*7919, n, err)
		}
	}
	raw, err := os.ReadFile("/proc/self/status")
	if err != nil || !strings.Contains(string(raw), "VmRSS:") {
		t.Fatalf("/proc/self/status after the trim: %v", err)
	}
}
