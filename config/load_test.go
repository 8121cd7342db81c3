package config

import (
	"net/url"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

const apiSource = `
  - name: api
    type: http
    url: https://example.com/status
`

const jobSource = `
  - name: job
    type: exec
    command: ["true"]
`

func TestLoadFullFixture(t *testing.T) {
	cfg, err := Load("../testdata/config/full.yaml", envMap(nil))
	if err != nil {
		t.Fatalf("full.yaml: %v", err)
	}
	abs, _ := filepath.Abs("../testdata/config/full.yaml")
	if cfg.Path != abs {
		t.Errorf("Path = %q, want %q", cfg.Path, abs)
	}
	if want := filepath.Join(filepath.Dir(abs), "pacer.db"); cfg.Store != want {
		t.Errorf("Store = %q, want %q", cfg.Store, want)
	}
	if cfg.Concurrency != 8 || cfg.ShutdownTimeout != 45*time.Second || cfg.History.Keep != 50 {
		t.Errorf("top level: %+v", cfg)
	}
	if cfg.Admin != (Admin{Listen: "127.0.0.1:9191"}) || cfg.Log != (Log{Level: "debug", Format: "json"}) {
		t.Errorf("admin/log: %+v %+v", cfg.Admin, cfg.Log)
	}
	wantLimits := map[string]Limit{
		"partner-api": {Concurrency: 4, Rate: 10, Burst: 2},
		"slow":        {Rate: 0.5, Burst: 1},
	}
	if !reflect.DeepEqual(cfg.Limits, wantLimits) {
		t.Errorf("Limits = %+v", cfg.Limits)
	}
	if len(cfg.Sources) != 7 || !slices.Equal(cfg.SourceFiles, []string{filepath.Join("sources.d", "team-a.yaml")}) {
		t.Fatalf("got %d sources from %q", len(cfg.Sources), cfg.SourceFiles)
	}
	if ta := mustSource(t, cfg, "team-a-api"); ta.Headers["X-Key"] != "partner-key-0123456789" || !slices.Contains(cfg.Secrets, "partner-key-0123456789") {
		t.Errorf("team-a-api (sources.d/team-a.yaml): headers %q", ta.Headers)
	}
	if tj := mustSource(t, cfg, "team-a-job"); tj.ScheduleSpec != "@hourly" || tj.Timeout != 5*time.Second {
		t.Errorf("team-a-job (sources.d/team-a.yaml) does not inherit defaults: %+v", tj)
	}
	sp := mustSource(t, cfg, "status-page")
	if sp.Method != "GET" || sp.MaxBody != 1<<20 || !slices.Equal(sp.ExpectStatus, []int{200, 204}) || sp.Limit != "partner-api" {
		t.Errorf("status-page: %+v", sp)
	}
	tr := mustSource(t, cfg, "tokyo-report")
	if tr.Backoff != (Backoff{Initial: 2 * time.Second, Max: time.Hour, Multiplier: 1.5, Jitter: 0.2}) {
		t.Errorf("tokyo-report backoff = %+v", tr.Backoff)
	}
	if tr.Breaker != (Breaker{Failures: 0, Cooldown: 2 * time.Minute}) || tr.ErrorAfter != 0 || tr.MaxBody != DefaultMaxBody {
		t.Errorf("tokyo-report: %+v", tr)
	}
	bc := mustSource(t, cfg, "backup-check")
	if bc.Command[0] != "/bin/sh" || bc.Dir != "/tmp" || bc.Env["MODE"] != "quick" || bc.Method != "" || bc.MaxBody != 0 {
		t.Errorf("backup-check: %+v", bc)
	}
	tk := mustSource(t, cfg, "true.ok")
	if !filepath.IsAbs(tk.Command[0]) || filepath.Base(tk.Command[0]) != "true" {
		t.Errorf("true.ok command = %q", tk.Command)
	}
	for _, s := range cfg.Sources {
		if s.Schedule == nil || len(s.Fingerprint) != 64 {
			t.Errorf("%s: schedule %v fingerprint %q", s.Name, s.Schedule, s.Fingerprint)
		}
	}
}

func TestDefaultsApplied(t *testing.T) {
	dir := t.TempDir()
	cfg, ps := loadIn(t, dir, "sources:"+apiSource+jobSource, nil)
	if ps != nil {
		t.Fatal(ps)
	}
	if cfg.Store != filepath.Join(dir, "pacer.db") || cfg.Concurrency != 16 || cfg.ShutdownTimeout != 30*time.Second ||
		cfg.Admin != (Admin{Listen: "127.0.0.1:9090"}) || cfg.Log != (Log{Level: "info", Format: "text"}) || cfg.History.Keep != 100 {
		t.Errorf("defaults not applied: %+v", cfg)
	}
	api := mustSource(t, cfg, "api")
	if api.ScheduleSpec != "@every 1m" || api.Schedule != (Every{D: time.Minute}) || api.Timeout != 10*time.Second ||
		api.Backoff != DefaultBackoff() || api.Breaker != DefaultBreaker() || api.ErrorAfter != 10 ||
		api.Method != "GET" || api.MaxBody != 10<<20 || api.ExpectStatus != nil {
		t.Errorf("api defaults: %+v", api)
	}
	if cfg.Secrets != nil {
		t.Errorf("Secrets = %q, want none", cfg.Secrets)
	}

	// A file without sources is valid; an empty one is not (see TestEmptyConfig).
	cfg, ps = loadIn(t, t.TempDir(), "concurrency: 2\n", nil)
	if ps != nil || len(cfg.Sources) != 0 {
		t.Fatalf("file without sources: %v %v", cfg, ps)
	}
}

func TestDefaultsInheritanceAndOverride(t *testing.T) {
	cfg := mustLoad(t, `
defaults:
  schedule: "*/2 * * * *"
  timeout: 3s
  backoff: {max: 5m, jitter: 0}
  breaker: {cooldown: 30s}
  error_after: 4
sources:
  - name: inherit
    type: http
    url: https://example.com/
  - name: override
    type: http
    url: https://example.com/
    schedule: "@every 5s"
    timeout: 1s
    backoff: {initial: 2s}
    breaker: {failures: 0}
    error_after: 0
`, nil)
	in := mustSource(t, cfg, "inherit")
	if in.ScheduleSpec != "*/2 * * * *" || in.Timeout != 3*time.Second || in.ErrorAfter != 4 {
		t.Errorf("inherit: %+v", in)
	}
	// defaults.backoff partially given: only max and jitter change.
	if want := (Backoff{Initial: time.Second, Max: 5 * time.Minute, Multiplier: 2, Jitter: 0}); in.Backoff != want {
		t.Errorf("inherit backoff = %+v, want %+v", in.Backoff, want)
	}
	if want := (Breaker{Failures: 5, Cooldown: 30 * time.Second}); in.Breaker != want {
		t.Errorf("inherit breaker = %+v, want %+v", in.Breaker, want)
	}
	ov := mustSource(t, cfg, "override")
	if ov.ScheduleSpec != "@every 5s" || ov.Schedule != (Every{D: 5 * time.Second}) || ov.Timeout != time.Second || ov.ErrorAfter != 0 {
		t.Errorf("override: %+v", ov)
	}
	// Per-source partial backoff sits on top of defaults, not of built-ins.
	if want := (Backoff{Initial: 2 * time.Second, Max: 5 * time.Minute, Multiplier: 2, Jitter: 0}); ov.Backoff != want {
		t.Errorf("override backoff = %+v, want %+v", ov.Backoff, want)
	}
	if want := (Breaker{Failures: 0, Cooldown: 30 * time.Second}); ov.Breaker != want {
		t.Errorf("override breaker = %+v, want %+v", ov.Breaker, want)
	}
}

func TestAdminListenAbsentVersusEmpty(t *testing.T) {
	if c := mustLoad(t, "admin: {token_file: \"\"}\n", nil); c.Admin.Listen != DefaultAdminListen {
		t.Errorf("absent listen = %q", c.Admin.Listen)
	}
	if c := mustLoad(t, "admin: {listen: \"\"}\n", nil); c.Admin.Listen != "" {
		t.Errorf("empty listen = %q, want disabled", c.Admin.Listen)
	}
	if c := mustLoad(t, "admin: {listen: \"localhost:8080\"}\n", nil); c.Admin.Listen != "localhost:8080" {
		t.Errorf("listen = %q", c.Admin.Listen)
	}
}

func TestRelativePaths(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, dir, "bin/check.sh", "#!/bin/sh\nexit 0\n", 0o755)
	writeFile(t, dir, "secrets/token", "\n  tok-12345 \n", 0o600)
	if err := os.Mkdir(filepath.Join(dir, "work"), 0o755); err != nil {
		t.Fatal(err)
	}
	cfg, ps := loadIn(t, dir, `
store: data/pacer.db
admin: {token_file: secrets/token}
sources:
  - name: job
    type: exec
    command: [./bin/check.sh, arg]
    dir: work
  - name: sh
    type: exec
    command: [sh, -c, "exit 0"]
`, nil)
	if ps != nil {
		t.Fatal(ps)
	}
	if cfg.Store != filepath.Join(dir, "data/pacer.db") {
		t.Errorf("Store = %q", cfg.Store)
	}
	if cfg.Admin.TokenFile != filepath.Join(dir, "secrets/token") {
		t.Errorf("TokenFile = %q", cfg.Admin.TokenFile)
	}
	if !slices.Contains(cfg.Secrets, "tok-12345") {
		t.Errorf("admin token not in Secrets")
	}
	job := mustSource(t, cfg, "job")
	if !slices.Equal(job.Command, []string{filepath.Join(dir, "bin/check.sh"), "arg"}) || job.Dir != filepath.Join(dir, "work") {
		t.Errorf("job: %q %q", job.Command, job.Dir)
	}
	sh := mustSource(t, cfg, "sh")
	if !filepath.IsAbs(sh.Command[0]) || filepath.Base(sh.Command[0]) != "sh" {
		t.Errorf("sh command = %q", sh.Command)
	}
	// The config can be loaded by a relative path from elsewhere too.
	t.Chdir(dir)
	cfg2, err := Load("config.yaml", envMap(nil))
	if err != nil {
		t.Fatal(err)
	}
	if cfg2.Path != filepath.Join(dir, "config.yaml") || cfg2.Store != cfg.Store {
		t.Errorf("Path = %q Store = %q", cfg2.Path, cfg2.Store)
	}
}

