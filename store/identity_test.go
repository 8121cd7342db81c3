package store_test

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pacer-dev/pacer/domain"
	"github.com/pacer-dev/pacer/internal/waitfor"
	"github.com/pacer-dev/pacer/store"
)

// eventually polls cond until it returns nil or the deadline passes.
func eventually(t *testing.T, timeout time.Duration, what string, cond func() error) {
	t.Helper()
	waitfor.NoError(t, timeout, what, cond)
}

// logBuffer is a concurrency-safe log sink.
type logBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// daemonStore takes the daemon lock of dsn and opens the store with it, as
// pacer run does; both are released at the end of the test.
func daemonStore(t *testing.T, dsn string, opts store.Options) (*store.Store, *store.Lock) {
	t.Helper()
	l := mustAcquire(t, dsn) // released after the store is closed (cleanups run last-in first-out)
	opts.Lock = l
	return openAt(t, dsn, opts), l
}

// TestStoreFileGoneIsNoticed (hardening item 5): the database file of an
// open store deleted, moved away, replaced, or overwritten with garbage:
// Writable and SaveBatch fail with ErrStoreGone naming the file and what
// happened (no commit goes into a file nobody will read), the incident is
// logged once, and a file moved back is taken up again. Before, all of
// these went unnoticed: every write "succeeded".
func TestStoreFileGoneIsNoticed(t *testing.T) {
	for _, c := range []struct {
		name   string
		break_ func(t *testing.T, dsn string)
		mend   func(t *testing.T, dsn string) // nil: cannot be mended
		want   string
	}{
		{"deleted", func(t *testing.T, dsn string) {
			for _, suffix := range []string{"", "-wal", "-shm"} {
				if err := os.Remove(dsn + suffix); err != nil && !errors.Is(err, os.ErrNotExist) {
					t.Fatal(err)
				}
			}
		}, nil, "was deleted or moved"},
		{"moved away and back", func(t *testing.T, dsn string) {
			if err := os.Rename(dsn, dsn+".away"); err != nil {
				t.Fatal(err)
			}
		}, func(t *testing.T, dsn string) {
			if err := os.Rename(dsn+".away", dsn); err != nil {
				t.Fatal(err)
			}
		}, "was deleted or moved"},
		{"replaced", func(t *testing.T, dsn string) {
			writeFileT(t, dsn+".new", "not a database at all, but long enough")
			if err := os.Rename(dsn+".new", dsn); err != nil {
				t.Fatal(err)
			}
		}, nil, "was replaced by another file"},
		{"overwritten with garbage", func(t *testing.T, dsn string) {
			writeFileT(t, dsn, "garbage garbage garbage garbage")
		}, nil, "is no longer a SQLite database"},
	} {
		t.Run(c.name, func(t *testing.T) {
			dsn := filepath.Join(t.TempDir(), "pacer.db")
			var logs logBuffer
			s, _ := daemonStore(t, dsn, store.Options{Logger: slog.New(slog.NewTextHandler(&logs, nil))})
			save(t, s, []domain.SourceState{{Name: "a", Paused: true}}, nil, 10)
			if err := s.Writable(t.Context()); err != nil {
				t.Fatal(err)
			}
			c.break_(t, dsn)
			eventually(t, 5*time.Second, "Writable to notice", func() error {
				err := s.Writable(t.Context())
				if !errors.Is(err, store.ErrStoreGone) {
					return fmt.Errorf("Writable = %v", err)
				}
				if !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), dsn) {
					t.Errorf("Writable = %q; want it to name %s and say %q", err, dsn, c.want)
				}
				return nil
			})
			err := s.SaveBatch(t.Context(), []domain.SourceState{{Name: "a"}}, nil, 10)
			if !errors.Is(err, store.ErrStoreGone) {
				t.Errorf("SaveBatch on a gone file = %v; want ErrStoreGone", err)
			}
			// Once per incident, however often it is checked.
			for range 3 {
				time.Sleep(400 * time.Millisecond) // let the guard look again
				_ = s.Writable(t.Context())
			}
			if n := strings.Count(logs.String(), "THE DATABASE FILE IS GONE"); n != 1 {
				t.Errorf("%d log lines for one incident, want 1:\n%s", n, logs.String())
			}
			if c.mend == nil {
				return
			}
			c.mend(t, dsn)
			eventually(t, 5*time.Second, "Writable once the file is back", func() error { return s.Writable(t.Context()) })
			save(t, s, []domain.SourceState{{Name: "a", PausedReason: "back"}}, nil, 10)
			if st := mustGet(t, s, "a"); st.PausedReason != "back" {
				t.Errorf("state after the file came back = %+v", st)
			}
		})
	}
}

func writeFileT(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestMissingRecordedStoreRefused (hardening item 5): a store that a
// daemon ran on and that was then deleted is not silently replaced by a
// new, empty one at the next start; Options.NewStore allows it; the very
// first start creates the store. Before, the next start created an empty
// store and every error and pause state was gone.
func TestMissingRecordedStoreRefused(t *testing.T) {
	dsn := filepath.Join(t.TempDir(), "pacer.db")
	if err := store.Vanished(dsn); err != nil {
		t.Fatalf("Vanished before the first start = %v", err)
	}
	func() {
		l, err := store.AcquireLock(dsn)
		if err != nil {
			t.Fatal(err)
		}
		s, err := store.Open(dsn, store.Options{Lock: l}) // the first start creates it
		if err != nil {
			t.Fatal(err)
		}
		if err := s.SaveBatch(t.Context(), []domain.SourceState{{Name: "a", Paused: true}}, nil, 10); err != nil {
			t.Fatal(err)
		}
		if err := errors.Join(s.Close(), l.Release()); err != nil {
			t.Fatal(err)
		}
	}()
	if err := store.Vanished(dsn); err != nil {
		t.Fatalf("Vanished with the store there = %v", err)
	}
	if err := os.Remove(dsn); err != nil {
		t.Fatal(err)
	}
	var me *store.MissingError
	if err := store.Vanished(dsn); !errors.As(err, &me) || me.Running || me.PID != os.Getpid() {
		t.Errorf("Vanished after the store was deleted = %v; want a *MissingError naming our pid, not running", err)
	}
	l := mustAcquire(t, dsn)
	s, err := store.Open(dsn, store.Options{Lock: l})
	if !errors.As(err, &me) {
		if s != nil {
			_ = s.Close()
		}
		t.Fatalf("Open over a deleted store = %v; want a *MissingError", err)
	}
	for _, want := range []string{dsn, "missing", "-new-store", "PACER_NEW_STORE"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
	if !store.Missing(dsn) {
		t.Error("the refused Open created the database file")
	}
	// The refusal keeps the record: the next start is refused too.
	if err := l.Release(); err != nil {
		t.Fatal(err)
	}
	l = mustAcquire(t, dsn)
	if s, err := store.Open(dsn, store.Options{Lock: l}); !errors.As(err, &me) {
		if s != nil {
			_ = s.Close()
		}
		t.Fatalf("second Open over a deleted store = %v; want a *MissingError", err)
	}
	s = openAt(t, dsn, store.Options{Lock: l, NewStore: true})
	if states, err := s.LoadStates(t.Context()); err != nil || len(states) != 0 {
		t.Errorf("new store = %v, %v; want empty", states, err)
	}
}
