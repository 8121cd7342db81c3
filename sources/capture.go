package sources

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
)

const (
	// MaxInMemory is how much of a result a Capture holds in memory; beyond
	// it the result is spooled to a file (contract 9.5).
	MaxInMemory = 1 << 20
	// SpoolPattern is the os.CreateTemp pattern of spool files.
	SpoolPattern = "pacer-spool-*"
	// minCapture is the first buffer of a Capture.
	minCapture = 4 << 10
)

// Capture keeps the result of a poll whose source delivers it (contract
// 9.3, 9.5): up to MaxInMemory bytes in a buffer that grows as it is
// written (never allocated whole in advance), beyond that in a spool file
// in its directory that is unlinked as soon as it is created, so that only
// the open descriptor refers to it and nothing survives a crash. Close
// releases either. A Capture is not safe for concurrent use.
type Capture struct {
	dir  string
	buf  []byte
	f    *os.File
	n    int64
	err  error // the first write error (sticky)
	done bool  // closed
	// lent is buf's array when it is borrowed from bufs (lentCapture),
	// given back when the result outgrows it and on Close.
	lent *[digestBuf]byte
	bufs *readBuffers
}

// NewCapture returns an empty Capture spooling to dir ("" for
// os.TempDir()).
func NewCapture(dir string) *Capture {
	if dir == "" {
		dir = os.TempDir()
	}
	return &Capture{dir: dir}
}

// ErrSpool matches (errors.Is) the error of a poll whose result could not
// be kept for delivery (its spool file could not be created or written):
// the result is not delivered.
var ErrSpool = errors.New("spool")

// spoolError is "spool: " + err, matching ErrSpool and unwrapping to err.
func spoolError(err error) error { return fmt.Errorf("%w: %w", ErrSpool, err) }

// errClosed is the error of a write to a closed Capture.
var errClosed = errors.New("capture closed")

// Write appends b to the result. Its first error is kept (Err) and every
// later write fails with it.
func (c *Capture) Write(b []byte) (int, error) {
	switch {
	case c.err != nil:
		return 0, c.err
	case c.done:
		return 0, errClosed
	}
	if c.f == nil && int64(len(c.buf))+int64(len(b)) <= MaxInMemory {
		c.grow(len(b))
		c.buf = append(c.buf, b...)
		c.n += int64(len(b))
		return len(b), nil
	}
	if c.f == nil {
		if err := c.spool(); err != nil {
			c.err = err
			return 0, err
		}
	}
	k, err := c.f.Write(b)
	c.n += int64(k)
	if err != nil {
		c.err = spoolError(err)
		return k, c.err
	}
	return k, nil
}

// grow makes room for n more bytes in buf, doubling its capacity but never
// beyond MaxInMemory.
func (c *Capture) grow(n int) {
	need := len(c.buf) + n
	if need <= cap(c.buf) {
		return
	}
	size := max(2*cap(c.buf), minCapture, need)
	size = min(size, MaxInMemory)
	nb := make([]byte, len(c.buf), size)
	copy(nb, c.buf)
	c.buf = nb
	c.giveBack()
}

// spool moves the buffer to a new spool file, unlinked at once.
func (c *Capture) spool() error {
	f, err := os.CreateTemp(c.dir, SpoolPattern)
	if err != nil {
		return spoolError(err)
	}
	// ENOENT: another pacer sharing the temporary directory removed it
	// as a crash's leftover when it started (RemoveSpool); unlinked all
	// the same, and the descriptor is good.
	if err := os.Remove(f.Name()); err != nil && !errors.Is(err, fs.ErrNotExist) {
		f.Close()
		return spoolError(err)
	}
	if _, err := f.Write(c.buf); err != nil {
		f.Close()
		return spoolError(err)
	}
	c.f, c.buf = f, nil
	c.giveBack()
	return nil
}

// Err is the first write error, or nil.
func (c *Capture) Err() error {
	if c == nil {
		return nil
	}
	return c.err
}

// Size is the number of bytes written.
func (c *Capture) Size() int64 { return c.n }

// Spooled reports whether the result went to a spool file.
func (c *Capture) Spooled() bool { return c.f != nil }

// Reader returns a reader of the whole result from its start; each call
// returns a new one (several targets read it in turn). It is valid until
// Close.
func (c *Capture) Reader() *io.SectionReader {
	if c.f != nil {
		return io.NewSectionReader(c.f, 0, c.n)
	}
	return io.NewSectionReader(bytes.NewReader(c.buf), 0, c.n)
}

// Close releases the buffer or the spool file. A nil Capture, or a second
// Close, does nothing.
func (c *Capture) Close() error {
	if c == nil || c.done {
		return nil
	}
	c.done, c.buf = true, nil
	c.giveBack()
	if c.f == nil {
		return nil
	}
	err := c.f.Close()
	c.f = nil
	return err
}

// RemoveSpool removes the spool files left in dir ("" for os.TempDir()) by
// a daemon that died while holding them (on Linux they are unlinked at
// once and none is left; elsewhere, or after a crash between create and
// unlink, one may be). A file that vanished meanwhile (another daemon on
// the machine removing it too) is not an error. It returns how many it
// removed.
func RemoveSpool(dir string) (int, error) {
	if dir == "" {
		dir = os.TempDir()
	}
	names, err := filepath.Glob(filepath.Join(dir, SpoolPattern))
	if err != nil {
		return 0, fmt.Errorf("spool dir %s: %w", dir, err)
	}
	removed := 0
	for _, name := range names {
		switch err := os.Remove(name); {
		case err == nil:
			removed++
		case errors.Is(err, fs.ErrNotExist):
		default:
			return removed, fmt.Errorf("spool dir: %w", err)
		}
	}
	return removed, nil
}
