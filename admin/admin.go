// Package admin serves pacer's admin HTTP API (contract section 5): health,
// readiness, Prometheus metrics and the source endpoints, behind the
// origin and Host checks of section 11.4.
package admin

import (
	"bytes"
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/pacer-dev/pacer/domain"
	"github.com/pacer-dev/pacer/internal/turns"
	"github.com/pacer-dev/pacer/scheduler"
	"github.com/pacer-dev/pacer/scheduler/view"
)

// maxBody caps request bodies (a pause reason is all the API reads).
const maxBody = 64 << 10

// Controller is what the API needs of the daemon; *scheduler.Scheduler
// implements it.
type Controller interface {
	Sources() []view.SourceObject
	Source(name string) (view.SourceObject, error)
	// ExplainSources, ExplainAll and ExplainSource are the source objects
	// with their "why" (what GET /api/sources answers, by chunks).
	ExplainSources(names []string) []view.Explained
	ExplainAll(fn func([]view.Explained) error) error
	ExplainSource(name string) (view.Explained, error)
	History(ctx context.Context, name string, n int) ([]domain.PollRecord, error)
	Reset(name string) (view.SourceObject, error)
	Pause(name, reason string) (view.SourceObject, error)
	Resume(name string) (view.SourceObject, error)
	Trigger(name string) error
	Ready(ctx context.Context) error
}

var _ Controller = (*scheduler.Scheduler)(nil)

// Options configure the handler.
type Options struct {
	// Token, when non-empty, is required as "Authorization: Bearer <token>"
	// on every POST.
	Token  string
	Logger *slog.Logger
	// Dashboard, if set, serves the status page for people at "/", under
	// "/sources/" and "/dash/" (package dashboard), behind the same guard.
	Dashboard http.Handler
	// Cluster, on a member of a cluster, lists its members for
	// GET /api/cluster (nil: the daemon is alone, and the list is empty).
	Cluster ClusterView
	// Warning, if set, says what a ready daemon's operator should know
	// ("": nothing), such as a rejected reload; /readyz answers it in
	// "warning", still 200.
	Warning func() string
}

// NewHandler returns the API's handler. Every request passes guard first
// (cross-origin POSTs and DNS-rebinding Hosts get 403).
func NewHandler(c Controller, g prometheus.Gatherer, opts Options) http.Handler {
	a := &api{c: c, token: opts.Token, log: opts.Logger, clusterView: opts.Cluster, warning: opts.Warning,
		listings: turns.New(listingsAtOnce, listingsWaiting, listingTurn)}
	if a.log == nil {
		a.log = slog.New(slog.DiscardHandler)
	}
	mux := http.NewServeMux()
	mux.Handle("/healthz", only(http.MethodGet, http.HandlerFunc(a.healthz)))
	mux.Handle("/readyz", only(http.MethodGet, http.HandlerFunc(a.readyz)))
	mux.Handle("/metrics", only(http.MethodGet, promhttp.HandlerFor(g, promhttp.HandlerOpts{})))
	mux.Handle("/api/cluster", only(http.MethodGet, http.HandlerFunc(a.cluster)))
	mux.Handle("/api/sources", only(http.MethodGet, http.HandlerFunc(a.list)))
	mux.Handle("/api/sources/{name}", only(http.MethodGet, http.HandlerFunc(a.get)))
	mux.Handle("/api/sources/{name}/history", only(http.MethodGet, http.HandlerFunc(a.history)))
	mux.Handle("/api/sources/{name}/reset", only(http.MethodPost, a.auth(a.reset)))
	mux.Handle("/api/sources/{name}/trigger", only(http.MethodPost, a.auth(a.trigger)))
	mux.Handle("/api/sources/{name}/pause", only(http.MethodPost, a.auth(a.pause)))
	mux.Handle("/api/sources/{name}/resume", only(http.MethodPost, a.auth(a.resume)))
	a.hostRoutes(mux)
	if opts.Dashboard != nil {
		mux.Handle("/{$}", opts.Dashboard)
		mux.Handle("/sources/", opts.Dashboard)
		mux.Handle("/dash/", opts.Dashboard)
	}
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, "no such endpoint: "+r.URL.Path)
	})
	return guard(mux)
}

type api struct {
	c           Controller
	token       string
	log         *slog.Logger
	clusterView ClusterView
	listings    *turns.Turns // GET /api/sources (listing.go)
	warning     func() string
}

// only answers 405 (in JSON) to any method but m (and HEAD for GET).
func only(m string, h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != m && !(m == http.MethodGet && r.Method == http.MethodHead) {
			w.Header().Set("Allow", m)
			writeError(w, http.StatusMethodNotAllowed, "method "+r.Method+" not allowed; use "+m)
			return
		}
		h.ServeHTTP(w, r)
	})
}

