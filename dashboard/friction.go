package dashboard

import (
	"fmt"
	"strconv"
)

// triggerOff is why a source in state cannot be triggered (the trigger
// button's title, the button disabled), or "" when it can: a paused source
// is resumed first, one in error reset first, and a blocked one waits for
// its host or the source it depends on.
func triggerOff(state string) string {
	switch state {
	case "paused":
		return "paused: resume it to poll it"
	case "error":
		return "in error: reset it to poll it"
	case "blocked":
		return "blocked: its host or a source it depends on must recover first"
	}
	return ""
}

// humanBytes shows a size as a config writes it: "10 MiB", "512 KiB",
// "1 GiB" when it is a whole number of the unit, else the nearest tenth
// with the bytes ("1.4 MiB (1500000 bytes)"); under 1 KiB, in bytes.
func humanBytes(n int64) string {
	units := []struct {
		name string
		size int64
	}{{"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}}
	for _, u := range units {
		if n < u.size {
			continue
		}
		if n%u.size == 0 {
			return strconv.FormatInt(n/u.size, 10) + " " + u.name
		}
		return fmt.Sprintf("%.1f %s (%d bytes)", float64(n)/float64(u.size), u.name, n)
	}
	return strconv.FormatInt(n, 10) + " bytes"
}
