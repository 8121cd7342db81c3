package deliver

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
)

// fileMode is the mode of a delivered file.
const fileMode = 0o644

// writeFile writes r to path atomically: into a temporary file in path's
// directory (created if missing), synced, renamed over path, and the
// directory synced, so that a reader sees the old file or the new one,
// whole, and the new one survives a crash once writeFile returns. The
// temporary file is removed on failure.
func writeFile(ctx context.Context, path string, r io.Reader) (err error) {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("create directory: %w", unwrapPath(err))
	}
	f, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return fmt.Errorf("create temporary file: %w", unwrapPath(err))
	}
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(f.Name())
		}
	}()
	if _, err := io.Copy(f, ctxReader{ctx: ctx, r: r}); err != nil {
		return fmt.Errorf("write: %w", unwrapPath(err))
	}
	if err := f.Chmod(fileMode); err != nil {
		return fmt.Errorf("chmod: %w", unwrapPath(err))
	}
	if err := f.Sync(); err != nil {
		return fmt.Errorf("fsync: %w", unwrapPath(err))
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("close: %w", unwrapPath(err))
	}
	if err := os.Rename(f.Name(), path); err != nil {
		return fmt.Errorf("rename: %w", unwrapPath(err))
	}
	return syncDir(dir)
}

// syncDir fsyncs dir, so that a rename in it is durable.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("open directory: %w", unwrapPath(err))
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("fsync directory: %w", unwrapPath(err))
	}
	return nil
}

// unwrapPath drops the *fs.PathError's operation and path (the error's
// prefix names the file already).
func unwrapPath(err error) error {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	var le *os.LinkError
	if errors.As(err, &le) {
		return le.Err
	}
	return err
}
