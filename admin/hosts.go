package admin

import (
	"net/http"

	"github.com/pacer-dev/pacer/scheduler"
	"github.com/pacer-dev/pacer/scheduler/hosts"
)

// HostsView is what the host endpoints of contract 13.7 need: every host
// group's object, one of them, and its reset (scheduler.ErrNotFound for
// an unknown host).
type HostsView interface {
	Hosts() []hosts.Object
	Host(name string) (hosts.Object, error)
	ResetHost(name string) (hosts.Object, error)
}

var _ HostsView = (*scheduler.Scheduler)(nil)

// hostRoutes adds GET /api/hosts, GET /api/hosts/{host} and
// POST /api/hosts/{host}/reset (same auth and origin rules as every POST)
// to mux.
func (a *api) hostRoutes(mux *http.ServeMux) {
	mux.Handle("/api/hosts", only(http.MethodGet, http.HandlerFunc(a.hostList)))
	mux.Handle("/api/hosts/{host}", only(http.MethodGet, http.HandlerFunc(a.hostGet)))
	mux.Handle("/api/hosts/{host}/reset", only(http.MethodPost, a.auth(a.hostReset)))
}

// hostsView is the controller's host view, or nil when it has none.
func (a *api) hostsView() HostsView {
	h, _ := a.c.(HostsView)
	return h
}

func (a *api) hostList(w http.ResponseWriter, r *http.Request) {
	out := []hosts.Object{}
	if h := a.hostsView(); h != nil {
		out = append(out, h.Hosts()...)
	}
	a.answer(w, http.StatusOK, out, nil)
}

func (a *api) hostGet(w http.ResponseWriter, r *http.Request) {
	h := a.hostsView()
	if h == nil {
		writeError(w, http.StatusNotFound, "no host groups")
		return
	}
	o, err := h.Host(r.PathValue("host"))
	a.answer(w, http.StatusOK, o, err)
}

func (a *api) hostReset(w http.ResponseWriter, r *http.Request) {
	h := a.hostsView()
	if h == nil {
		writeError(w, http.StatusNotFound, "no host groups")
		return
	}
	o, err := h.ResetHost(r.PathValue("host"))
	if err == nil {
		a.log.Info("host reset", "host", o.Host)
	}
	a.answer(w, http.StatusOK, o, err)
}
