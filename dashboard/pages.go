package dashboard

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/pacer-dev/pacer/domain"
	"github.com/pacer-dev/pacer/scheduler"
	"github.com/pacer-dev/pacer/scheduler/policy"
	srcview "github.com/pacer-dev/pacer/scheduler/view"
)

// stripLen and historyLen are the records shown per row and on a source page.
const (
	stripLen   = 20
	historyLen = 100
)

// base is what every page shows around its content.
type base struct {
	Title         string
	Now           string // RFC 3339 UTC, the server's time (for the relative times)
	TokenRequired bool   // actions need a session
	Authorized    bool   // this browser may act
	Loopback      bool   // the client is on this machine (no token case)
	Flash         string
	Warning       string // a banner: the last reload was rejected
	Back          string // the URL to return to after login or an action
}

func (d *Dashboard) base(w http.ResponseWriter, r *http.Request, title string) base {
	b := base{Title: title, Now: d.now().UTC().Format(time.RFC3339), TokenRequired: d.tokenRequired(),
		Authorized: d.authorized(r), Loopback: fromLoopback(r), Back: r.URL.RequestURI()}
	if r.Method == http.MethodGet && w != nil {
		b.Flash = takeFlash(w, r)
	}
	if d.warning != nil {
		b.Warning = d.warning()
	}
	return b
}

type errorPage struct {
	base
	Code    int
	Message string
}

// overviewPage is the overview with its table (contract 11.1 and 11.2).
type overviewPage struct {
	base
	Live   liveData
	Charts overviewCharts
	Hosts  hostTable
}

// liveData is the part of the overview the browser refreshes.
type liveData struct {
	Now        string
	Authorized bool
	Back       string
	Total      int
	Counts     []stateCount
	Inflight   int
	Limit      int
	StoreErr   string // "" = ready
	Clustered  bool   // a member of a cluster: Members is shown
	Members    []memberView
	MembersErr string
	Query      listQuery
	Rows       []rowView
	Matched    int
	Page       int
	Pages      int
	PrevHref   string
	NextHref   string
	Columns    []column
	LiveHref   string
}

type stateCount struct {
	State string
	N     int
	Href  string
}

type column struct {
	Label string
	Href  string // sort by it (toggling the order when it is the current one)
	Arrow string // "▲", "▼" or ""
	Num   bool   // a numeric column: right-aligned, as its cells
}

// rowView is a row of the table.
type rowView struct {
	srcview.Explained
	Strip []stripItem
}

// stripItem is one poll in a row's strip of outcomes.
type stripItem struct {
	Outcome string
	Title   string
}

func (d *Dashboard) overview(w http.ResponseWriter, r *http.Request) {
	q, err := parseQuery(r.URL.Query())
	if err != nil {
		d.fail(w, r, http.StatusBadRequest, err.Error())
		return
	}
	if !d.gate.Take(r.Context()) {
		w.Header().Set("Retry-After", "1")
		d.fail(w, r, http.StatusServiceUnavailable, busyMessage)
		return
	}
	defer d.gate.Give()
	b := d.base(w, r, "pacer")
	l, ok := d.liveData(r.Context(), q, b)
	if !ok {
		return // the client left
	}
	d.render(w, http.StatusOK, "overview.html", overviewPage{base: b, Live: l, Charts: d.overviewCharts(l.Total), Hosts: d.hostsTable()})
}

// busyMessage answers a page of the table refused by the gate.
const busyMessage = "too many pages of the table are being built at once; try again in a second"

// live answers the refreshed part of the overview, for the page's script.
func (d *Dashboard) live(w http.ResponseWriter, r *http.Request) {
	q, err := parseQuery(r.URL.Query())
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	if !d.gate.Take(r.Context()) {
		w.Header().Set("Retry-After", "1")
		http.Error(w, busyMessage, http.StatusServiceUnavailable)
		return
	}
	defer d.gate.Give()
	b := d.base(nil, r, "")
	b.Back = q.href(q.Page)
	l, ok := d.liveData(r.Context(), q, b)
	if !ok {
		return // the client left
	}
	d.render(w, http.StatusOK, "live", l)
}

