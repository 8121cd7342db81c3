package dashboard

import (
	"cmp"
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/pacer-dev/pacer/scheduler/policy"
	srcview "github.com/pacer-dev/pacer/scheduler/view"
)

// PerPage is the number of sources on a page of the table.
const PerPage = 50

// maxSearch bounds the search text.
const maxSearch = 200

// listQuery is the table's view: ?state=error&q=api&sort=next&order=desc&page=2.
type listQuery struct {
	State string // "" or one of policy.States
	Q     string // substring of the name
	Sort  string // a key of sorter; "" = configuration order
	Desc  bool
	Page  int // from 1
}

// sorter returns the order of a column ("name", "type", "state",
// "failures", "success", "next"), or nil for an unknown key.
func sorter(key string) func(a, b *srcview.Row) int {
	switch key {
	case "name":
		return func(a, b *srcview.Row) int { return strings.Compare(a.Name, b.Name) }
	case "type":
		return func(a, b *srcview.Row) int { return strings.Compare(a.Type, b.Type) }
	case "state":
		return func(a, b *srcview.Row) int { return cmp.Compare(stateRank(a.State), stateRank(b.State)) }
	case "failures":
		return func(a, b *srcview.Row) int { return cmp.Compare(a.Failures, b.Failures) }
	case "success":
		return func(a, b *srcview.Row) int { return cmpTime(a.LastSuccess, b.LastSuccess) }
	case "next":
		return func(a, b *srcview.Row) int { return cmpTime(a.NextRun, b.NextRun) }
	}
	return nil
}

// cmpTime orders UnixNano times, "none" (0) after every time.
func cmpTime(a, b int64) int {
	switch {
	case a == b:
		return 0
	case a == 0:
		return 1
	case b == 0:
		return -1
	}
	return cmp.Compare(a, b)
}

// stateRank orders states from the worst (error) to the calmest.
func stateRank(s string) int {
	for i, st := range []string{policy.StateError, policy.StateOpen, policy.StateHalfOpen,
		policy.StateBackoff, policy.StateThrottled, policy.StatePaused, policy.StatePending, policy.StateOK} {
		if s == st {
			return i
		}
	}
	return 99
}

// parseQuery reads the table's parameters; a bad one is an error naming it.
func parseQuery(v url.Values) (listQuery, error) {
	q := listQuery{State: v.Get("state"), Q: strings.TrimSpace(v.Get("q")), Sort: v.Get("sort"), Page: 1}
	if states := policy.States(); q.State != "" && !slices.Contains(states[:], q.State) {
		return q, fmt.Errorf("state: %q is not one of %s", q.State, strings.Join(states[:], ", "))
	}
	if len(q.Q) > maxSearch {
		return q, fmt.Errorf("q: longer than %d bytes", maxSearch)
	}
	if q.Sort != "" && sorter(q.Sort) == nil {
		return q, fmt.Errorf("sort: %q is not one of name, type, state, failures, success, next", q.Sort)
	}
	switch o := v.Get("order"); o {
	case "", "asc":
	case "desc":
		q.Desc = true
	default:
		return q, fmt.Errorf("order: %q is not asc or desc", o)
	}
	if p := v.Get("page"); p != "" {
		n, err := strconv.Atoi(p)
		if err != nil || n < 1 {
			return q, fmt.Errorf("page: %q is not a whole number from 1", p)
		}
		q.Page = n
	}
	return q, nil
}

// values is q as query parameters (defaults left out), with page set.
func (q listQuery) values(page int) url.Values {
	v := url.Values{}
	if q.State != "" {
		v.Set("state", q.State)
	}
	if q.Q != "" {
		v.Set("q", q.Q)
	}
	if q.Sort != "" {
		v.Set("sort", q.Sort)
		if q.Desc {
			v.Set("order", "desc")
		}
	}
	if page > 1 {
		v.Set("page", strconv.Itoa(page))
	}
	return v
}

// href is the overview's URL for q at page.
func (q listQuery) href(page int) string {
	if e := q.values(page).Encode(); e != "" {
		return "/?" + e
	}
	return "/"
}

// selection is one page of the table.
type selection struct {
	Rows    []srcview.Row // the page's rows
	Matched int           // rows that pass the filter and the search
	Page    int           // the page shown (clamped to the last one)
	Pages   int
}

// selectRows filters, searches, sorts and cuts the snapshot's rows to the
// page q asks for. Only the page's rows are copied.
func selectRows(s *snapshot, q listQuery) selection {
	idx := s.view(q) // nil: every row, in configuration order
	all := q.State == "" && q.Q == "" && q.Sort == ""
	n := len(s.rows)
	if !all {
		n = len(idx)
	}
	sel := selection{Matched: n, Pages: max(1, (n+PerPage-1)/PerPage)}
	sel.Page = min(q.Page, sel.Pages)
	lo, hi := (sel.Page-1)*PerPage, min(sel.Page*PerPage, n)
	sel.Rows = make([]srcview.Row, 0, max(hi-lo, 0))
	for i := lo; i < hi; i++ {
		if all {
			sel.Rows = append(sel.Rows, s.rows[i])
		} else {
			sel.Rows = append(sel.Rows, s.rows[idx[i]])
		}
	}
	return sel
}
