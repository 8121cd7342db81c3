package dashboard

import "testing"

func TestHumanBytes(t *testing.T) {
	for n, want := range map[int64]string{
		10 << 20: "10 MiB", 1 << 30: "1 GiB", 512 << 10: "512 KiB", 1000: "1000 bytes", 0: "0 bytes",
		1500000: "1.4 MiB (1500000 bytes)",
	} {
		if got := humanBytes(n); got != want {
			t.Errorf("humanBytes(%d) = %q, want %q", n, got, want)
		}
	}
}