// liveData builds the counts and the page of the table q asks for from a
// snapshot of the scheduler's rows (tableCache), then reads the rows shown
// afresh, with the strips of their last polls. ok is false when ctx ended
// first.
func (d *Dashboard) liveData(ctx context.Context, q listQuery, b base) (l liveData, ok bool) {
	snap := d.table.get(ctx)
	if snap == nil {
		return l, false
	}
	l = liveData{Now: b.Now, Authorized: b.Authorized, Back: q.href(q.Page), Total: len(snap.rows), Query: q, StoreErr: snap.storeErr}
	for _, st := range policy.States() {
		fq := listQuery{State: st, Q: q.Q, Sort: q.Sort, Desc: q.Desc}
		l.Counts = append(l.Counts, stateCount{State: st, N: snap.counts[st], Href: fq.href(1)})
	}
	l.Inflight, l.Limit = d.c.Load()
	l.Clustered = d.cluster != nil
	l.Members, l.MembersErr = d.members(ctx)
	sel := selectRows(snap, q)
	l.Matched, l.Page, l.Pages = sel.Matched, sel.Page, sel.Pages
	l.Query.Page = sel.Page
	l.Back = l.Query.href(sel.Page)
	l.LiveHref = "/dash/live?" + l.Query.values(sel.Page).Encode()
	if sel.Page > 1 {
		l.PrevHref = q.href(sel.Page - 1)
	}
	if sel.Page < sel.Pages {
		l.NextHref = q.href(sel.Page + 1)
	}
	l.Columns = columns(l.Query)
	names := make([]string, len(sel.Rows))
	for i, r := range sel.Rows {
		names[i] = r.Name
	}
	hist, err := d.c.Histories(ctx, names, stripLen)
	if err != nil {
		d.log.Warn("dashboard: history", "err", err)
	}
	for _, o := range d.c.ExplainSources(names) {
		l.Rows = append(l.Rows, rowView{Explained: o, Strip: strip(hist[o.Name])})
	}
	return l, true
}

// columns are the table's sortable headers for q.
func columns(q listQuery) []column {
	var out []column
	for _, c := range []struct{ key, label string }{
		{"name", "Name"}, {"type", "Type"}, {"state", "State"}, {"failures", "Failures"},
		{"success", "Last success"}, {"next", "Next run"},
	} {
		nq := q
		nq.Sort, nq.Desc, nq.Page = c.key, false, 1
		col := column{Label: c.label, Num: c.key == "failures"}
		if q.Sort == c.key {
			col.Arrow = "▲"
			if q.Desc {
				col.Arrow = "▼"
			} else {
				nq.Desc = true
			}
		}
		col.Href = nq.href(1)
		out = append(out, col)
	}
	return out
}

// strip is a row's last polls (recs, newest first) oldest first (newest
// on the right).
func strip(recs []domain.PollRecord) []stripItem {
	out := make([]stripItem, len(recs))
	for i, rec := range recs {
		// Short: 20 of them per row make most of the page's weight.
		t := rec.StartedAt.UTC().Format("01-02 15:04:05") + " " + rec.Outcome
		if rec.Error != "" {
			t += ": " + shorten(rec.Error, 48)
		}
		out[len(recs)-1-i] = stripItem{Outcome: rec.Outcome, Title: t}
	}
	return out
}

// sourcePage is a source's page (contract 11.3).
type sourcePage struct {
	base
	Source   srcview.Explained
	Settings []setting
	History  []domain.PollRecord
	Strip    []stripItem
	Charts   sourceCharts
	// TriggerOff is why the trigger button is disabled ("": it is not).
	TriggerOff string
	// LastCondition is the condition that failed last (contract 14), or "".
	LastCondition string
}

func (d *Dashboard) source(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	o, err := d.c.ExplainSource(name)
	if err != nil {
		d.fail(w, r, statusOf(err), err.Error())
		return
	}
	src, red, err := d.c.SourceConfig(name)
	if err != nil {
		d.fail(w, r, statusOf(err), err.Error())
		return
	}
	recs, err := d.c.History(r.Context(), name, historyLen)
	if err != nil {
		d.log.Warn("dashboard: history", "source", name, "err", err)
	}
	p := sourcePage{base: d.base(w, r, name+" · pacer"), Source: o, Settings: settings(&src, red.Redact), History: recs,
		Charts: sourceCharts{Polls: pollsChart(recs), Share: sourceShareChart(o, recs)}, TriggerOff: triggerOff(o.State),
		LastCondition: lastCondition(recs, red.Redact)}
	d.render(w, http.StatusOK, "source.html", p)
}

