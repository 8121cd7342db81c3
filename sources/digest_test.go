package sources

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"testing"
	"testing/iotest"
)

// TestDigester: the digest of a result read through ReadFrom (whatever
// the reader's chunks, the buffer's size hint, its own or lent, and the result's length
// around the buffer's size, where the one-shot hash gives way to the
// streaming one) or written through Write is its SHA-256, and a sink sees
// every byte once.
func TestDigester(t *testing.T) {
	readers := map[string]func(io.Reader) io.Reader{
		"whole":    func(r io.Reader) io.Reader { return r },
		"one-byte": iotest.OneByteReader,
		"half":     iotest.HalfReader,
		"data-eof": iotest.DataErrReader,
	}
	for _, n := range []int{0, 1, 1023, 1024, 1025, digestBuf - 1, digestBuf, digestBuf + 1, 3*digestBuf + 7} {
		body := bytes.Repeat([]byte("0123456789abcdef"), n/16+1)[:n]
		sum := sha256.Sum256(body)
		want := hex.EncodeToString(sum[:])
		for _, hint := range []int64{int64(n), -1, int64(n / 2)} {
			for rname, wrap := range readers {
				if n > 2*digestBuf && rname == "one-byte" {
					continue // slow, and no case the others miss
				}
				lend := len(rname)%2 == 0 // half the readers read into a lent buffer
				t.Run(fmt.Sprintf("n=%d/hint=%d/%s/lent=%v", n, hint, rname, lend), func(t *testing.T) {
					var lent *[digestBuf]byte
					if lend {
						lent = new([digestBuf]byte)
					}
					d := &digester{}
					d.size(hint, 10<<20, lent)
					var sink bytes.Buffer
					d.sink = &sink
					got, err := d.ReadFrom(wrap(bytes.NewReader(body)))
					if err != nil || got != int64(n) {
						t.Fatalf("ReadFrom = %d, %v; want %d, nil", got, err, n)
					}
					if h := d.hex(); h != want {
						t.Errorf("digest %s, want %s", h, want)
					}
					if !bytes.Equal(sink.Bytes(), body) {
						t.Errorf("sink got %d bytes, want the %d of the body", sink.Len(), n)
					}
				})
			}
		}
		t.Run(fmt.Sprintf("n=%d/write", n), func(t *testing.T) {
			d := &digester{}
			for rest := body; len(rest) > 0; {
				k := min(len(rest), 777)
				d.Write(rest[:k])
				rest = rest[k:]
			}
			if h := d.hex(); h != want {
				t.Errorf("digest %s, want %s", h, want)
			}
		})
	}
}

// TestDigesterReadError: a reader's error ends ReadFrom with it and the
// bytes read so far.
func TestDigesterReadError(t *testing.T) {
	d := &digester{}
	d.size(-1, 100, nil)
	r := io.MultiReader(bytes.NewReader([]byte("abc")), iotest.ErrReader(io.ErrUnexpectedEOF))
	if n, err := d.ReadFrom(r); n != 3 || err != io.ErrUnexpectedEOF {
		t.Errorf("ReadFrom = %d, %v; want 3, %v", n, err, io.ErrUnexpectedEOF)
	}
}

// TestDigesterLimit: readAtMost stops at its limit, and the digest is of
// the bytes read.
func TestDigesterLimit(t *testing.T) {
	body := bytes.Repeat([]byte("x"), 3*digestBuf)
	for _, limit := range []int64{0, 1, 100, digestBuf, digestBuf + 1, 3 * digestBuf, 3*digestBuf + 1} {
		d := &digester{}
		d.size(-1, limit, nil)
		n, err := d.readAtMost(iotest.HalfReader(bytes.NewReader(body)), limit)
		want := min(limit, int64(len(body)))
		sum := sha256.Sum256(body[:want])
		if err != nil || n != want || d.hex() != hex.EncodeToString(sum[:]) {
			t.Errorf("limit %d: read %d, %v, digest %s; want %d, nil, the digest of those bytes", limit, n, err, d.hex(), want)
		}
	}
}

// TestDigesterOff: a digester that is off passes every byte to its sink,
// read or written, hashes none and has no digest.
func TestDigesterOff(t *testing.T) {
	body := bytes.Repeat([]byte("0123456789"), digestBuf/2) // five buffers' worth
	var sink bytes.Buffer
	d := &digester{off: true, sink: &sink}
	d.size(-1, 1<<20, nil)
	if n, err := d.readAtMost(iotest.HalfReader(bytes.NewReader(body)), 1<<20); err != nil || n != int64(len(body)) {
		t.Fatalf("readAtMost = %d, %v; want %d, nil", n, err, len(body))
	}
	d.Write([]byte("written"))
	if !bytes.Equal(sink.Bytes(), body) {
		t.Errorf("the sink got %d bytes, want the %d read", sink.Len(), len(body))
	}
	if d.h != nil || d.hex() != "" {
		t.Errorf("hash %v, digest %q: want none", d.h, d.hex())
	}
}
