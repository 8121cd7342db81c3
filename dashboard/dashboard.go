// Package dashboard serves pacer's status page for people (contract section
// 11): an overview with a table of the sources, a page per source, and
// their actions as plain HTML forms. Everything is rendered on the server
// with html/template from files embedded in the binary; a little vanilla
// JavaScript refreshes the table and the relative times, and the page is
// readable without it.
//
// The admin package mounts the handler behind its guard, which refuses
// cross-origin POSTs and DNS-rebinding Hosts: the dashboard relies on it
// and does not repeat those checks.
package dashboard

import (
	"bytes"
	"context"
	"embed"
	"fmt"
	"html/template"
	"io/fs"
	"log/slog"
	"net/http"
	"time"

	"github.com/pacer-dev/pacer/config"
	"github.com/pacer-dev/pacer/domain"
	"github.com/pacer-dev/pacer/internal/turns"
	"github.com/pacer-dev/pacer/scheduler"
	"github.com/pacer-dev/pacer/scheduler/hosts"
	"github.com/pacer-dev/pacer/scheduler/rates"
	srcview "github.com/pacer-dev/pacer/scheduler/view"
)

//go:embed templates/*.html
var templateFS embed.FS

//go:embed static
var staticFS embed.FS

// Controller is what the pages need of the daemon; *scheduler.Scheduler
// implements it. Rows and ExplainSources read the scheduler's memory: no
// page scans the store (Histories reads the records of the rows shown, in
// one go; History those of a source page).
type Controller interface {
	Rows() []srcview.Row
	ExplainSources(names []string) []srcview.Explained
	ExplainAll(fn func([]srcview.Explained) error) error
	ExplainSource(name string) (srcview.Explained, error)
	SourceConfig(name string) (config.Source, *config.Redactor, error)
	History(ctx context.Context, name string, n int) ([]domain.PollRecord, error)
	Histories(ctx context.Context, names []string, n int) (map[string][]domain.PollRecord, error)
	Reset(name string) (srcview.SourceObject, error)
	Pause(name, reason string) (srcview.SourceObject, error)
	Resume(name string) (srcview.SourceObject, error)
	Trigger(name string) error
	Ready(ctx context.Context) error
	Load() (inflight, limit int)
	Rates() []rates.Sample
	Hosts() []hosts.Object
}

var _ Controller = (*scheduler.Scheduler)(nil)

// Options configure the dashboard.
type Options struct {
	// Token is the admin token; when set, actions need a session opened by
	// entering it in the page's form. Without it actions are allowed from
	// loopback clients only.
	Token  string
	Logger *slog.Logger
	// Now is the clock of relative times and session expiry (nil: time.Now).
	Now func() time.Time
	// SessionTTL is how long a session lasts (default 12 h); MaxSessions
	// bounds how many are kept (default 1000; the oldest goes first).
	SessionTTL  time.Duration
	MaxSessions int
	// RefreshEvery is the table's refresh period in the browser (default 5 s).
	RefreshEvery time.Duration
	// Cluster lists the members of this daemon's cluster (nil: none).
	Cluster ClusterView
	// Warning, if set, is shown in a banner on every page when it says
	// something (a rejected reload).
	Warning func() string
}

// Dashboard is the status page's handler.
type Dashboard struct {
	c        Controller
	token    string
	log      *slog.Logger
	now      func() time.Time
	tmpl     *template.Template
	sessions *sessions
	throttle *loginThrottle // of the token form
	refresh  time.Duration
	mux      *http.ServeMux
	cluster  ClusterView  // nil on a single daemon
	table    *tableCache  // the table's shared snapshots
	gate     *turns.Turns // bounds the table's page builds
	hosts    *hostShareCache
	warning  func() string
}

// Paths the admin mux routes to the dashboard.
const (
	// PathPrefix holds the dashboard's own endpoints (static files, the
	// table fragment, login and logout).
	PathPrefix = "/dash/"
	// SourcesPrefix holds the source pages and their actions.
	SourcesPrefix = "/sources/"
)