// action runs reset, trigger, pause or resume from a form, then sends the
// browser back (303) with a message.
func (d *Dashboard) action(w http.ResponseWriter, r *http.Request) {
	name, act := r.PathValue("name"), r.PathValue("action")
	r.Body = http.MaxBytesReader(w, r.Body, 64<<10)
	if err := r.ParseForm(); err != nil {
		d.fail(w, r, http.StatusBadRequest, "form: "+err.Error())
		return
	}
	if !d.mayAct(w, r) {
		return
	}
	var err error
	done := ""
	switch act {
	case policy.ActionReset:
		_, err = d.c.Reset(name)
		done = "reset"
	case policy.ActionTrigger:
		err = d.c.Trigger(name)
		done = "triggered: it polls as soon as it gets its permits"
	case policy.ActionPause:
		reason := strings.TrimSpace(r.PostFormValue("reason"))
		if len(reason) > 500 {
			d.fail(w, r, http.StatusBadRequest, "reason: longer than 500 bytes")
			return
		}
		_, err = d.c.Pause(name, reason)
		done = "paused"
	case policy.ActionResume:
		_, err = d.c.Resume(name)
		done = "resumed"
	default:
		d.fail(w, r, http.StatusNotFound, "no such action: "+act)
		return
	}
	switch {
	case errors.Is(err, scheduler.ErrNotFound):
		d.fail(w, r, http.StatusNotFound, err.Error())
		return
	case err != nil:
		setFlash(w, r, act+" refused: "+err.Error())
	default:
		d.table.invalidate() // the next page shows the change
		d.log.Info("dashboard action", "source", name, "action", act)
		setFlash(w, r, name+": "+done)
	}
	http.Redirect(w, r, backTo(r, SourcesPrefix+name), http.StatusSeeOther)
}

// mayAct answers the request itself and returns false when r may not act:
// 401 with the token form when a token is required, 403 when the client
// is not on this machine and no token is configured.
func (d *Dashboard) mayAct(w http.ResponseWriter, r *http.Request) bool {
	if d.authorized(r) {
		return true
	}
	if d.tokenRequired() {
		b := d.base(w, r, "Token required · pacer")
		b.Back = backTo(r, "/")
		d.render(w, http.StatusUnauthorized, "login.html", loginPage{base: b, Message: "enter the admin token to act on sources"})
		return false
	}
	d.fail(w, r, http.StatusForbidden, "actions from another machine need admin.token_file in the configuration")
	return false
}

type loginPage struct {
	base
	Message string
}

// login opens a session for a browser that entered the right token.
func (d *Dashboard) login(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, 64<<10)
	if err := r.ParseForm(); err != nil {
		d.fail(w, r, http.StatusBadRequest, "form: "+err.Error())
		return
	}
	back := backTo(r, "/")
	if !d.tokenRequired() {
		http.Redirect(w, r, back, http.StatusSeeOther)
		return
	}
	if ok, wait := d.throttle.take(r.RemoteAddr); !ok {
		d.throttle.refused(r.RemoteAddr)
		secs := int((wait + time.Second - 1) / time.Second)
		w.Header().Set("Retry-After", strconv.Itoa(secs))
		b := d.base(w, r, "Token required · pacer")
		b.Back = back
		d.render(w, http.StatusTooManyRequests, "login.html", loginPage{base: b,
			Message: fmt.Sprintf("too many wrong tokens from this address: try again in %d s", secs)})
		return
	}
	if !d.tokenOK(strings.TrimSpace(r.PostFormValue("token"))) {
		d.throttle.failed(r.RemoteAddr)
		b := d.base(w, r, "Token required · pacer")
		b.Back = back
		d.render(w, http.StatusUnauthorized, "login.html", loginPage{base: b, Message: "wrong token"})
		return
	}
	d.throttle.succeeded(r.RemoteAddr)
	id, err := d.sessions.create()
	if err != nil {
		d.fail(w, r, http.StatusInternalServerError, err.Error())
		return
	}
	d.setSession(w, r, id)
	setFlash(w, r, "token accepted: actions are enabled in this browser")
	http.Redirect(w, r, back, http.StatusSeeOther)
}

// logout closes the browser's session.
func (d *Dashboard) logout(w http.ResponseWriter, r *http.Request) {
	if c, err := r.Cookie(sessionCookie); err == nil {
		d.sessions.drop(c.Value)
	}
	http.SetCookie(w, &http.Cookie{Name: sessionCookie, Path: "/", MaxAge: -1, HttpOnly: true,
		SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil})
	http.Redirect(w, r, "/", http.StatusSeeOther)
}

// backTo is the form's "back" field when it is a path on this site (never
// another host: "//x" and "/\x" are refused), else def.
func backTo(r *http.Request, def string) string {
	b := r.PostFormValue("back")
	if b == "" || b[0] != '/' || strings.HasPrefix(b, "//") || strings.ContainsAny(b, "\\\r\n") {
		return def
	}
	return b
}

// statusOf is the HTTP status of a controller error.
func statusOf(err error) int {
	switch {
	case errors.Is(err, scheduler.ErrNotFound):
		return http.StatusNotFound
	case errors.Is(err, scheduler.ErrConflict):
		return http.StatusConflict
	}
	return http.StatusInternalServerError
}

func shorten(s string, n int) string {
	s = strings.ReplaceAll(s, "\n", " ")
	if len(s) <= n {
		return s
	}
	return strings.ToValidUTF8(s[:n], "") + "…"
}
