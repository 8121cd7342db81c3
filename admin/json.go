package admin

import "fmt"

// EscapeJSON escapes, inside the JSON text b, the characters that
// encoding/json leaves raw but a terminal may act on: DEL and the C1
// controls (U+0080 to U+009F, which some terminals read as ESC
// sequences). They can only occur inside strings (JSON's syntax is
// ASCII), where \u007f and \u0080..\u009f mean the same characters.
func EscapeJSON(b []byte) []byte {
	out := b[:0:0]
	last := 0
	for i := 0; i < len(b); {
		c := b[i]
		switch {
		case c == 0x7f:
			out = append(append(out, b[last:i]...), `\u007f`...)
			i++
			last = i
		case c == 0xc2 && i+1 < len(b) && b[i+1] >= 0x80 && b[i+1] <= 0x9f:
			out = append(append(out, b[last:i]...), fmt.Sprintf(`\u%04x`, b[i+1])...)
			i += 2
			last = i
		default:
			i++
		}
	}
	if last == 0 {
		return b
	}
	return append(out, b[last:]...)
}
