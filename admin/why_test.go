package admin_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
)

// Issue 24 item 5: the answers of the POSTs carry the "why" sentence, so
// that the caller reads the action's effect (paused: its reason; resumed:
// when it polls next; triggered: what it is doing).
func TestPostAnswersCarryWhy(t *testing.T) {
	f := newFixture(t)
	auth := "Bearer " + token
	for _, c := range []struct {
		path, body string
		want       string // the why starts with it ("" any non-empty)
	}{
		{"/api/sources/idle/pause", `{"reason": "deploy"}`, "paused: deploy"},
		{"/api/sources/idle/resume", "", ""},
		{"/api/sources/idle/reset", "", ""},
		{"/api/sources/idle/trigger", "", ""},
	} {
		a := f.do(http.MethodPost, c.path, auth, strings.NewReader(c.body))
		var got struct {
			Name, Why string
		}
		if err := json.Unmarshal(a.body, &got); err != nil || a.code/100 != 2 || got.Name != "idle" || got.Why == "" || !strings.HasPrefix(got.Why, c.want) {
			t.Errorf("POST %s: %s: want a 2xx answer naming idle with a why starting %q", c.path, a, c.want)
		}
	}
}
