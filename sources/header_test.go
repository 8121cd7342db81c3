package sources

import (
	"bufio"
	"fmt"
	"net"
	"runtime"
	"testing"
	"time"
)

// headerServer answers every request with a 200 whose header X-Big holds
// size bytes, written in chunks from one buffer (so that the server side
// allocates little), then an empty body.
func headerServer(t *testing.T, size int) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	t.Cleanup(func() { ln.Close(); <-done })
	go func() {
		defer close(done)
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			serveBigHeader(conn, size)
		}
	}()
	return "http://" + ln.Addr().String()
}

func serveBigHeader(conn net.Conn, size int) {
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(10 * time.Second))
	r := bufio.NewReader(conn)
	for { // read the request head
		line, err := r.ReadString('\n')
		if err != nil || line == "\r\n" {
			break
		}
	}
	chunk := make([]byte, 32<<10)
	for i := range chunk {
		chunk[i] = 'a'
	}
	fmt.Fprintf(conn, "HTTP/1.1 200 OK\r\nX-Big: ")
	for sent := 0; sent < size; sent += len(chunk) {
		if _, err := conn.Write(chunk[:min(len(chunk), size-sent)]); err != nil {
			return
		}
	}
	fmt.Fprintf(conn, "\r\nContent-Length: 0\r\n\r\n")
}

func TestHTTPHeaderCap(t *testing.T) {
	client := newTestClient(t, 1)
	tests := []struct {
		name string
		size int
		err  string // after "GET URL: "; "" = success
	}{
		{"under the cap", 512 << 10, ""},
		{"2 MiB", 2 << 20, "response headers exceed 1048576 bytes (1 MiB)"},
		{"64 MiB", 64 << 20, "response headers exceed 1048576 bytes (1 MiB)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			src := httpSource(headerServer(t, tt.size) + "/x")
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			res, _ := pollWithin(t, NewHTTP(src, client, nil), 20*time.Second)
			runtime.ReadMemStats(&after)
			want := "<nil>"
			if tt.err != "" {
				want = "GET " + src.URL + ": " + tt.err
			}
			if errText(res.Err) != want {
				t.Errorf("Err = %q, want %q", errText(res.Err), want)
			}
			// Reading stops at the cap: a few MiB at most are allocated
			// (line buffers growing to the cap, ~7 MiB under -race), not the
			// header's size (64 MiB) nor max_body (10 MiB, ~73 MiB before).
			grew := after.TotalAlloc - before.TotalAlloc
			if tt.size > MaxHeaderBytes && grew > 16<<20 {
				t.Errorf("one poll allocated %d bytes", grew)
			}
			t.Logf("%d-byte header: %d bytes allocated", tt.size, grew)
		})
	}
}
