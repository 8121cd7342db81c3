package e2e

import (
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestSecurityRedirectToAdminPortWithLeadingZeros (contract 12.4): an
// upstream redirecting a poll to the admin listener with its port written
// with leading zeros (":0P", ":00P", which the dialer reads as P) fails the
// poll with the refusal, and nothing of the admin API reaches the
// delivered file: to 127.0.0.1, to localhost (/metrics), to [::1], and a
// HEAD redirected by a 307.
func TestSecurityRedirectToAdminPortWithLeadingZeros(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name, host, path, method string
		code                     int
	}{
		{"127.0.0.1 :0P", "127.0.0.1", "/api/sources", "GET", http.StatusFound},
		{"localhost :00P metrics", "localhost", "/metrics", "GET", http.StatusFound},
		{"[::1] :0P", "[::1]", "/api/sources", "GET", http.StatusFound},
		{"HEAD 307", "127.0.0.1", "/api/sources", "HEAD", http.StatusTemporaryRedirect},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			in := newInst(t)
			_, port, _ := net.SplitHostPort(in.addr)
			zeros := "0"
			if c.host == "localhost" {
				zeros = "00"
			}
			if c.host == "[::1]" {
				in.addr = "[::1]:" + port // the admin listens where the redirect leads
			}
			to := fmt.Sprintf("http://%s:%s%s%s", c.host, zeros, port, c.path)
			up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				http.Redirect(w, r, to, c.code)
			}))
			t.Cleanup(up.Close)
			in.writeConfig(`sources:
  - {name: r, type: http, method: ` + c.method + `, url: "` + up.URL + `/doc", schedule: "@every 300ms", deliver: {file: out.txt}}
`)
			d := in.start()
			var last sourceObj
			eventually(t, 20*time.Second, "a failed poll refusing the redirect", func() error {
				last = d.source("r")
				if !strings.Contains(last.LastError, "redirect to the admin listener refused") {
					return fmt.Errorf("source %s", last)
				}
				return nil
			})
			if last.LastSuccessAt != nil {
				t.Errorf("a poll redirected to %s succeeded: %s", to, last)
			}
			if data, err := os.ReadFile(filepath.Join(in.dir, "out.txt")); err == nil {
				t.Errorf("the redirect to %s delivered %d bytes: %.200s", to, len(data), data)
			}
			d.stop(10 * time.Second)
		})
	}
}