func TestPostgresStoreKeptVerbatim(t *testing.T) {
	for _, s := range []string{"postgres://u@db/pacer?sslmode=disable", "postgresql://db/pacer"} {
		c := mustLoad(t, "store: "+s+"\n", nil)
		if c.Store != s {
			t.Errorf("Store = %q, want %q", c.Store, s)
		}
	}
	c := mustLoad(t, "store: postgres://u:${PGPASS}@db/pacer\n", map[string]string{"PGPASS": "pw"})
	if c.Store != "postgres://u:pw@db/pacer" || !slices.Contains(c.Secrets, "pw") {
		t.Errorf("Store = %q secrets = %q", c.Store, c.Secrets)
	}
}

func TestExpansion(t *testing.T) {
	env := map[string]string{
		"TOKEN":   "t0k3n",
		"API_KEY": "k/y&1",
		"HOST":    "api.example.com",
		"EMPTY":   "",
		"MODE":    "fast",
		"DB":      "x.db",
	}
	cfg := mustLoad(t, `
store: ${DB}
sources:
  - name: api
    type: http
    url: https://${HOST}/v1?key=${API_KEY}&empty=${EMPTY}
    headers:
      Authorization: "Bearer ${TOKEN}"
      Accept: text/plain
    body: "price: $$5, literal $HOME and $${TOKEN}"
  - name: job
    type: exec
    command: [sh, -c, "echo ${MODE}"]
    env: {MODE: "${MODE}-x"}
`, env)
	api := mustSource(t, cfg, "api")
	if api.URL != "https://api.example.com/v1?key=k/y&1&empty=" {
		t.Errorf("URL = %q", api.URL)
	}
	if api.Headers["Authorization"] != "Bearer t0k3n" {
		t.Errorf("Authorization = %q", api.Headers["Authorization"])
	}
	if api.Body != "price: $5, literal $HOME and ${TOKEN}" {
		t.Errorf("Body = %q", api.Body)
	}
	job := mustSource(t, cfg, "job")
	if job.Command[2] != "echo fast" || job.Env["MODE"] != "fast-x" {
		t.Errorf("job = %q %q", job.Command, job.Env)
	}
	if filepath.Base(cfg.Store) != "x.db" {
		t.Errorf("Store = %q", cfg.Store)
	}
	for _, want := range []string{"t0k3n", "k/y&1", "api.example.com", "fast", "x.db", "Bearer t0k3n", "text/plain"} {
		if !slices.Contains(cfg.Secrets, want) {
			t.Errorf("Secrets %q lacks %q", cfg.Secrets, want)
		}
	}
	if slices.Contains(cfg.Secrets, "") {
		t.Errorf("Secrets contains an empty string")
	}
	red := cfg.Redactor()
	if got := red.Redact(api.URL); strings.Contains(got, "k/y&1") || strings.Contains(got, url.QueryEscape("k/y&1")) {
		t.Errorf("redacted URL %q still shows the key", got)
	}
}

