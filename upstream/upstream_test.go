package upstream

import (
	"net/http"
	"strings"
	"testing"
	"time"
)

func TestHostOf(t *testing.T) {
	tests := []struct {
		in   string
		want string
		ok   bool
	}{
		{"https://API.Partner.example/v1/x?y=1", "api.partner.example", true},
		{"http://api.partner.example:80/", "api.partner.example", true},
		{"https://api.partner.example:443/", "api.partner.example", true},
		{"http://api.partner.example:443/", "api.partner.example:443", true},
		{"https://api.partner.example:80/", "api.partner.example:80", true},
		{"http://127.0.0.1:8080/feed", "127.0.0.1:8080", true},
		{"HTTP://127.0.0.1:0080/feed", "127.0.0.1", true},
		{"http://[::1]:8080/", "[::1]:8080", true},
		{"https://[2001:DB8::1]/", "[2001:db8::1]", true},
		{"https://[2001:db8::1]:443/", "[2001:db8::1]", true},
		{"http://user:pw@example.com:9000/", "example.com:9000", true},
		{"  https://example.com  ", "example.com", true},
		{"ftp://example.com/", "", false},
		{"example.com/feed", "", false},
		{"/relative", "", false},
		{"http://", "", false},
		{"http://:8080/", "", false},
		{"http://example.com:99999/", "", false},
		{"http://example.com:0/", "", false},
		{"http://exa mple.com/", "", false},
		{"http://[::1/", "", false},
		{"", "", false},
		{"://", "", false},
	}
	for _, tt := range tests {
		got, ok := HostOf(tt.in)
		if got != tt.want || ok != tt.ok {
			t.Errorf("HostOf(%q) = %q, %v; want %q, %v", tt.in, got, ok, tt.want, tt.ok)
		}
	}
}

// hdr builds a header from name, value pairs (Add, so a name may repeat).
func hdr(kv ...string) http.Header {
	h := http.Header{}
	for i := 0; i+1 < len(kv); i += 2 {
		h.Add(kv[i], kv[i+1])
	}
	return h
}

var now0 = time.Date(2026, 12, 7, 10, 42, 0, 0, time.UTC)

func TestQuotaUntil(t *testing.T) {
	tests := []struct {
		name string
		h    http.Header
		want time.Duration // from now0; 0 = not spent
	}{
		{"none", hdr(), 0},
		{"draft pair", hdr("RateLimit-Remaining", "0", "RateLimit-Reset", "30"), 30 * time.Second},
		{"draft pair lowercase", hdr("ratelimit-remaining", " 0 ", "ratelimit-reset", "5"), 5 * time.Second},
		{"draft pair left", hdr("RateLimit-Remaining", "3", "RateLimit-Reset", "30"), 0},
		{"draft pair no reset", hdr("RateLimit-Remaining", "0"), 0},
		{"draft pair bad reset", hdr("RateLimit-Remaining", "0", "RateLimit-Reset", "soon"), 0},
		{"draft pair negative", hdr("RateLimit-Remaining", "0", "RateLimit-Reset", "-4"), 0},
		{"draft pair due", hdr("RateLimit-Remaining", "0", "RateLimit-Reset", "0"), 0},
		{"structured", hdr("RateLimit", `"default";r=0;t=12`), 12 * time.Second},
		{"structured left", hdr("RateLimit", `"default";r=5;t=12`), 0},
		{"structured several", hdr("RateLimit", `"burst";r=10;t=1, "day";r=0;t=3600`), time.Hour},
		{"structured two spent", hdr("RateLimit", `"a";r=0;t=7, "b";r=0;t=9`), 9 * time.Second},
		{"structured two fields", hdr("RateLimit", `"a";r=4;t=7`, "RateLimit", `"b";r=0;t=20`), 20 * time.Second},
		{"structured quoted comma", hdr("RateLimit", `"a,b;c";r=0;t=8`), 8 * time.Second},
		{"structured token name", hdr("RateLimit", `default;t=8;r=0`), 8 * time.Second},
		{"structured no t", hdr("RateLimit", `"default";r=0`), 0},
		{"structured garbage", hdr("RateLimit", `;;;,,,"`), 0},
		{"x pair seconds", hdr("X-RateLimit-Remaining", "0", "X-RateLimit-Reset", "60"), time.Minute},
		{"x pair unix", hdr("X-RateLimit-Remaining", "0", "X-RateLimit-Reset", "1796640240"), time.Duration(1796640240-now0.Unix()) * time.Second},
		{"x pair unix past", hdr("X-RateLimit-Remaining", "0", "X-RateLimit-Reset", "1000000000"), 0},
		{"x pair left", hdr("X-RateLimit-Remaining", "1", "X-RateLimit-Reset", "60"), 0},
		{"x pair float", hdr("X-RateLimit-Remaining", "0", "X-RateLimit-Reset", "1.5"), 1500 * time.Millisecond},
		{"capped", hdr("RateLimit-Remaining", "0", "RateLimit-Reset", "99999999999"), MaxWait},
		{"capped unix", hdr("X-RateLimit-Remaining", "0", "X-RateLimit-Reset", "4000000000"), MaxWait},
		{"nan", hdr("RateLimit-Remaining", "0", "RateLimit-Reset", "NaN"), 0},
		{"inf", hdr("RateLimit-Remaining", "0", "RateLimit-Reset", "+Inf"), 0},
		{"latest wins", hdr("RateLimit-Remaining", "0", "RateLimit-Reset", "10", "X-RateLimit-Remaining", "0", "X-RateLimit-Reset", "40"), 40 * time.Second},
	}
	for _, tt := range tests {
		got, ok := QuotaUntil(tt.h, now0)
		if tt.want == 0 {
			if ok {
				t.Errorf("%s: QuotaUntil = %v, true; want not spent", tt.name, got)
			}
			continue
		}
		if !ok || !got.Equal(now0.Add(tt.want)) {
			t.Errorf("%s: QuotaUntil = %v, %v; want now+%v", tt.name, got, ok, tt.want)
		}
	}
}