// New returns the dashboard over c.
func New(c Controller, opts Options) (*Dashboard, error) {
	d := &Dashboard{c: c, token: opts.Token, log: opts.Logger, now: opts.Now, refresh: opts.RefreshEvery, cluster: opts.Cluster,
		warning: opts.Warning, table: newTableCache(c), hosts: newHostShareCache(c), gate: turns.New(maxBuilds, maxWaiting, waitTurn)}
	if d.log == nil {
		d.log = slog.New(slog.DiscardHandler)
	}
	if d.now == nil {
		d.now = time.Now
	}
	tmpl, err := template.New("").Funcs(d.funcs()).ParseFS(templateFS, "templates/*.html")
	if err != nil {
		return nil, fmt.Errorf("dashboard templates: %w", err)
	}
	d.tmpl = tmpl
	if d.refresh <= 0 {
		d.refresh = 5 * time.Second
	}
	d.sessions = newSessions(opts.SessionTTL, opts.MaxSessions, d.now)
	d.throttle = newLoginThrottle(d.now, d.log, loginClients)
	static, err := fs.Sub(staticFS, "static")
	if err != nil {
		return nil, fmt.Errorf("dashboard static files: %w", err)
	}
	m := http.NewServeMux()
	m.HandleFunc("GET /{$}", d.overview)
	m.HandleFunc("GET /dash/live", d.live)
	m.Handle("GET /dash/static/{file}", staticHandler(static))
	m.HandleFunc("POST /dash/login", d.login)
	m.HandleFunc("POST /dash/logout", d.logout)
	m.HandleFunc("GET /sources/{name}", d.source)
	m.HandleFunc("POST /sources/{name}/{action}", d.action)
	m.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		d.fail(w, r, http.StatusNotFound, "no such page: "+r.URL.Path)
	})
	d.mux = m
	return d, nil
}

// csp allows the embedded script and style sheet and nothing else: no
// inline script or style, no frame, no form posting elsewhere.
const csp = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; " +
	"connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"

// ServeHTTP serves the dashboard's paths with its security headers.
func (d *Dashboard) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Content-Security-Policy", csp)
	h.Set("X-Content-Type-Options", "nosniff")
	// Not "no-referrer": with it a browser sends "Origin: null" on the
	// page's own form POSTs (Fetch, "serializing a request origin"), which
	// the admin guard refuses as foreign. "same-origin" sends no referrer
	// to any other site and keeps the page's Origin on its own POSTs.
	h.Set("Referrer-Policy", "same-origin")
	h.Set("X-Frame-Options", "DENY")
	d.mux.ServeHTTP(w, r)
}

// staticHandler serves the embedded script and style sheet, and nothing
// else (no directory listing).
func staticHandler(static fs.FS) http.Handler {
	types := map[string]string{"app.js": "text/javascript; charset=utf-8", "style.css": "text/css; charset=utf-8"}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		name := r.PathValue("file")
		ct, ok := types[name]
		if !ok {
			http.NotFound(w, r)
			return
		}
		data, err := fs.ReadFile(static, name)
		if err != nil {
			http.Error(w, "static file: "+err.Error(), http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", ct)
		w.Header().Set("Cache-Control", "no-cache")
		_, _ = w.Write(data) // the client went away: nothing to do
	})
}

// render executes the named template into a buffer first, so that a
// template error becomes a clean 500 instead of half a page.
func (d *Dashboard) render(w http.ResponseWriter, code int, name string, data any) {
	var buf bytes.Buffer
	if err := d.tmpl.ExecuteTemplate(&buf, name, data); err != nil {
		d.log.Error("dashboard template", "template", name, "err", err)
		http.Error(w, "the page could not be rendered; see the daemon's log", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	_, _ = w.Write(buf.Bytes()) // the client went away: nothing to do
}

// fail answers with an error page.
func (d *Dashboard) fail(w http.ResponseWriter, r *http.Request, code int, msg string) {
	d.render(w, code, "error.html", errorPage{base: d.base(w, r, "Error"), Code: code, Message: msg})
}
