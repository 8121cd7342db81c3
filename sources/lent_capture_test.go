package sources

import (
	"bytes"
	"io"
	"testing"
)

// TestLentCapture checks the Capture of a result that only the conditions
// read: its bytes in a borrowed buffer while they fit, the buffer given
// back when the result outgrows it, when it is spooled and on Close, and
// the result whole in every case.
func TestLentCapture(t *testing.T) {
	bufs := &readBuffers{}
	for _, size := range []int{0, 100, digestBuf, digestBuf + 1, 3 * digestBuf, MaxInMemory + 10} {
		want := bytes.Repeat([]byte("0123456789abcdef"), size/16+1)[:size]
		c := lentCapture(bufs)
		for rest := want; len(rest) > 0; {
			n := min(len(rest), 5000)
			if _, err := c.Write(rest[:n]); err != nil {
				t.Fatal(err)
			}
			rest = rest[n:]
		}
		fits := size <= digestBuf
		if (c.lent != nil) != fits {
			t.Errorf("%d bytes: borrowed buffer kept %v, want %v", size, c.lent != nil, fits)
		}
		if b, ok := c.Bytes(); ok && fits && len(b) > 0 && &b[0] != &c.lent[0] {
			t.Errorf("%d bytes: not in the borrowed buffer", size)
		}
		got, err := io.ReadAll(c.Reader())
		if err != nil || !bytes.Equal(got, want) {
			t.Fatalf("%d bytes: read back %d bytes, %v", size, len(got), err)
		}
		c.Close()
		if c.lent != nil {
			t.Errorf("%d bytes: the borrowed buffer is not given back on Close", size)
		}
	}
}