func TestCacheUntil(t *testing.T) {
	date := now0.Add(-time.Hour).Format(http.TimeFormat) // a server clock an hour behind
	tests := []struct {
		name string
		h    http.Header
		want time.Duration
	}{
		{"none", hdr(), 0},
		{"max-age", hdr("Cache-Control", "public, max-age=300"), 5 * time.Minute},
		{"max-age quoted", hdr("Cache-Control", `max-age="60"`), time.Minute},
		{"max-age upper", hdr("Cache-Control", "MAX-AGE=60"), time.Minute},
		{"max-age less age", hdr("Cache-Control", "max-age=300", "Age", "100"), 200 * time.Second},
		{"max-age stale", hdr("Cache-Control", "max-age=300", "Age", "400"), 0},
		{"max-age zero", hdr("Cache-Control", "max-age=0"), 0},
		{"max-age bad", hdr("Cache-Control", "max-age=soon"), 0},
		{"max-age negative", hdr("Cache-Control", "max-age=-5"), 0},
		{"max-age fraction", hdr("Cache-Control", "max-age=1.5"), 0},
		{"max-age capped", hdr("Cache-Control", "max-age=999999999999"), MaxWait},
		{"no-store wins", hdr("Cache-Control", "max-age=300, no-store"), 0},
		{"no-cache wins", hdr("Cache-Control", "no-cache", "Cache-Control", "max-age=300"), 0},
		{"no-cache wins over expires", hdr("Cache-Control", "no-cache", "Expires", now0.Add(time.Hour).Format(http.TimeFormat)), 0},
		{"s-maxage ignored", hdr("Cache-Control", "s-maxage=300"), 0},
		{"max-age over expires", hdr("Cache-Control", "max-age=60", "Expires", now0.Add(time.Hour).Format(http.TimeFormat)), time.Minute},
		{"expires", hdr("Expires", now0.Add(10*time.Minute).Format(http.TimeFormat)), 10 * time.Minute},
		{"expires with date", hdr("Date", date, "Expires", now0.Add(-50*time.Minute).Format(http.TimeFormat)), 10 * time.Minute},
		{"expires past", hdr("Expires", now0.Add(-time.Minute).Format(http.TimeFormat)), 0},
		{"expires zero", hdr("Expires", "0"), 0},
		{"expires capped", hdr("Expires", now0.Add(1000*time.Hour).Format(http.TimeFormat)), MaxWait},
		{"expires bad date", hdr("Date", "yesterday", "Expires", now0.Add(time.Minute).Format(http.TimeFormat)), time.Minute},
	}
	for _, tt := range tests {
		got, ok := CacheUntil(tt.h, now0)
		if tt.want == 0 {
			if ok {
				t.Errorf("%s: CacheUntil = %v, true; want none", tt.name, got)
			}
			continue
		}
		if !ok || !got.Equal(now0.Add(tt.want)) {
			t.Errorf("%s: CacheUntil = %v, %v; want now+%v", tt.name, got, ok, tt.want)
		}
	}
}