func TestExpansionProblems(t *testing.T) {
	ps := mustFail(t, `
sources:
  - name: x
    type: http
    url: https://example.com/
    headers: {Authorization: "Bearer ${STATUS_TOKEN}"}
    body: "${1BAD} ${UNCLOSED"
`, nil)
	want := "sources[name=x].headers.Authorization: environment variable STATUS_TOKEN is not set"
	if !slices.ContainsFunc(ps, func(p Problem) bool { return p.String() == want }) {
		t.Errorf("want %q in\n%v", want, ps)
	}
	if !hasPrefix(ps, "sources[name=x].body: invalid environment variable name") || !hasPrefix(ps, "sources[name=x].body: unterminated") {
		t.Errorf("body problems missing:\n%v", ps)
	}
}

func TestSecretsNeverInProblems(t *testing.T) {
	const marker = `M4RK"ER s3cret/+?&`
	const literalHeader = "LiteralHeaderValue!"
	dir := t.TempDir()
	writeFile(t, dir, "tok", "T0KEN-MARKER\n", 0o600)
	_, ps := loadIn(t, dir, `
store: ""
admin: {listen: "${S}", token_file: tok}
log: {level: "${S}", format: "x${S}"}
concurrency: "${S}"
shutdown_timeout: "${S}"
history: {keep: "${S}"}
defaults:
  schedule: "${S}"
  timeout: "${S}"
  backoff: {initial: "${S}", multiplier: "${S}"}
limits:
  g: {rate: "${S}", concurrency: "${S}"}
sources:
  - name: "${S}"
    type: http
    url: "ftp://${S}/x"
  - name: api
    type: "${S}"
  - name: web
    type: http
    url: "https://exa mple.com/${S}"
    method: "`+literalHeader+`"
    headers: {X-Key: "`+literalHeader+`", X-Other: "${S}\n"}
    max_body: "${S}"
    expect_status: ["${S}"]
    limit: "${S}"
    schedule: "T0KEN-MARKER"
  - name: job
    type: exec
    command: ["${S}"]
    dir: "${S}"
    env: {A: "${S}"}
  - name: job2
    type: exec
    command: ["./${S}"]
`, map[string]string{"S": marker})
	if len(ps) < 15 {
		t.Fatalf("want many problems, got:\n%v", ps)
	}
	forms := []string{marker, strconv.Quote(marker), url.QueryEscape(marker), url.PathEscape(marker), "s3cret",
		literalHeader, strconv.Quote(literalHeader), "T0KEN-MARKER"}
	for _, p := range ps {
		for _, f := range forms {
			if strings.Contains(p.String(), f) {
				t.Errorf("problem leaks %q: %s", f, p)
			}
		}
	}
	if strings.Contains(ps.Error(), "s3cret") {
		t.Errorf("Error() leaks the secret")
	}
}

