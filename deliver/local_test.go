package deliver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/pacer-dev/pacer/config"
	"github.com/pacer-dev/pacer/sources"
)

// lowFDEnv, when set in a child of the test binary, makes TestMain run
// lowFDChild instead of the tests.
const lowFDEnv = "PACER_TEST_DELIVER_LOW_FD"

// localReport is what lowFDChild prints for each delivery.
type localReport struct {
	Target string
	Local  bool // errors.Is(err, sources.ErrLocal)
	Err    string
}

// lowFDChild uses up its descriptors under a low RLIMIT_NOFILE, then
// delivers a result to a command, a webhook and a file, one at a time, and
// prints one localReport per delivery.
func lowFDChild() int {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer ln.Close()
	dir, err := os.MkdirTemp("", "pacer-deliver-lowfd-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	body := sources.NewCapture(dir)
	_, _ = body.Write([]byte("result"))
	defer body.Close()
	r := Result{Source: "a", Digest: "d", Status: 200, Body: body}
	dl := New(&http.Transport{})
	targets := []struct {
		name string
		d    config.Deliver
	}{
		{"command", config.Deliver{Command: []string{"/bin/true"}}},
		{"webhook", config.Deliver{Webhook: &config.Webhook{URL: "http://" + ln.Addr().String() + "/in", Method: http.MethodPost}}},
		{"file", config.Deliver{File: filepath.Join(dir, "out.json")}},
	}
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
	for _, tg := range targets {
		err := dl.Deliver(ctx, &tg.d, r, nil)
		reports = append(reports, localReport{tg.name, errors.Is(err, sources.ErrLocal), errText(err)})
	}
	for _, f := range held {
		f.Close()
	}
	_ = json.NewEncoder(os.Stdout).Encode(reports)
	return 0
}

// TestDeliveryLocalErrors (issue 20 item 12): a delivery that fails for
// lack of pacer's own descriptors (a command's pipes or fork, a webhook's
// socket, a file's temporary file) is a local resource error (rule 3.14),
// which the scheduler never counts against the source: with error_after 3,
// 146 of 200 sources went to error with "deliver: command sh: fork/exec
// /usr/bin/sh: too many open files".
func TestDeliveryLocalErrors(t *testing.T) {
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), lowFDEnv+"=1")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("child: %v\n%s", err, out)
	}
	var reports []localReport
	if err := json.Unmarshal(out, &reports); err != nil || len(reports) != 3 {
		t.Fatalf("child printed %q (%v)", out, err)
	}
	for _, r := range reports {
		if !r.Local || !strings.HasPrefix(r.Err, "deliver: ") || !strings.Contains(r.Err, "too many open files") {
			t.Errorf("%s delivery with no descriptor left: errors.Is(ErrLocal) %v, err %q; want a local error starting \"deliver: \"",
				r.Target, r.Local, r.Err)
		}
		t.Logf("%s: %s", r.Target, r.Err)
	}
}

// TestDeliveryFailuresNotLocal: the failures of a delivery's targets
// themselves are not local.
func TestDeliveryFailuresNotLocal(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	refused := "http://" + ln.Addr().String() + "/"
	ln.Close()
	dl := New(&http.Transport{})
	for _, d := range []config.Deliver{
		{Command: []string{"/bin/false"}},
		{Command: []string{"/nonexistent/pacer-deliver-cmd"}},
		{Webhook: &config.Webhook{URL: refused, Method: http.MethodPost}},
		{File: "/proc/pacer-cannot-write-here/out"},
	} {
		err := dl.Deliver(t.Context(), &d, result(t, "x"), nil)
		if err == nil || errors.Is(err, sources.ErrLocal) {
			t.Errorf("%+v: got %v (local %v), want a failure that is not local", d, err, errors.Is(err, sources.ErrLocal))
		}
	}
	var timeout *Error
	ctx, cancel := context.WithTimeout(t.Context(), time.Millisecond)
	defer cancel()
	<-ctx.Done()
	err = dl.Deliver(ctx, &config.Deliver{Command: []string{"/bin/true"}}, result(t, "x"), nil)
	if !errors.As(err, &timeout) || errors.Is(err, sources.ErrLocal) {
		t.Errorf("a delivery cut off by its timeout: %v, local %v; want a failure that is not local", err, errors.Is(err, sources.ErrLocal))
	}
}

// TestDescriptors: what a delivery adds to a poll's descriptors is its
// result's spool file and its costliest target.
func TestDescriptors(t *testing.T) {
	hook := &config.Webhook{URL: "http://127.0.0.1/in", Method: http.MethodPost}
	for _, tc := range []struct {
		d    *config.Deliver
		want int
	}{
		{nil, 0},
		{&config.Deliver{File: "/tmp/x"}, 2},
		{&config.Deliver{Webhook: hook}, 2},
		{&config.Deliver{Command: []string{"cat"}}, 1 + commandFDs},
		{&config.Deliver{Command: []string{"cat"}, Webhook: hook, File: "/tmp/x"}, 1 + commandFDs},
	} {
		if got := Descriptors(tc.d); got != tc.want {
			t.Errorf("Descriptors(%+v) = %d, want %d", tc.d, got, tc.want)
		}
	}
}
