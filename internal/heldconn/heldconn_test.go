package heldconn

import (
	"io"
	"net"
	"strings"
	"sync"
	"testing"
)

// TestReleasedOnce: a connection closed twice, from two goroutines, is
// released once, with itself; what is copied into it through ReadFrom
// arrives.
func TestReleasedOnce(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	got := make(chan string, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			got <- err.Error()
			return
		}
		defer c.Close()
		b, _ := io.ReadAll(c)
		got <- string(b)
	}()
	raw, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	var released []*Conn
	var mu sync.Mutex
	c := New(raw, func(r *Conn) {
		mu.Lock()
		released = append(released, r)
		mu.Unlock()
	})
	if _, err := c.ReadFrom(strings.NewReader("spooled")); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for range 2 {
		wg.Go(func() { _ = c.Close() })
	}
	wg.Wait()
	if len(released) != 1 || released[0] != c {
		t.Errorf("released %d times (%v), want once with the connection", len(released), released)
	}
	if s := <-got; s != "spooled" {
		t.Errorf("the peer read %q", s)
	}
}