func TestAllProblemsReported(t *testing.T) {
	ps := mustFail(t, `
concurrency: 0
log: {level: loud}
defaults:
  backoff: {jitter: 1.5}
limits:
  partner-api: {rate: 10/week}
sources:
  - name: api
    type: http
    url: https://example.com/
    schedule: "0 0 30 2 *"
  - name: Bad
    type: exec
`, nil)
	want := []string{
		"concurrency: ",
		"log.level: ",
		"defaults.backoff.jitter: ",
		"limits.partner-api.rate: ",
		"sources[name=api].schedule: ",
		"sources[1].name: ",
		"sources[1].command: ",
	}
	for _, w := range want {
		if !hasPrefix(ps, w) {
			t.Errorf("missing %q in\n%v", w, ps)
		}
	}
	if len(ps) != len(want) {
		t.Errorf("got %d problems, want %d:\n%v", len(ps), len(want), ps)
	}
}

func TestUnknownKeysEverywhere(t *testing.T) {
	ps := mustFail(t, `
concurrensy: 3
admin: {lisen: ":1"}
log: {lvl: info}
history: {kep: 1}
defaults:
  backof: {}
  backoff: {intial: 1s}
  breaker: {fail: 1}
limits:
  g: {rate: 1/s, rat: 2}
sources:
  - name: api
    type: http
    url: https://example.com/
    scheduel: "@hourly"
    backoff: {jiter: 0.5}
    breaker: {cool: 1s}
  - type: http
    url: https://example.com/
    nmae: x
`, nil)
	want := []string{
		"concurrensy: unknown key; did you mean concurrency?",
		"admin.lisen: unknown key; did you mean listen?",
		"log.lvl: unknown key; did you mean level?",
		"history.kep: unknown key; did you mean keep?",
		"defaults.backof: unknown key; did you mean backoff?",
		"defaults.backoff.intial: unknown key; did you mean initial?",
		"defaults.breaker.fail: unknown key",
		"limits.g.rat: unknown key; did you mean rate?",
		"sources[name=api].scheduel: unknown key; did you mean schedule?",
		"sources[name=api].backoff.jiter: unknown key; did you mean jitter?",
		"sources[name=api].breaker.cool: unknown key",
		"sources[1].nmae: unknown key; did you mean name?",
		"sources[1].name: required",
	}
	var got []string
	for _, p := range ps {
		got = append(got, p.String())
	}
	for _, w := range want {
		if !slices.Contains(got, w) {
			t.Errorf("missing %q in\n%s", w, strings.Join(got, "\n"))
		}
	}
	if len(got) != len(want) {
		t.Errorf("got %d problems, want %d:\n%s", len(got), len(want), strings.Join(got, "\n"))
	}
}

