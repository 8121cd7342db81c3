package sources

import (
	"crypto/sha256"
	"encoding/hex"
	"hash"
	"io"
	"math"
)

// digestBuf is the size of the buffer a digester reads through.
const digestBuf = 16 << 10

// digester computes the SHA-256 of a result as it is read or written
// (contract 9.2): the body or stdout passes through it in chunks and is
// never held whole. A result that fits in its read buffer (most polls'
// answers: the buffer is sized to the Content-Length) is hashed in one
// sha256.Sum256 at the end, on the stack; only a longer one gets a
// streaming hash.Hash, made when the buffer first fills (a fresh
// sha256.New per poll was 1.9 % of pacer's CPU at K=256, issue 15).
type digester struct {
	h   hash.Hash // nil until the result outgrows buf
	buf []byte
	n   int // bytes at the start of buf not yet added to h
	// sink, when set, receives every chunk too (the Capture of a source
	// with deliver); an error of it ends ReadFrom as a *sinkError.
	sink io.Writer
	// off: no digest is wanted (a select's replaces the result's,
	// checkResult): chunks only pass to sink, and hex is "".
	off bool
}

// sinkError is an error of a digester's sink, not of its reader.
type sinkError struct{ err error }

func (e *sinkError) Error() string { return e.err.Error() }
func (e *sinkError) Unwrap() error { return e.err }

// size sizes the buffer of ReadFrom for a body of length bytes (-1:
// unknown) read up to limit: no larger than the body and its EOF need, so
// that the small answers of most polls allocate little (one buffer per
// poll), and at most digestBuf. With lent set (a buffer of the pollers'
// pool) the buffer is a slice of it and nothing is allocated; the caller
// gives lent back only once it is done with d.
func (d *digester) size(length, limit int64, lent *[digestBuf]byte) {
	n := min(int64(digestBuf), limit)
	if length >= 0 && length+1 < n {
		n = length + 1
	}
	n = max(n, 1)
	if lent != nil {
		d.buf = lent[:n]
		return
	}
	d.buf = make([]byte, n)
}

// stream returns the streaming hash, made on first use, with the bytes
// held in buf added to it.
func (d *digester) stream() hash.Hash {
	if d.h == nil {
		d.h = sha256.New()
	}
	if d.n > 0 {
		d.h.Write(d.buf[:d.n])
		d.n = 0
	}
	return d.h
}

// Write adds b to the digest.
func (d *digester) Write(b []byte) (int, error) {
	if d.off {
		return len(b), nil
	}
	return d.stream().Write(b)
}

// ReadFrom digests r to EOF through one buffer and returns the bytes read.
func (d *digester) ReadFrom(r io.Reader) (int64, error) {
	return d.readAtMost(r, math.MaxInt64)
}

// readAtMost is ReadFrom reading at most limit bytes of r (as through an
// io.LimitReader, without allocating one): it returns at EOF or once limit
// bytes are read.
func (d *digester) readAtMost(r io.Reader, limit int64) (int64, error) {
	if d.buf == nil {
		d.buf = make([]byte, digestBuf)
	}
	var n int64
	for n < limit {
		switch {
		case d.n < len(d.buf):
		case d.off:
			d.n = 0 // the buffer is full: read on over it
		default:
			d.stream() // the buffer is full: hash it and read on
		}
		room := d.buf[d.n:]
		if int64(len(room)) > limit-n {
			room = room[:limit-n]
		}
		k, err := r.Read(room)
		chunk := d.buf[d.n : d.n+k]
		d.n += k
		n += int64(k)
		if d.sink != nil && k > 0 {
			if _, werr := d.sink.Write(chunk); werr != nil {
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
	return n, nil
}

// hex is the digest so far, in lower-case hex ("" when off).
func (d *digester) hex() string {
	if d.off {
		return ""
	}
	if d.h != nil {
		return hex.EncodeToString(d.stream().Sum(nil))
	}
	sum := sha256.Sum256(d.buf[:d.n])
	var out [2 * sha256.Size]byte
	hex.Encode(out[:], sum[:])
	return string(out[:])
}
