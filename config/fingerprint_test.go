package config

import (
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

const fpBase = `
limits:
  g1: {concurrency: 1}
  g2: {concurrency: 2}
sources:
  - name: api
    type: http
    url: https://example.com/${P}
    method: GET
    headers: {A: "1", B: "2"}
    body: "b"
    expect_status: [200]
    max_body: 1MiB
    schedule: "@every 1m"
    timeout: 10s
    backoff: {initial: 1s, max: 15m, multiplier: 2, jitter: 0.1}
    breaker: {failures: 5, cooldown: 1m}
    error_after: 10
    limit: g1
  - name: job
    type: exec
    command: ["/bin/sh", "-c", "exit 0"]
    env: {A: "1", B: "2"}
    dir: /tmp
`

func fingerprints(t *testing.T, yaml string, p string) map[string]string {
	t.Helper()
	cfg := mustLoad(t, yaml, map[string]string{"P": p})
	m := map[string]string{}
	for _, s := range cfg.Sources {
		m[s.Name] = s.Fingerprint
		if s.Fingerprint != Fingerprint(s) {
			t.Errorf("%s: stored fingerprint differs from Fingerprint()", s.Name)
		}
	}
	return m
}

func TestFingerprintStable(t *testing.T) {
	a := fingerprints(t, fpBase, "status")
	b := fingerprints(t, fpBase, "status")
	if a["api"] != b["api"] || a["job"] != b["job"] || len(a["api"]) != 64 {
		t.Fatalf("fingerprints differ across loads: %v %v", a, b)
	}
	// Same settings written differently (order of keys, defaults made
	// explicit or left out) give the same fingerprint.
	c := fingerprints(t, `
limits:
  g1: {concurrency: 1}
  g2: {concurrency: 2}
sources:
  - {type: http, name: api, url: "https://example.com/status", headers: {B: "2", A: "1"}, body: b,
     expect_status: [200], max_body: 1048576, limit: g1}
  - {name: job, type: exec, command: [/bin/sh, -c, exit 0], env: {B: "2", A: "1"}, dir: /tmp/}
`, "")
	if c["api"] != a["api"] || c["job"] != a["job"] {
		t.Errorf("equivalent configs: %v vs %v", c, a)
	}
	// Not derived from where the file lives.
	dir := t.TempDir()
	p := filepath.Join(dir, "sub", "config.yaml")
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(fpBase), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, err := Load(p, envMap(map[string]string{"P": "status"}))
	if err != nil {
		t.Fatal(err)
	}
	if s := mustSource(t, cfg, "api"); s.Fingerprint != a["api"] {
		t.Errorf("fingerprint depends on the file location")
	}
}

func TestFingerprintChangesWithEveryField(t *testing.T) {
	base := fingerprints(t, fpBase, "status")
	changes := []struct{ name, old, new, src string }{
		{"url", "https://example.com/${P}", "https://example.com/${P}x", "api"},
		{"method", "method: GET", "method: POST", "api"},
		{"header value", `A: "1", B: "2"}` + "\n    body", `A: "1", B: "3"}` + "\n    body", "api"},
		{"header name", `{A: "1", B: "2"}` + "\n    body", `{A: "1", C: "2"}` + "\n    body", "api"},
		{"body", `body: "b"`, `body: "c"`, "api"},
		{"expect_status", "[200]", "[200, 201]", "api"},
		{"max_body", "1MiB", "2MiB", "api"},
		{"schedule", `"@every 1m"`, `"@every 2m"`, "api"},
		{"timeout", "timeout: 10s", "timeout: 11s", "api"},
		{"backoff initial", "initial: 1s", "initial: 2s", "api"},
		{"backoff max", "max: 15m", "max: 16m", "api"},
		{"backoff multiplier", "multiplier: 2,", "multiplier: 3,", "api"},
		{"backoff jitter", "jitter: 0.1", "jitter: 0.2", "api"},
		{"breaker failures", "failures: 5", "failures: 6", "api"},
		{"breaker cooldown", "cooldown: 1m", "cooldown: 2m", "api"},
		{"error_after", "error_after: 10", "error_after: 0", "api"},
		{"limit", "limit: g1", "limit: g2", "api"},
		{"name", "name: api", "name: api2", "api"},
		{"command", `"exit 0"`, `"exit 1"`, "job"},
		{"env", `env: {A: "1", B: "2"}`, `env: {A: "1", B: "x"}`, "job"},
		{"dir", "dir: /tmp", "dir: /", "job"},
	}
	seen := map[string]string{base["api"]: "base api", base["job"]: "base job"}
	for _, c := range changes {
		if !strings.Contains(fpBase, c.old) {
			t.Fatalf("%s: %q not in base", c.name, c.old)
		}
		got := fingerprints(t, strings.Replace(fpBase, c.old, c.new, 1), "status")
		fp := got[c.src]
		if c.name == "name" {
			fp = got["api2"]
		}
		if prev, dup := seen[fp]; dup {
			t.Errorf("changing %s gives the fingerprint of %s", c.name, prev)
		}
		seen[fp] = c.name
	}
	// A different value of an expanded variable changes it too.
	if got := fingerprints(t, fpBase, "other"); got["api"] == base["api"] {
		t.Error("changing an environment variable did not change the fingerprint")
	}
}

// TestFingerprintMatchesJSON checks that Fingerprint hashes what the first
// release hashed (oldFingerprint, in bench_test.go), so that the
// fingerprints stored by earlier releases stay valid: on loaded sources and
// on random ones full of characters that JSON escapes, invalid UTF-8 and
// floats of every magnitude.
func TestFingerprintMatchesJSON(t *testing.T) {
	check := func(s *Source) {
		t.Helper()
		if s.Client != nil || s.Auth != nil || s.FollowRedirects != nil || s.Deliver != nil {
			// Settings newer than that version: hashed only when set.
			old := *s
			old.Client, old.Auth, old.FollowRedirects, old.Deliver = nil, nil, nil, nil
			if Fingerprint(s) == Fingerprint(&old) {
				t.Fatalf("client settings, credentials, follow_redirects or deliver not hashed: %#v", *s)
			}
			s = &old
		}
		if !validUTF8(s) {
			// Written \udcXX per byte, where encoding/json wrote \ufffd.
			if Fingerprint(s) == oldFingerprint(s) {
				t.Fatalf("invalid UTF-8 hashed as encoding/json did: %#v", *s)
			}
			return
		}
		if s.FollowRedirects != nil && !*s.FollowRedirects {
			// follow_redirects: false is newer than the first release: it
			// must change the fingerprint.
			if Fingerprint(s) == oldFingerprint(s) {
				t.Fatalf("follow_redirects: false not hashed: %#v", *s)
			}
			return
		}
		if s.Conditional != nil && !*s.Conditional {
			// conditional: false came with change detection: it must
			// change the fingerprint too.
			if Fingerprint(s) == oldFingerprint(s) {
				t.Fatalf("conditional: false not hashed: %#v", *s)
			}
			return
		}
		if got, want := Fingerprint(s), oldFingerprint(s); got != want {
			t.Fatalf("Fingerprint differs from the encoding/json version for %#v:\n%s\n%s", *s, got, want)
		}
	}
	cfg, err := Load("../testdata/config/full.yaml", envMap(nil))
	if err != nil {
		t.Fatal(err)
	}
	for i := range cfg.Sources {
		check(cfg.Sources[i])
	}
	for _, s := range mustLoad(t, fpBase, map[string]string{"P": "st<a>&\"\\tus\u2028"}).Sources {
		check(s)
	}

	rng := rand.New(rand.NewPCG(1, 2))
	// The last pieces are invalid UTF-8; most sources use only valid ones.
	pieces := []string{"", "a", "Z9", " ", "\"", "\\", "<", ">", "&", "/", "\x00", "\x01", "\b", "\f", "\n",
		"\r", "\t", "\x1f", "\x7f", "é", "\u2028", "\u2029", "\u2027", "€", "😀", "\ufffd", "${X}", "=", ",",
		"\xff", "\xc3", "\xe2\x80", "\xed\xa0\x80"}
	npieces := len(pieces) - 4
	str := func() string {
		var b strings.Builder
		for range rng.IntN(6) {
			b.WriteString(pieces[rng.IntN(npieces)])
		}
		return b.String()
	}
	compared := 0
	floats := []float64{0, math.Copysign(0, -1), 1, 2, 1.5, 0.1, 0.2, 1e-6, 9.99e-7, 1e-7, 1.5e-9, 1e20, 1e21,
		-1e21, 1.2345678901234567e300, 5e-324, math.MaxFloat64, -3.25, 1e-100, 123456789.125}
	strMap := func() map[string]string {
		switch rng.IntN(4) {
		case 0:
			return nil
		case 1:
			return map[string]string{}
		}
		m := map[string]string{}
		for range 1 + rng.IntN(12) {
			m[str()] = str()
		}
		return m
	}
	for i := range 20000 {
		npieces = len(pieces) - 4
		if i%8 == 0 {
			npieces = len(pieces)
		}
		s := Source{
			Name: str(), Type: str(), ScheduleSpec: str(),
			Timeout:    time.Duration(rng.Int64() - rng.Int64()),
			Backoff:    Backoff{Initial: time.Duration(rng.Int64()), Max: time.Duration(-rng.Int64()), Multiplier: floats[rng.IntN(len(floats))], Jitter: rng.NormFloat64() * math.Pow(10, float64(rng.IntN(60)-30))},
			Breaker:    Breaker{Failures: rng.IntN(10) - 3, Cooldown: time.Duration(rng.IntN(1e12))},
			ErrorAfter: int(rng.Int64()), Limit: str(), URL: str(), Method: str(), Headers: strMap(), Body: str(),
			MaxBody: rng.Int64() - rng.Int64(), Env: strMap(), Dir: str(),
		}
		switch rng.IntN(3) {
		case 0:
			s.ExpectStatus = []int{}
		case 1:
			for range 1 + rng.IntN(4) {
				s.ExpectStatus = append(s.ExpectStatus, rng.IntN(1000)-100)
			}
		}
		switch rng.IntN(3) {
		case 0:
			s.Command = []string{}
		case 1:
			for range 1 + rng.IntN(4) {
				s.Command = append(s.Command, str())
			}
		}
		check(&s)
		if validUTF8(&s) {
			compared++
		}
	}
	if compared < 15000 {
		t.Errorf("only %d random sources compared", compared)
	}
	// Non-finite floats (which Load never produces) hash a fixed text.
	for _, f := range []float64{math.NaN(), math.Inf(1), math.Inf(-1)} {
		check(&Source{Backoff: Backoff{Multiplier: f}})
		check(&Source{Backoff: Backoff{Jitter: f}})
		check(&Source{Backoff: Backoff{Multiplier: f, Jitter: -f}})
	}
}

// validUTF8 reports whether every string of s is valid UTF-8.
func validUTF8(s *Source) bool {
	strs := []string{s.Name, s.Type, s.ScheduleSpec, s.Limit, s.URL, s.Method, s.Body, s.Dir}
	strs = append(strs, s.Command...)
	for _, m := range []map[string]string{s.Headers, s.Env} {
		for k, v := range m {
			strs = append(strs, k, v)
		}
	}
	for _, x := range strs {
		if !utf8.ValidString(x) {
			return false
		}
	}
	return true
}

// fpSample is a source with every field set.
func fpSample() Source {
	return Source{
		Name: "api", Type: "http", ScheduleSpec: "@every 1m", Schedule: Every{D: time.Minute},
		Timeout: 10 * time.Second, Backoff: DefaultBackoff(), Breaker: DefaultBreaker(), ErrorAfter: 10,
		Limit: "g1", URL: "https://example.com/", Method: "GET", Headers: map[string]string{"A": "1", "B": "2"},
		Body: "b", ExpectStatus: []int{200, 204}, MaxBody: 1 << 20,
		Command: []string{"/bin/sh", "-c", "exit 0"}, Env: map[string]string{"M": "q"}, Dir: "/tmp",
	}
}

// TestFingerprintCoversEveryField changes each field of Source in turn (found
// by reflection, so a field added later is covered too) and expects a new
// fingerprint each time; only Fingerprint and Schedule are left out.
func TestFingerprintCoversEveryField(t *testing.T) {
	base := fpSample()
	seen := map[string]string{Fingerprint(&base): "base"}
	var walk func(v reflect.Value, name string)
	walk = func(v reflect.Value, name string) {
		for i := range v.NumField() {
			f, fname := v.Field(i), name+v.Type().Field(i).Name
			if fname == "Fingerprint" || fname == "Schedule" || fname == "Host" || !v.Type().Field(i).IsExported() {
				continue
			}
			old := reflect.New(f.Type()).Elem()
			old.Set(f)
			switch f.Kind() {
			case reflect.Struct:
				walk(f, fname+".")
				continue
			case reflect.String:
				f.SetString(f.String() + "x")
			case reflect.Int, reflect.Int64:
				f.SetInt(f.Int() + 1)
			case reflect.Float64:
				f.SetFloat(f.Float() + 0.5)
			case reflect.Map:
				m := reflect.MakeMap(f.Type())
				for _, k := range f.MapKeys() {
					m.SetMapIndex(k, f.MapIndex(k))
				}
				m.SetMapIndex(reflect.ValueOf("new"), reflect.ValueOf("v"))
				f.Set(m)
			case reflect.Bool:
				f.SetBool(!f.Bool())
			case reflect.Pointer:
				if f.Type().Elem().Kind() == reflect.Struct { // *Client, *Auth: walk a copy
					cp := reflect.New(f.Type().Elem())
					if !f.IsNil() {
						cp.Elem().Set(f.Elem())
					}
					f.Set(cp)
					walk(cp.Elem(), fname+".")
					f.Set(old)
					continue
				}
				no := false // *bool, nil meaning true
				f.Set(reflect.ValueOf(&no))
			case reflect.Slice:
				f.Set(reflect.Append(reflect.AppendSlice(reflect.MakeSlice(f.Type(), 0, f.Len()+1), f), reflect.New(f.Type().Elem()).Elem()))
			default:
				t.Fatalf("%s: unhandled kind %s", fname, f.Kind())
			}
			fp := Fingerprint(&base)
			if prev, dup := seen[fp]; dup {
				t.Errorf("changing %s gives the fingerprint of %s", fname, prev)
			}
			seen[fp] = fname
			f.Set(old)
		}
	}
	walk(reflect.ValueOf(&base).Elem(), "")
	if len(seen) < 20 {
		t.Errorf("only %d fields changed the fingerprint", len(seen)-1)
	}
	// Schedule is derived from ScheduleSpec and not hashed.
	s := fpSample()
	s.Schedule = Every{D: time.Hour}
	if Fingerprint(&s) != Fingerprint(&base) {
		t.Error("Schedule changes the fingerprint")
	}
}

func TestFingerprintNormalisation(t *testing.T) {
	a, b := fpSample(), fpSample()
	a.Headers, a.Env, a.ExpectStatus, a.Command = nil, nil, nil, nil
	b.Headers, b.Env, b.ExpectStatus, b.Command = map[string]string{}, map[string]string{}, []int{}, []string{}
	if Fingerprint(&a) != Fingerprint(&b) {
		t.Error("nil and empty collections hash differently")
	}
	// Map contents, not insertion or iteration order, count.
	keys := []string{"k0", "k1", "k2", "k3", "k4", "k5", "k6", "k7", "k8", "k9", "K", "a", "b", "c"}
	fwd, rev := map[string]string{}, map[string]string{}
	for i, k := range keys {
		fwd[k] = "v" + k
		rev[keys[len(keys)-1-i]] = "v" + keys[len(keys)-1-i]
	}
	a, b = fpSample(), fpSample()
	a.Headers, a.Env, b.Headers, b.Env = fwd, rev, rev, fwd
	want := Fingerprint(&a)
	for range 20 {
		if Fingerprint(&a) != want || Fingerprint(&b) != want {
			t.Fatal("map order changes the fingerprint")
		}
	}
}

// TestFingerprintUnambiguous checks that values which a naive
// concatenation would confuse hash differently.
func TestFingerprintUnambiguous(t *testing.T) {
	set := func(f func(*Source)) string {
		s := fpSample()
		f(&s)
		return Fingerprint(&s)
	}
	pairs := []struct {
		name string
		a, b func(*Source)
	}{
		{"command split", func(s *Source) { s.Command = []string{"ab", "c"} }, func(s *Source) { s.Command = []string{"a", "bc"} }},
		{"command comma", func(s *Source) { s.Command = []string{"a,b"} }, func(s *Source) { s.Command = []string{"a", "b"} }},
		{"command quote", func(s *Source) { s.Command = []string{`a","b`} }, func(s *Source) { s.Command = []string{"a", "b"} }},
		{"command empty arg", func(s *Source) { s.Command = []string{"a", ""} }, func(s *Source) { s.Command = []string{"a"} }},
		{"expect_status split", func(s *Source) { s.ExpectStatus = []int{1, 23} }, func(s *Source) { s.ExpectStatus = []int{12, 3} }},
		{"header split", func(s *Source) { s.Headers = map[string]string{"ab": "c"} }, func(s *Source) { s.Headers = map[string]string{"a": "bc"} }},
		{"header injection", func(s *Source) { s.Headers = map[string]string{"a": `b","c":"d`} }, func(s *Source) { s.Headers = map[string]string{"a": "b", "c": "d"} }},
		{"env vs headers", func(s *Source) { s.Headers, s.Env = map[string]string{"A": "1"}, nil }, func(s *Source) { s.Headers, s.Env = nil, map[string]string{"A": "1"} }},
		{"field shift", func(s *Source) { s.Body, s.Dir = "x", "" }, func(s *Source) { s.Body, s.Dir = "", "x" }},
		{"name into type", func(s *Source) { s.Name, s.Type = "ab", "c" }, func(s *Source) { s.Name, s.Type = "a", "bc" }},
		{"invalid UTF-8", func(s *Source) { s.Body = "\xff" }, func(s *Source) { s.Body = "\xfe" }},
		{"invalid UTF-8 vs U+FFFD", func(s *Source) { s.Body = "\xff" }, func(s *Source) { s.Body = "\ufffd" }},
		{"invalid UTF-8 vs its escape", func(s *Source) { s.Body = "\xff" }, func(s *Source) { s.Body = `\udcff` }},
	}
	for _, p := range pairs {
		if set(p.a) == set(p.b) {
			t.Errorf("%s: same fingerprint", p.name)
		}
	}
}

func TestFingerprintRevealsNoSecret(t *testing.T) {
	s := fpSample()
	s.Headers = map[string]string{"Authorization": "Bearer abc123"}
	s.URL = "https://user:deadbeef@example.com/?k=cafe"
	fp := Fingerprint(&s)
	if len(fp) != 64 || strings.Trim(fp, "0123456789abcdef") != "" {
		t.Fatalf("fingerprint %q is not 64 hex digits", fp)
	}
	for _, secret := range []string{"abc123", "deadbeef", "cafe", "Bearer"} {
		if strings.Contains(fp, secret) {
			t.Errorf("fingerprint %s contains %q", fp, secret)
		}
	}
}

// TestFingerprintReuse checks Load's fingerprinter, which reuses its
// buffer from source to source, against Fingerprint: nothing of one source
// (0 and -0 included, and sources with invalid UTF-8 in between) carries
// over to the next.
func TestFingerprintReuse(t *testing.T) {
	var f fingerprinter
	rng := rand.New(rand.NewPCG(3, 4))
	negZero := math.Copysign(0, -1)
	for i := range 5000 {
		s := fpSample()
		s.Name = strings.Repeat("n", i%7)
		if rng.IntN(2) == 0 {
			s.Timeout = time.Duration(rng.IntN(3))
		}
		switch rng.IntN(5) {
		case 0:
			s.Backoff.Jitter = negZero
		case 1:
			s.Backoff.Jitter = 0
		case 2:
			s.Backoff.Multiplier = []float64{1, 2, 1.5}[rng.IntN(3)]
		case 3:
			s.Body = "\xff" + s.Name
		}
		if rng.IntN(3) == 0 {
			s.Breaker.Failures, s.ErrorAfter = s.ErrorAfter, s.Breaker.Failures
		}
		if fp, want := f.fingerprint(&s), Fingerprint(&s); fp != want {
			t.Fatalf("source %d: reused fingerprinter gives %s, Fingerprint %s", i, fp, want)
		}
	}
}