func TestInvalidConfigs(t *testing.T) {
	long := strings.Repeat("a", 201)
	cases := []struct {
		name   string
		yaml   string
		setup  func(t *testing.T, dir string)
		prefix string
	}{
		{"concurrency zero", "concurrency: 0\n", nil, "concurrency: "},
		{"concurrency not int", "concurrency: abc\n", nil, "concurrency: "},
		{"concurrency list", "concurrency: [1]\n", nil, "concurrency: expected an integer, got a list"},
		{"shutdown zero", "shutdown_timeout: 0s\n", nil, "shutdown_timeout: "},
		{"shutdown no unit", "shutdown_timeout: 30\n", nil, "shutdown_timeout: "},
		{"store empty", "store: \"\"\n", nil, "store: "},
		{"admin list", "admin: [a]\n", nil, "admin: expected a mapping, got a list"},
		{"admin listen", "admin: {listen: nonsense}\n", nil, "admin.listen: "},
		{"admin port", "admin: {listen: \"127.0.0.1:99999\"}\n", nil, "admin.listen: "},
		{"token file missing", "admin: {token_file: nope.txt}\n", nil, "admin.token_file: "},
		{"token file empty", "admin: {token_file: tok}\n", func(t *testing.T, dir string) { writeFile(t, dir, "tok", " \n\t", 0o600) }, "admin.token_file: "},
		{"log level", "log: {level: verbose}\n", nil, "log.level: "},
		{"log format", "log: {format: xml}\n", nil, "log.format: "},
		{"history keep", "history: {keep: 0}\n", nil, "history.keep: "},
		{"defaults timeout", "defaults: {timeout: -1s}\n", nil, "defaults.timeout: "},
		{"defaults schedule", "defaults: {schedule: bogus}\n", nil, "defaults.schedule: "},
		{"defaults jitter", "defaults: {backoff: {jitter: 1}}\n", nil, "defaults.backoff.jitter: "},
		{"defaults jitter negative", "defaults: {backoff: {jitter: -0.1}}\n", nil, "defaults.backoff.jitter: "},
		{"defaults multiplier", "defaults: {backoff: {multiplier: 0.5}}\n", nil, "defaults.backoff.multiplier: "},
		{"defaults max<initial", "defaults: {backoff: {initial: 1h, max: 1m}}\n", nil, "defaults.backoff.max: "},
		{"defaults backoff initial zero", "defaults: {backoff: {initial: 0s}}\n", nil, "defaults.backoff.initial: "},
		{"defaults breaker failures", "defaults: {breaker: {failures: -1}}\n", nil, "defaults.breaker.failures: "},
		{"defaults breaker cooldown", "defaults: {breaker: {cooldown: 0s}}\n", nil, "defaults.breaker.cooldown: "},
		{"defaults error_after", "defaults: {error_after: -1}\n", nil, "defaults.error_after: "},
		{"defaults limit not allowed", "defaults: {limit: g}\n", nil, "defaults.limit: unknown key"},
		{"limit rate unit", "limits: {partner-api: {rate: 10/d}}\n", nil, "limits.partner-api.rate: "},
		{"limit rate zero", "limits: {partner-api: {rate: 0/s}}\n", nil, "limits.partner-api.rate: "},
		{"limit empty", "limits: {g: {burst: 2}}\n", nil, "limits.g: "},
		{"limit concurrency", "limits: {g: {concurrency: 0}}\n", nil, "limits.g.concurrency: "},
		{"limit burst", "limits: {g: {rate: 1/s, burst: 0}}\n", nil, "limits.g.burst: "},
		{"limit name", "limits: {Bad_Name: {rate: 1/s}}\n", nil, "limits.Bad_Name: "},
		{"sources not list", "sources: {a: 1}\n", nil, "sources: expected a list, got a mapping"},
		{"source not mapping", "sources: [api]\n", nil, "sources[0]: expected a mapping"},
		{"name missing", "sources:\n  - {type: http, url: \"https://e.com\"}\n", nil, "sources[0].name: required"},
		{"name invalid", "sources:\n  - {name: Bad Name, type: http, url: \"https://e.com\"}\n", nil, "sources[0].name: "},
		{"name too long", "sources:\n  - {name: " + long + ", type: http, url: \"https://e.com\"}\n", nil, "sources[0].name: "},
		{"name duplicate", "sources:" + apiSource + apiSource, nil, "sources[1].name: duplicate name"},
		{"type missing", "sources:\n  - {name: api, url: \"https://e.com\"}\n", nil, "sources[name=api].type: required"},
		{"type invalid", "sources:\n  - {name: api, type: ftp}\n", nil, "sources[name=api].type: "},
		{"url missing", "sources:\n  - {name: api, type: http}\n", nil, "sources[name=api].url: required"},
		{"url scheme", "sources:\n  - {name: api, type: http, url: \"ftp://e.com/x\"}\n", nil, "sources[name=api].url: "},
		{"url host", "sources:\n  - {name: api, type: http, url: \"https:///x\"}\n", nil, "sources[name=api].url: "},
		{"url not url", "sources:\n  - {name: api, type: http, url: \"http://[::1\"}\n", nil, "sources[name=api].url: "},
		{"method", "sources:" + apiSource + "    method: \"GE T\"\n", nil, "sources[name=api].method: "},
		{"header name", "sources:" + apiSource + "    headers: {\"Bad Name\": x}\n", nil, "sources[name=api].headers.Bad Name: "},
		{"headers list", "sources:" + apiSource + "    headers: [a]\n", nil, "sources[name=api].headers: expected a mapping"},
		{"expect_status range", "sources:" + apiSource + "    expect_status: [200, 700]\n", nil, "sources[name=api].expect_status[1]: "},
		{"expect_status type", "sources:" + apiSource + "    expect_status: {code: 200}\n", nil, "sources[name=api].expect_status: expected a list"},
		{"max_body zero", "sources:" + apiSource + "    max_body: 0\n", nil, "sources[name=api].max_body: "},
		{"max_body unit", "sources:" + apiSource + "    max_body: 10XB\n", nil, "sources[name=api].max_body: "},
		{"schedule never", "sources:" + apiSource + "    schedule: \"0 0 30 2 *\"\n", nil, "sources[name=api].schedule: invalid schedule \"0 0 30 2 *\": never fires"},
		{"schedule too fast", "sources:" + apiSource + "    schedule: \"@every 10ms\"\n", nil, "sources[name=api].schedule: "},
		{"schedule tz", "sources:" + apiSource + "    schedule: \"CRON_TZ=Mars/Olympus 0 * * * *\"\n", nil, "sources[name=api].schedule: "},
		{"timeout no unit", "sources:" + apiSource + "    timeout: 10\n", nil, "sources[name=api].timeout: "},
		{"source partial backoff", "sources:" + apiSource + "    backoff: {initial: 1h}\n", nil, "sources[name=api].backoff.initial: "},
		{"source breaker type", "sources:" + apiSource + "    breaker: 5\n", nil, "sources[name=api].breaker: expected a mapping"},
		{"limit unknown", "sources:" + apiSource + "    limit: nope\n", nil, "sources[name=api].limit: "},
		{"exec key on http", "sources:" + apiSource + "    command: [\"true\"]\n", nil, "sources[name=api].command: not allowed for type http"},
		{"http key on exec", "sources:" + jobSource + "    url: https://e.com\n", nil, "sources[name=job].url: not allowed for type exec"},
		{"command missing", "sources:\n  - {name: job, type: exec}\n", nil, "sources[name=job].command: required"},
		{"command empty", "sources:\n  - {name: job, type: exec, command: []}\n", nil, "sources[name=job].command: "},
		{"command string", "sources:\n  - {name: job, type: exec, command: \"true\"}\n", nil, "sources[name=job].command: expected a list"},
		{"command not in PATH", "sources:\n  - {name: job, type: exec, command: [no-such-cmd-xyz]}\n", nil, "sources[name=job].command[0]: "},
		{"command relative missing", "sources:\n  - {name: job, type: exec, command: [./missing.sh]}\n", nil, "sources[name=job].command[0]: "},
		{"command not executable", "sources:\n  - {name: job, type: exec, command: [./script.sh]}\n",
			func(t *testing.T, dir string) { writeFile(t, dir, "script.sh", "#!/bin/sh\n", 0o644) }, "sources[name=job].command[0]: "},
		{"command directory", "sources:\n  - {name: job, type: exec, command: [/tmp]}\n", nil, "sources[name=job].command[0]: "},
		{"dir missing", "sources:" + jobSource + "    dir: nowhere\n", nil, "sources[name=job].dir: "},
		{"dir is file", "sources:" + jobSource + "    dir: f\n", func(t *testing.T, dir string) { writeFile(t, dir, "f", "", 0o644) }, "sources[name=job].dir: "},
		{"env type", "sources:" + jobSource + "    env: [A]\n", nil, "sources[name=job].env: expected a mapping"},
		{"unset var", "store: ${NOPE}\n", nil, "store: environment variable NOPE is not set"},
		{"duplicate key", "concurrency: 1\nconcurrency: 2\n", nil, "concurrency: duplicate key"},
		{"top-level list", "- a\n- b\n", nil, "config.yaml: "},
		{"syntax error", "concurrency: 1\nlog:\n  level: [\n", nil, "config.yaml:"},
		{"two documents", "concurrency: 1\n---\nconcurrency: 2\n", nil, "config.yaml:2: "},
	}
	if len(cases) < 25 {
		t.Fatal("too few cases")
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			if tc.setup != nil {
				tc.setup(t, dir)
			}
			p := writeFile(t, dir, "config.yaml", tc.yaml, 0o644)
			// Load by the plain file name so that file-level paths are predictable.
			t.Chdir(dir)
			cfg, err := Load(filepath.Base(p), envMap(nil))
			_, ps := checkResult(t, cfg, err)
			if ps == nil {
				t.Fatalf("loaded without problems:\n%s", tc.yaml)
			}
			if !hasPrefix(ps, tc.prefix) {
				t.Errorf("want a problem starting %q, got:\n%v", tc.prefix, ps)
			}
		})
	}
}

