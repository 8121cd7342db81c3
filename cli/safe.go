package cli

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// Text that pacer did not write (an upstream's status line, a command's
// output, a pause reason) is stored as it was seen, and shown safely: in
// the CLI's human output every character a terminal could act on is
// written as a visible escape, so that `pacer status` cannot clear the
// screen, move the cursor or retitle the window (issue 10 item 12). JSON
// output is exact (encoding/json escapes C0; admin.EscapeJSON also DEL
// and C1).

// escapeControls returns s with control characters shown as escapes: C0
// and DEL as \n, \r, \t or \xNN; C1 controls and the bidirectional
// formatting characters (which can reorder what is shown) as \uNNNN; and
// each byte that is not valid UTF-8 as \xNN. Everything else, backslashes
// included, is unchanged.
func escapeControls(s string) string {
	if !needsEscape(s) {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + 16)
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		b.WriteString(escapeRune(s[i:i+size], r, size))
		i += size
	}
	return b.String()
}

// escapeRune is the shown form of one decoded rune r (raw: its bytes).
func escapeRune(raw string, r rune, size int) string {
	switch {
	case r == utf8.RuneError && size == 1:
		return fmt.Sprintf(`\x%02x`, raw[0])
	case r == '\n':
		return `\n`
	case r == '\r':
		return `\r`
	case r == '\t':
		return `\t`
	case r < 0x20 || r == 0x7f:
		return fmt.Sprintf(`\x%02x`, r)
	case isC1(r) || isBidi(r):
		return fmt.Sprintf(`\u%04x`, r)
	}
	return raw
}

// needsEscape reports whether escapeControls would change s.
func needsEscape(s string) bool {
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c < 0x20 || c == 0x7f {
				return true
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if (r == utf8.RuneError && size == 1) || isC1(r) || isBidi(r) {
			return true
		}
		i += size
	}
	return false
}

func isC1(r rune) bool { return r >= 0x80 && r <= 0x9f }

// isBidi reports whether r is a bidirectional formatting character
// (embeddings, overrides, isolates, marks).
func isBidi(r rune) bool {
	return r == 0x061c || r == 0x200e || r == 0x200f || (r >= 0x202a && r <= 0x202e) || (r >= 0x2066 && r <= 0x2069)
}

// clip returns s as shown (escapeControls) in at most n runes, ending in
// "..." when cut. It cuts between whole characters and whole escapes.
func clip(s string, n int) string {
	shown := escapeControls(s)
	if utf8.RuneCountInString(shown) <= n {
		return shown
	}
	var b strings.Builder
	width := 0
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		piece := escapeRune(s[i:i+size], r, size)
		w := utf8.RuneCountInString(piece)
		if width+w > n-3 {
			break
		}
		b.WriteString(piece)
		width += w
		i += size
	}
	return b.String() + "..."
}
