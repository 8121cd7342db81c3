package sources

import (
	"bytes"
	"errors"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pacer-dev/pacer/config"
)

// spoolFiles lists the spool files present in dir.
func spoolFiles(t *testing.T, dir string) []string {
	t.Helper()
	names, err := filepath.Glob(filepath.Join(dir, SpoolPattern))
	if err != nil {
		t.Fatal(err)
	}
	return names
}

// TestCapture: below or at 1 MiB a result stays in a buffer that grows
// with it (a small one is not given 1 MiB); above, it is spooled to a file
// that is unlinked at once (none is ever listed in the spool dir); either
// reads back whole, several times, and Close releases it.
func TestCapture(t *testing.T) {
	for _, c := range []struct {
		name    string
		size    int
		chunk   int
		spooled bool
	}{
		{"empty", 0, 1, false},
		{"small", 1000, 100, false},
		{"exactly 1 MiB", MaxInMemory, 16 << 10, false},
		{"1 MiB + 1 in one write", MaxInMemory + 1, MaxInMemory + 1, true},
		{"1 MiB + 1 in chunks", MaxInMemory + 1, 7 << 10, true},
		{"3 MiB", 3 << 20, 16 << 10, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			data := bytes.Repeat([]byte("pacer-capture-0123456789"), c.size/24+1)[:c.size]
			cp := NewCapture(dir)
			for off := 0; off < len(data); off += c.chunk {
				if _, err := cp.Write(data[off:min(off+c.chunk, len(data))]); err != nil {
					t.Fatal(err)
				}
				if cap(cp.buf) > MaxInMemory {
					t.Fatalf("buffer capacity %d over %d", cap(cp.buf), MaxInMemory)
				}
				if n := spoolFiles(t, dir); len(n) != 0 {
					t.Fatalf("spool file left in the dir: %q", n)
				}
			}
			if c.size == 1000 && cap(cp.buf) >= 64<<10 {
				t.Errorf("1000 bytes held in a buffer of %d", cap(cp.buf))
			}
			if cp.Size() != int64(c.size) || cp.Spooled() != c.spooled || cp.Err() != nil {
				t.Fatalf("size %d spooled %v err %v; want %d %v", cp.Size(), cp.Spooled(), cp.Err(), c.size, c.spooled)
			}
			for range 2 {
				got, err := io.ReadAll(cp.Reader())
				if err != nil || !bytes.Equal(got, data) {
					t.Fatalf("read back %d bytes (%v), want %d equal", len(got), err, len(data))
				}
			}
			f := cp.f
			if err := cp.Close(); err != nil {
				t.Fatal(err)
			}
			if f != nil {
				if _, err := f.Stat(); err == nil {
					t.Error("spool file still open after Close")
				}
			}
			if _, err := cp.Write([]byte("x")); err == nil || cp.Close() != nil {
				t.Errorf("write after Close: %v, want an error; a second Close must be a no-op", err)
			}
		})
	}
}

// TestCaptureSpoolError: a spool dir that cannot be written fails the
// capture with an error naming the spool, sticky.
func TestCaptureSpoolError(t *testing.T) {
	cp := NewCapture(filepath.Join(t.TempDir(), "missing"))
	defer cp.Close()
	if _, err := cp.Write(make([]byte, MaxInMemory+1)); err == nil || !strings.HasPrefix(err.Error(), "spool: ") || !errors.Is(err, ErrSpool) {
		t.Fatalf("write: %v, want a spool error", err)
	}
	if _, err := cp.Write([]byte("x")); err == nil || cp.Err() == nil {
		t.Errorf("later write: %v, Err %v; want the first error again", err, cp.Err())
	}
}