func TestMissingFile(t *testing.T) {
	p := filepath.Join(t.TempDir(), "nope.yaml")
	cfg, err := Load(p, envMap(nil))
	_, ps := checkResult(t, cfg, err)
	if len(ps) != 1 || ps[0].Path != p || !strings.Contains(ps[0].Msg, "no such file") {
		t.Errorf("got %v", ps)
	}
	cfg, err = Load(t.TempDir(), envMap(nil))
	if _, ps := checkResult(t, cfg, err); len(ps) != 1 {
		t.Errorf("directory: %v", ps)
	}
}

func TestSyntaxErrorIsOneProblemWithLine(t *testing.T) {
	dir := t.TempDir()
	p := writeFile(t, dir, "c.yaml", "concurrency: 1\nsources:\n  - name: a\n   type: http\n", 0o644)
	cfg, err := Load(p, envMap(nil))
	_, ps := checkResult(t, cfg, err)
	if len(ps) != 1 || !strings.HasPrefix(ps[0].Path, p+":") {
		t.Fatalf("got %v", ps)
	}
	if _, err := strconv.Atoi(strings.TrimPrefix(ps[0].Path, p+":")); err != nil {
		t.Errorf("path %q does not end in a line number", ps[0].Path)
	}
}

func TestMergeKeysAndAnchors(t *testing.T) {
	cfg := mustLoad(t, `
sources:
  - &base {name: a, type: http, url: "https://example.com/", timeout: 3s, headers: {X: "1"}}
  - <<: *base
    name: b
    timeout: 4s
`, nil)
	a, b := mustSource(t, cfg, "a"), mustSource(t, cfg, "b")
	if b.URL != a.URL || b.Timeout != 4*time.Second || b.Headers["X"] != "1" {
		t.Errorf("b = %+v", b)
	}
}

