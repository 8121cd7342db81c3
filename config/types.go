// Package config loads, expands and validates pacer's YAML configuration.
//
// Load returns either a fully resolved *Config (defaults applied to every
// source, relative paths made absolute, ${VAR} expanded, schedules parsed)
// or a Problems error that lists every problem found, each prefixed with the
// path of the offending key ("sources[3].schedule: ...").
package config

import (
	"time"

	"github.com/pacer-dev/pacer/breaker"
	"github.com/pacer-dev/pacer/conditions"
)

// Config is the resolved configuration. Nothing in it needs further
// defaulting: every Source carries its effective settings.
type Config struct {
	// Path is the absolute path of the file that was loaded.
	Path string
	// Store is an absolute SQLite file path or a postgres:// URL.
	Store           string
	Concurrency     int
	ShutdownTimeout time.Duration
	Admin           Admin
	Log             Log
	History         History
	// Cluster is the cluster section (contract section 8).
	Cluster Cluster
	// Notify is the notify section (contract section 10); nil without one.
	Notify *Notify
	// Maintenance lists the maintenance windows (contract 15.1).
	Maintenance []*Maintenance
	// Limits maps a group name to its limits.
	Limits map[string]Limit
	// Hosts is the hosts section (contract section 13).
	Hosts Hosts
	// Sources are the sources in the order of the file(s). They are never
	// written once loaded: a Load with Options.Previous shares the
	// previous config's pointer for every source it reuses, so that a
	// reload of 100,000 sources with one changed allocates one new source
	// and a slice of pointers, not a copy of every source.
	Sources []*Source
	// SourceFiles lists the files that source_files matched, in the order
	// they were read (sorted), relative to the config file's directory
	// (absolute when outside it).
	SourceFiles []string
	// Notes are remarks on a valid config that are not problems, such as
	// a source_files pattern that matches no file; the daemon and
	// validate may log them as warnings.
	Notes []string
	// Secrets lists every value that must never be shown: values that came
	// from ${VAR} or ${file:PATH} expansion, every header value, the password in the user
	// info of a source's URL or of a PostgreSQL store URL and the admin
	// token (Load reads admin.token_file).
	Secrets []string

	// masks are the strings Load built with secrets in them (see Redactor).
	masks []masked

	// idx indexes Sources by name (Source falls back to a scan when it is
	// missing or stale) and the maintenance windows by source (set by
	// Load).
	idx indexes
	// fast is what the next Load may reuse of this one (Options.Previous,
	// fastload.go), or nil.
	fast *fastCache
	// exprs compiled the sources' conditions; the next Load reuses what
	// it compiled (Options.Previous).
	exprs *conditions.Compiler
}

// indexes are a Config's lookups, built by Load.
type indexes struct {
	byName map[string]int
	maint  map[string][]*Maintenance
}

// Admin configures the admin HTTP API.
type Admin struct {
	// Listen is host:port, or "" to disable the API.
	Listen string
	// TokenFile is an absolute path, or "" for no token.
	TokenFile string
}

// Log configures logging.
type Log struct {
	Level  string // debug | info | warn | error
	Format string // text | json
}

// History configures poll history retention.
type History struct {
	Keep int // poll records kept per source, >= 1
}

// Limit is a named group of sources sharing a concurrency cap and a start rate.
type Limit struct {
	// Concurrency caps the group's polls in flight; 0 means no cap.
	Concurrency int
	// Rate is starts per second; 0 means no rate limit.
	Rate float64
	// Burst is the token bucket size; defaults to 1.
	Burst int
}

// Backoff is the exponential backoff policy of rule 3.4: breaker.Backoff,
// the one type for it (the breaker package, a leaf, owns the policies).
type Backoff = breaker.Backoff

// Breaker is the circuit breaker policy of rule 3.6: breaker.Policy, the
// one type for it. Failures == 0 disables the breaker.
type Breaker = breaker.Policy

// Source is one source with its effective (defaulted, expanded) settings.
type Source struct {
	Name string
	Type string // "http" | "exec"

	// ScheduleSpec is the schedule as written (shown in status).
	ScheduleSpec string
	// Schedule is the parsed schedule. For "@every D" it is an Every value
	// (so the scheduler can give it a phase); otherwise a robfig/cron Schedule.
	Schedule Schedule

	Timeout    time.Duration
	Backoff    Backoff
	Breaker    Breaker
	ErrorAfter int // 0 = never enter the error state
	// ErrorReprobe, when > 0, polls a source in error once per this
	// (contract 10.4); 0 leaves it silent until reset.
	ErrorReprobe time.Duration
	Limit        string // "" or a key of Config.Limits
	// DependsOn names the sources this one waits for (contract 13.4).
	DependsOn []string

	// http
	URL          string
	Method       string
	Headers      map[string]string
	Body         string
	ExpectStatus []int // empty = any 2xx
	MaxBody      int64
	// FollowRedirects says whether redirects of a GET or HEAD are followed
	// (at most 10, never to the admin listener); nil means true. Other
	// methods never follow one: the 3xx is the poll's answer.
	FollowRedirects *bool
	// Host is the host group of an http source (contract 13.1), "" for
	// exec sources.
	Host string
	// RespectCache defers the next poll by Cache-Control max-age or
	// Expires (contract 13.6).
	RespectCache bool
	// Conditional says whether a GET sends If-None-Match and
	// If-Modified-Since from the last delivered 200 (contract 9.1); nil
	// means true.
	Conditional *bool

	// exec
	Command []string // Command[0] resolved: absolute, or as found in PATH
	Env     map[string]string
	Dir     string // absolute, or "" for the daemon's working directory

	// Deliver is where changed results go (contract 9.3), or nil.
	Deliver *Deliver

	// Fingerprint is a hex digest of every effective field above (after
	// expansion). A stored state whose fingerprint differs belongs to a
	// changed configuration. It never reveals a secret.
	Fingerprint string

	// http client settings and credentials (contract section 12)

	// Client is the tls, proxy_url and http2 settings of an http source,
	// shared by the sources whose settings are equal; nil means the
	// built-in ones (system roots, the environment's proxy, HTTP/2).
	Client *Client
	// Auth is the Authorization from basic_auth or bearer_token_file, or
	// nil. Its password and token are secrets.
	Auth *Auth

	// Conditions and Select are the CEL expressions of contract section 14
	// as written; Checks is them compiled (nil without any).
	Conditions []string
	Select     string
	Checks     *conditions.Set
}

// Schedule yields the next activation time strictly after t.
// It is satisfied by robfig/cron/v3's cron.Schedule.
type Schedule interface {
	Next(t time.Time) time.Time
}

// Every is the schedule "@every D": activations D apart. Next(t) returns
// t+D; the scheduler anchors Every schedules to a per-source phase instead.
type Every struct {
	D time.Duration
}

// Next returns t + D.
func (e Every) Next(t time.Time) time.Time { return t.Add(e.D) }