// checkBounds fails unless until is after now and within MaxWait of it.
func checkBounds(t *testing.T, until time.Time, ok bool) {
	if ok && (!until.After(now0) || until.After(now0.Add(MaxWait))) {
		t.Fatalf("until %v out of (now, now+MaxWait]", until)
	}
}

func FuzzQuotaUntil(f *testing.F) {
	for _, s := range [][3]string{
		{"0", "30", ""}, {"1", "30", ""}, {"", "", `"default";r=0;t=12`},
		{"", "", `"a";r=10;t=1, "b";r=0;t=3600`}, {"", "", `"a,b";r=0;t=8`}, {"", "", `;;"\`},
		{"0", "1796640240", `x;r=0;t=99999999999999999999`}, {"0", "NaN", "r=0;t=-1"}, {"0.0", "1e308", ""},
	} {
		f.Add(s[0], s[1], s[2])
	}
	f.Fuzz(func(t *testing.T, remaining, reset, structured string) {
		h := hdr("RateLimit-Remaining", remaining, "RateLimit-Reset", reset, "RateLimit", structured,
			"X-RateLimit-Remaining", remaining, "X-RateLimit-Reset", reset)
		until, ok := QuotaUntil(h, now0)
		checkBounds(t, until, ok)
	})
}

func FuzzCacheUntil(f *testing.F) {
	exp := now0.Add(time.Hour).Format(http.TimeFormat)
	for _, s := range [][4]string{
		{"max-age=300", "", "", ""}, {"no-store, max-age=3", "", "", ""}, {"no-cache", "", exp, ""},
		{"", "", exp, now0.Format(http.TimeFormat)}, {"", "", "0", ""}, {`max-age="7"`, "10", "", ""},
		{"max-age=99999999999999999999999", "-1", "", ""}, {`,,=,"`, "x", "Mon, 02 Jan 2006", "y"},
	} {
		f.Add(s[0], s[1], s[2], s[3])
	}
	f.Fuzz(func(t *testing.T, cc, age, expires, date string) {
		h := hdr("Cache-Control", cc, "Age", age, "Expires", expires, "Date", date)
		until, ok := CacheUntil(h, now0)
		checkBounds(t, until, ok)
	})
}

// FuzzHostOf: nothing panics, and a host group name read back from a URL
// of the same scheme names the same group.
func FuzzHostOf(f *testing.F) {
	for _, s := range []string{"https://API.x/v1", "http://127.0.0.1:8080/", "http://[::1]:80/", "https://[fe80::1%25en0]:8443/",
		"ftp://x/", "http://:1/", "http://x:99999/", "http://u:p@x:0080/", "\x00", "http://%zz/"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		name, ok := HostOf(raw)
		if !ok {
			return
		}
		scheme := "http"
		if len(raw) > 0 && (raw[0] == ' ' || raw[0] == '\t') {
			return // trimmed; the scheme check below reads raw as it is
		}
		if len(raw) >= 5 && (raw[4] == 's' || raw[4] == 'S') {
			scheme = "https"
		}
		again, ok2 := HostOf(scheme + "://" + strings.ReplaceAll(name, "%", "%25") + "/") // an IPv6 zone
		if !ok2 || again != name {
			t.Fatalf("HostOf(%q) = %q, but HostOf(%s://%s/) = %q, %v", raw, name, scheme, name, again, ok2)
		}
	})
}