func TestConfigSourceLookup(t *testing.T) {
	cfg := mustLoad(t, "sources:"+apiSource+jobSource, nil)
	if s, ok := cfg.Source("job"); !ok || s != cfg.Sources[1] {
		t.Errorf("Source(job) = %v %v", s, ok)
	}
	if _, ok := cfg.Source("nope"); ok {
		t.Error("Source(nope) found")
	}
	// A Config built by hand (no index) still works.
	hand := &Config{Sources: []*Source{{Name: "x"}}}
	if _, ok := hand.Source("x"); !ok {
		t.Error("hand-built Source(x) not found")
	}
	var nilCfg *Config
	if _, ok := nilCfg.Source("x"); ok {
		t.Error("nil config found a source")
	}
	if nilCfg.Redactor().Redact("a") != "a" {
		t.Error("nil config redactor changed text")
	}
}

func TestProblemsError(t *testing.T) {
	ps := Problems{{Path: "a", Msg: "x"}, {Path: "b.c", Msg: "y"}}
	if got := ps.Error(); got != "a: x\nb.c: y" {
		t.Errorf("Error() = %q", got)
	}
	if ps[1].String() != "b.c: y" {
		t.Errorf("String() = %q", ps[1].String())
	}
}

// TestNoPanicOnOddInput loads inputs that have made YAML parsers and
// loaders panic or loop: none may panic, not even in the parser, whose
// panics parseYAML turns into a problem.
func TestNoPanicOnOddInput(t *testing.T) {
	inputs := []string{
		"- [", "!!binary x", "a: &a [*a]", "a: *b", "<<: 5\n", "<<: [1, 2]\n",
		"sources: [[]]\n", "sources: [{name: [1]}]\n", "sources: [{<<: {name: x}}]\n",
		"? [a, b]\n: c\n", "concurrency: 99999999999999999999999\n", "\t\tbad",
		"sources:\n  - {name: a, type: exec, command: [null]}\n",
		"sources:\n  - {name: a, type: exec, command: [[x]]}\n",
		"sources:\n  - {name: a, type: http, url: \"http://h\", schedule: \"TZ=\"}\n",
		"sources:\n  - {name: a, type: http, url: \"http://h\", schedule: \"CRON_TZ=UTC\"}\n",
		"defaults: {backoff: {multiplier: .nan, jitter: .inf}}\n",
		"limits: {g: {rate: 1e308/s}}\n", "admin: {listen: ~}\n", "log: ~\n", "~\n", "---\n", "\"just a string\"\n",
	}
	for _, in := range inputs {
		// loadIn fails the test unless Load returns exactly one of a
		// Config and Problems; a panic of the YAML parser is a problem
		// that says so.
		_, ps := loadIn(t, t.TempDir(), in, nil)
		for _, p := range ps {
			if strings.Contains(p.Msg, parserPanic) || strings.Contains(p.Msg, "panic") {
				t.Errorf("input %q: %s", in, p)
			}
		}
	}
}

// A non-loopback admin.listen without admin.token_file is a problem that
// validate reports, like any other (section 1), not only a refusal of run.
func TestAdminNonLoopbackNeedsToken(t *testing.T) {
	for _, listen := range []string{"0.0.0.0:9090", ":9090", "[::]:9090", "example.invalid:9090"} {
		ps := mustFail(t, "admin: {listen: \""+listen+"\"}\n", nil)
		if !strings.Contains(ps.Error(), "admin.listen: "+listen+" is not a loopback address") {
			t.Errorf("listen %s without a token: %v", listen, ps)
		}
	}
	for _, listen := range []string{"127.0.0.1:9090", "[::1]:9090", "localhost:9090"} {
		if c := mustLoad(t, "admin: {listen: \""+listen+"\"}\n", nil); c.Admin.Listen != listen {
			t.Errorf("loopback listen %s: got %q", listen, c.Admin.Listen)
		}
	}
}
