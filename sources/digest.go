package sources

import (
	"crypto/sha256"
	"encoding/hex"
	"hash"
	"io"
)

// digestBuf is the size of the buffer a digester reads through.
const digestBuf = 16 << 10

// digester computes the SHA-256 of a result as it is read or written
// (contract 9.2): the body or stdout passes through it in chunks and is
// never held whole.
type digester struct {
	h   hash.Hash
	buf []byte
	// sink, when set, receives every chunk too (the Capture of a source
	// with deliver); an error of it ends ReadFrom as a *sinkError.
	sink io.Writer
}

// sinkError is an error of a digester's sink, not of its reader.
type sinkError struct{ err error }

func (e *sinkError) Error() string { return e.err.Error() }
func (e *sinkError) Unwrap() error { return e.err }

func newDigester() *digester { return &digester{h: sha256.New()} }

// size sizes the buffer of ReadFrom for a body of length bytes (-1:
// unknown) read up to limit: no larger than the body and its EOF need, so
// that the small answers of most polls allocate little (one buffer per
// poll), and at most digestBuf.
func (d *digester) size(length, limit int64) {
	n := min(int64(digestBuf), limit)
	if length >= 0 && length+1 < n {
		n = length + 1
	}
	d.buf = make([]byte, max(n, 1))
}

// Write adds b to the digest.
func (d *digester) Write(b []byte) (int, error) { return d.h.Write(b) }

// ReadFrom digests r to EOF through one buffer and returns the bytes read.
func (d *digester) ReadFrom(r io.Reader) (int64, error) {
	if d.buf == nil {
		d.buf = make([]byte, digestBuf)
	}
	var n int64
	for {
		k, err := r.Read(d.buf)
		d.h.Write(d.buf[:k])
		n += int64(k)
		if d.sink != nil && k > 0 {
			if _, werr := d.sink.Write(d.buf[:k]); werr != nil {
				return n, &sinkError{werr}
			}
		}
		switch {
		case err == io.EOF:
			return n, nil
		case err != nil:
			return n, err
		}
	}
}

// hex is the digest so far, in lower-case hex.
func (d *digester) hex() string {
	var sum [sha256.Size]byte
	return hex.EncodeToString(d.h.Sum(sum[:0]))
}