// TestRemoveSpool: leftover spool files are removed, other files are kept,
// and a missing dir's glob is no error.
func TestRemoveSpool(t *testing.T) {
	dir := t.TempDir()
	for _, n := range []string{"pacer-spool-1", "pacer-spool-abc", "other"} {
		if err := os.WriteFile(filepath.Join(dir, n), []byte("x"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	n, err := RemoveSpool(dir)
	if err != nil || n != 2 {
		t.Fatalf("RemoveSpool: %d, %v; want 2", n, err)
	}
	if left := spoolFiles(t, dir); len(left) != 0 {
		t.Errorf("left: %q", left)
	}
	if _, err := os.Stat(filepath.Join(dir, "other")); err != nil {
		t.Errorf("other file removed: %v", err)
	}
	if n, err := RemoveSpool(filepath.Join(dir, "missing")); err != nil || n != 0 {
		t.Errorf("missing dir: %d, %v", n, err)
	}
}

// TestPollCapture: a source with deliver gets its successful result in
// Result.Body (http body with its Content-Type, exec stdout), small or
// spooled, with the digest of the same bytes; a failed poll has none; a
// source without deliver has none either. With when: always the GET is
// unconditional.
func TestPollCapture(t *testing.T) {
	big := strings.Repeat("0123456789abcdef", 3<<16) // 3 MiB
	u, url := newUpstream(t, "small body", `"e1"`)
	client := newTestClient(t, 2)
	withDeliver := func(s *config.Source) *config.Source {
		s.Deliver = &config.Deliver{File: "/nonexistent/x"}
		return s
	}
	for _, body := range []string{"small body", big} {
		u.set(body, `"e1"`)
		res := NewHTTP(withDeliver(httpSource(url)), client, nil).Poll(t.Context())
		if res.Err != nil || res.Body == nil || res.Body.Size() != int64(len(body)) || res.Digest != sha([]byte(body)) {
			t.Fatalf("http %d bytes: %+v (%s)", len(body), res, errText(res.Err))
		}
		got, _ := io.ReadAll(res.Body.Reader())
		if string(got) != body || res.Body.Spooled() != (len(body) > MaxInMemory) || !strings.HasPrefix(res.ContentType, "text/plain") {
			t.Errorf("http %d bytes: read %d, spooled %v, content type %q", len(body), len(got), res.Body.Spooled(), res.ContentType)
		}
		res.Body.Close()
	}
	if res := NewHTTP(httpSource(url), client, nil).Poll(t.Context()); res.Err != nil || res.Body != nil {
		t.Errorf("without deliver: %+v, want no Body", res)
	}
	small := withDeliver(httpSource(url))
	small.MaxBody = 10
	if res := NewHTTP(small, client, nil).Poll(t.Context()); res.Err == nil || res.Body != nil {
		t.Errorf("over max_body: %+v, want a failure without Body", res)
	}

	always := withDeliver(httpSource(url))
	always.Deliver.Always = true
	before := u.conditionals.Load()
	res := NewHTTP(always, client, nil).(ConditionalPoller).PollSince(t.Context(), Validators{ETag: `"e1"`})
	if res.Err != nil || res.StatusCode != http.StatusOK || res.Body == nil || u.conditionals.Load() != before {
		t.Errorf("when: always: %+v (%s), want an unconditional 200 with its body", res, errText(res.Err))
	}
	res.Body.Close()

	res = NewExec(withDeliver(shell(`printf 'out %s' "$1"; echo noise >&2`, "x")), nil).Poll(t.Context())
	if res.Err != nil || res.Body == nil || res.Digest != sha([]byte("out x")) {
		t.Fatalf("exec: %+v (%s)", res, errText(res.Err))
	}
	if got, _ := io.ReadAll(res.Body.Reader()); string(got) != "out x" {
		t.Errorf("exec stdout captured %q", got)
	}
	res.Body.Close()
	if res := NewExec(withDeliver(shell(`printf partial; exit 3`, "")), nil).Poll(t.Context()); res.Err == nil || res.Body != nil {
		t.Errorf("failed exec: %+v, want no Body", res)
	}
}

// TestPollSpoolFailure: a result over 1 MiB that cannot be spooled (the
// spool dir, $TMPDIR, is missing) fails the poll with "deliver: spool: "
// matching ErrSpool, without a Body, for http and exec sources alike.
func TestPollSpoolFailure(t *testing.T) {
	t.Setenv("TMPDIR", filepath.Join(t.TempDir(), "missing"))
	_, url := newUpstream(t, strings.Repeat("b", 2<<20), "")
	src := httpSource(url)
	src.Deliver = &config.Deliver{File: "/nonexistent/x"}
	job := shell(`head -c 3000000 /dev/zero`, "")
	job.Deliver = src.Deliver
	for name, p := range map[string]Poller{"http": NewHTTP(src, newTestClient(t, 2), nil), "exec": NewExec(job, nil)} {
		res := p.Poll(t.Context())
		if !strings.HasPrefix(errText(res.Err), "deliver: spool: ") || !errors.Is(res.Err, ErrSpool) || res.Body != nil {
			t.Errorf("%s: %+v (%s), want a spool failure", name, res, errText(res.Err))
		}
	}
}