// auth checks the bearer token in constant time; a request without the
// right one changes nothing.
func (a *api) auth(h http.HandlerFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if a.token != "" {
			got, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
			if !ok || subtle.ConstantTimeCompare([]byte(strings.TrimSpace(got)), []byte(a.token)) != 1 {
				writeError(w, http.StatusUnauthorized, "missing or wrong bearer token")
				return
			}
		}
		r.Body = http.MaxBytesReader(w, r.Body, maxBody)
		h(w, r)
	})
}

func (a *api) healthz(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
}

func (a *api) readyz(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
	defer cancel()
	if err := a.c.Ready(ctx); err != nil {
		writeError(w, http.StatusServiceUnavailable, err.Error())
		return
	}
	if a.warning != nil {
		if warn := a.warning(); warn != "" {
			writeJSON(w, http.StatusOK, map[string]string{"status": "ready", "warning": warn})
			return
		}
	}
	writeJSON(w, http.StatusOK, map[string]string{"status": "ready"})
}

func (a *api) get(w http.ResponseWriter, r *http.Request) {
	o, err := a.c.ExplainSource(r.PathValue("name"))
	a.answer(w, http.StatusOK, o, err)
}

func (a *api) history(w http.ResponseWriter, r *http.Request) {
	n := 20
	if v := r.URL.Query().Get("n"); v != "" {
		var err error
		n, err = strconv.Atoi(v)
		if err != nil || n < 1 || n > 10000 {
			writeError(w, http.StatusBadRequest, "n must be a whole number from 1 to 10000")
			return
		}
	}
	recs, err := a.c.History(r.Context(), r.PathValue("name"), n)
	if recs == nil {
		recs = []domain.PollRecord{}
	}
	a.answer(w, http.StatusOK, recs, err)
}

func (a *api) reset(w http.ResponseWriter, r *http.Request) {
	o, err := a.c.Reset(r.PathValue("name"))
	a.answer(w, http.StatusOK, a.withWhy(o, err), err)
}

func (a *api) trigger(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	err := a.c.Trigger(name)
	answer := map[string]string{"status": "triggered", "name": name}
	if e, eerr := a.c.ExplainSource(name); err == nil && eerr == nil {
		answer["why"] = e.Why
	}
	a.answer(w, http.StatusAccepted, answer, err)
}

func (a *api) pause(w http.ResponseWriter, r *http.Request) {
	var body struct {
		Reason string `json:"reason"`
	}
	data, err := io.ReadAll(r.Body)
	if err != nil {
		writeError(w, http.StatusBadRequest, "request body: "+err.Error())
		return
	}
	if len(strings.TrimSpace(string(data))) > 0 {
		if err := json.Unmarshal(data, &body); err != nil {
			writeError(w, http.StatusBadRequest, `body must be JSON {"reason": "..."}: `+err.Error())
			return
		}
	}
	o, err := a.c.Pause(r.PathValue("name"), body.Reason)
	a.answer(w, http.StatusOK, a.withWhy(o, err), err)
}

func (a *api) resume(w http.ResponseWriter, r *http.Request) {
	o, err := a.c.Resume(r.PathValue("name"))
	a.answer(w, http.StatusOK, a.withWhy(o, err), err)
}

// withWhy is the answer of a POST that changed o: o with its "why" (the
// sentence GET answers), so that the caller reads the action's effect; o
// alone when the explanation cannot be had.
func (a *api) withWhy(o view.SourceObject, err error) any {
	if err != nil {
		return o
	}
	e, err := a.c.ExplainSource(o.Name)
	if err != nil {
		return o
	}
	return e
}

// answer writes v with code, or the error with its status.
func (a *api) answer(w http.ResponseWriter, code int, v any, err error) {
	switch {
	case err == nil:
		writeJSON(w, code, v)
	case errors.Is(err, scheduler.ErrNotFound):
		writeError(w, http.StatusNotFound, err.Error())
	case errors.Is(err, scheduler.ErrConflict):
		writeError(w, http.StatusConflict, err.Error())
	default:
		a.log.Error("admin request failed", "err", err)
		writeError(w, http.StatusInternalServerError, err.Error())
	}
}

// writeJSON writes v as JSON (with EscapeJSON: a client may print it to a
// terminal).
func writeJSON(w http.ResponseWriter, code int, v any) {
	var buf bytes.Buffer
	if err := json.NewEncoder(&buf).Encode(v); err != nil {
		code, buf = http.StatusInternalServerError, bytes.Buffer{}
		b, _ := json.Marshal(map[string]string{"error": "encode answer: " + err.Error()})
		buf.Write(append(b, '\n'))
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_, _ = w.Write(EscapeJSON(buf.Bytes())) // the client went away: nothing to do
}

func writeError(w http.ResponseWriter, code int, msg string) {
	writeJSON(w, code, map[string]string{"error": msg})
}
