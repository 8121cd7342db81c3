package sources

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"syscall"
	"testing"
	"time"

	"github.com/pacer-dev/pacer/config"
)

func TestIsLocal(t *testing.T) {
	dial := func(call string, errno syscall.Errno) error {
		return &url.Error{Op: "Get", URL: "http://h/", Err: &net.OpError{Op: "dial", Net: "tcp",
			Err: os.NewSyscallError(call, errno)}}
	}
	fork := func(errno syscall.Errno) error {
		return &os.PathError{Op: "fork/exec", Path: "/bin/sh", Err: errno}
	}
	tests := []struct {
		name     string
		err      error
		starting bool
		want     bool
	}{
		{"socket EMFILE", dial("socket", syscall.EMFILE), false, true},
		{"socket ENFILE", dial("socket", syscall.ENFILE), false, true},
		{"socket ENOBUFS", dial("socket", syscall.ENOBUFS), false, true},
		{"no local port", dial("connect", syscall.EADDRNOTAVAIL), false, true},
		{"open /dev/null EMFILE", &os.PathError{Op: "open", Path: os.DevNull, Err: syscall.EMFILE}, true, true},
		{"pipe ENFILE", os.NewSyscallError("pipe2", syscall.ENFILE), true, true},
		{"fork EAGAIN", fork(syscall.EAGAIN), true, true},
		{"fork ENOMEM", fork(syscall.ENOMEM), true, true},
		{"wrapped twice", fmt.Errorf("poll: %w", fmt.Errorf("start: %w", fork(syscall.EAGAIN))), true, true},
		{"socket EAGAIN is the peer's", dial("connect", syscall.EAGAIN), false, false},
		{"EADDRNOTAVAIL at start", fork(syscall.EADDRNOTAVAIL), true, false},
		{"connection refused", dial("connect", syscall.ECONNREFUSED), false, false},
		{"no such command", fork(syscall.ENOENT), true, false},
		{"permission denied", fork(syscall.EACCES), true, false},
		{"timeout", context.DeadlineExceeded, false, false},
		{"plain error", errors.New("too many open files"), false, false},
	}
	for _, tt := range tests {
		if got := isLocal(tt.err, tt.starting); got != tt.want {
			t.Errorf("%s: isLocal(%v) = %v, want %v", tt.name, tt.err, got, tt.want)
		}
	}
}

// Ordinary failures of a source are not local.
func TestSourceFailuresNotLocal(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	refused := "http://" + ln.Addr().String() + "/"
	ln.Close()
	polls := []Poller{
		NewExec(shell(`exit 1`, ""), nil),
		NewExec(execSource("/nonexistent/pacer-test-cmd"), nil),
		NewHTTP(httpSource(refused), newTestClient(t, 1), nil),
	}
	for i, p := range polls {
		res, _ := pollWithin(t, p, 5*time.Second)
		if res.Err == nil || res.Local || errors.Is(res.Err, ErrLocal) {
			t.Errorf("poll %d: got %+v (%s), want a failure that is not local", i, res, errText(res.Err))
		}
	}
}

// localEnv, when set in a child of the test binary, makes TestMain run
// lowFDChild instead of the tests.
const localEnv = "PACER_TEST_LOW_FD"

// localReport is what lowFDChild prints for each poll.
type localReport struct {
	Kind  string
	Local bool
	Is    bool
	Err   string
}

// lowFDChild uses up its descriptors under a low RLIMIT_NOFILE, then polls
// an exec and an http source, and prints one localReport per poll.
func lowFDChild() int {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer ln.Close()
	tr := NewTransport(1)
	client := NewClient(tr, nil)
	exe := NewExec(execSource("/bin/true"), nil)
	web := NewHTTP(httpSource("http://"+ln.Addr().String()+"/"), client, nil)
	// A source with deliver whose 2 MiB answer must be spooled: its
	// connection is made (and left idle) before the descriptors run out,
	// so only its spool file finds none.
	big, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer big.Close()
	go http.Serve(big, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write(make([]byte, 2<<20))
	}))
	spoolSrc := httpSource("http://" + big.Addr().String() + "/")
	spoolSrc.Deliver = &config.Deliver{File: "/dev/null"}
	spooled := NewHTTP(spoolSrc, NewClient(NewTransport(1), nil), nil)
	first := spooled.Poll(context.Background())
	if first.Err != nil {
		fmt.Fprintln(os.Stderr, first.Err)
		return 1
	}
	first.Body.Close() // its spool file's descriptor is free again
	lim := syscall.Rlimit{Cur: 64, Max: 64}
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	var held []*os.File
	for {
		f, err := os.Open(os.DevNull)
		if err != nil {
			break
		}
		held = append(held, f)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	reports := []localReport{}
	for _, p := range []struct {
		kind string
		p    Poller
	}{{"exec", exe}, {"http", web}, {"spool", spooled}} {
		res := p.p.Poll(ctx)
		reports = append(reports, localReport{p.kind, res.Local, errors.Is(res.Err, ErrLocal), errText(res.Err)})
	}
	for _, f := range held {
		f.Close()
	}
	json.NewEncoder(os.Stdout).Encode(reports)
	return 0
}

func TestLocalErrorUnderLowFDLimit(t *testing.T) {
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), localEnv+"=1")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("child: %v\n%s", err, out)
	}
	var reports []localReport
	if err := json.Unmarshal(out, &reports); err != nil || len(reports) != 3 {
		t.Fatalf("child printed %q (%v)", out, err)
	}
	for _, r := range reports {
		if !r.Local || !r.Is {
			t.Errorf("%s poll with no descriptor left: Local %v, errors.Is(ErrLocal) %v, Err %q", r.Kind, r.Local, r.Is, r.Err)
		}
		t.Logf("%s: %s", r.Kind, r.Err)
	}
}
