package e2e

// Contract section 11.5: the status page in a real headless Chromium
// (Debian's chromium package) against the real daemon: load, filter,
// search, a reset through its button, the token form, and a screenshot.

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// browser starts a headless Chromium for t, with an empty profile and no
// network of its own (without the networking flags it tries to reach the
// outside and fails slowly). Chromium missing is a failure, not a skip.
func browser(t *testing.T) context.Context {
	t.Helper()
	bin, err := exec.LookPath("chromium")
	if err != nil {
		if _, statErr := os.Stat("/usr/bin/chromium"); statErr != nil {
			t.Fatalf("no chromium for the browser test (%v): install Debian's chromium: apt-get install chromium", err)
		}
		bin = "/usr/bin/chromium"
	}
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(bin),
		chromedp.Flag("headless", true),
		chromedp.Flag("no-sandbox", true),
		chromedp.Flag("disable-gpu", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("no-first-run", true),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1200, 900),
	}
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelCtx := chromedp.NewContext(actx)
	ctx, cancelTimeout := context.WithTimeout(ctx, 60*time.Second)
	t.Cleanup(func() {
		cancelTimeout()
		cancelCtx()
		cancelAlloc()
	})
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("start chromium %s: %v (install Debian's chromium: apt-get install chromium)", bin, err)
	}
	return ctx
}

// run runs browser actions, failing the test with what was being done.
// Each call gets at most 15 s.
func run(t *testing.T, ctx context.Context, what string, actions ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	if err := chromedp.Do(ctx, actions...); err != nil {
		t.Fatalf("browser: %s: %v", what, err)
	}
}

// get runs one browser action that returns a value.
func get[T any](t *testing.T, ctx context.Context, what string, a chromedp.Action[T]) T {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	v, err := chromedp.Run(ctx, a)
	if err != nil {
		t.Fatalf("browser: %s: %v", what, err)
	}
	return v
}

// js evaluates a script for its effect.
func js(expr string) chromedp.Action[chromedp.Void] { return chromedp.Evaluate[chromedp.Void](expr) }

// css is a CSS selector.
func css(sel string) chromedp.CSS { return chromedp.CSS(sel) }

// tableRows are the names in the overview's table, in order.
func tableRows(t *testing.T, ctx context.Context) []string {
	t.Helper()
	return get(t, ctx, "read the table", chromedp.Evaluate[[]string](
		`Array.from(document.querySelectorAll("#sources tr.row")).map(r => r.dataset.name)`))
}

// loaded waits until a page has loaded and the JS expression cond holds.
// It asks again every 20 ms, for at most 10 s: while the browser navigates
// (a form was submitted) the page it asks may be gone, which is no answer
// yet.
func loaded(cond string) chromedp.Action[chromedp.Void] {
	expr := `document.readyState === "complete" && !!(` + cond + `)`
	return chromedp.Func(func(ctx context.Context, t *chromedp.Target) error {
		deadline := time.Now().Add(10 * time.Second)
		for {
			ok, err := chromedp.Evaluate[bool](expr)(ctx, t)
			if err == nil && ok {
				return nil
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("after 10s, not true: %s (last error: %v)", cond, err)
			}
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(20 * time.Millisecond):
			}
		}
	})
}

// screenshot writes the page to dir/name and logs where.
func screenshot(t *testing.T, ctx context.Context, dir, name string) {
	t.Helper()
	png := get(t, ctx, "screenshot", chromedp.FullScreenshot(90))
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, png, 0o644); err != nil {
		t.Fatalf("write screenshot: %v", err)
	}
	t.Logf("screenshot: %s (%d bytes)", p, len(png))
}

const dashboardSources = `concurrency: 2
defaults:
  breaker: {failures: 0}
  error_after: 0
sources:
  - {name: web-a, type: http, url: "%UP%/a", schedule: "@every 1s"}
  - {name: web-b, type: http, url: "%UP%/b", schedule: "@every 1s"}
  - {name: broken-x, type: http, url: "%UP%/x", schedule: "@every 1s", error_after: 1}
  - {name: broken-y, type: http, url: "%UP%/y", schedule: "@every 1s", error_after: 1}
`

// startDashboard runs a daemon with two healthy and two broken sources and
// waits for the broken ones to be in error.
func startDashboard(t *testing.T, in *inst) (*daemon, *upstream) {
	t.Helper()
	u := newUpstream(t)
	u.Set("/x", behavior{Status: 502})
	u.Set("/y", behavior{Status: 502})
	in.writeConfig(strings.ReplaceAll(dashboardSources, "%UP%", u.URL("")))
	d := in.start()
	eventually(t, 10*time.Second, "broken-x and broken-y in error, web-a ok", func() error {
		s := d.sources()
		if s["broken-x"].State != "error" || s["broken-y"].State != "error" || s["web-a"].State != "ok" {
			return errf("%v", s)
		}
		return nil
	})
	return d, u
}

// The page lists the sources; filtering to error shows only those; search
// narrows; the reset button brings an errored source back.
func TestDashboardBrowser(t *testing.T) {
	t.Parallel()
	start := time.Now()
	in := newInst(t)
	d, u := startDashboard(t, in)
	ctx := browser(t)
	base := "http://" + in.addr

	run(t, ctx, "load the overview", chromedp.Navigate(base+"/"), chromedp.WaitVisible(css("#sources tr.row")))
	if got, want := tableRows(t, ctx), []string{"web-a", "web-b", "broken-x", "broken-y"}; !slices.Equal(got, want) {
		t.Errorf("the overview lists %v, want %v", got, want)
	}
	why := get(t, ctx, "read an explanation", chromedp.Text(css(`tr[data-name="broken-x"] td.why`)))
	if !strings.HasPrefix(why, "error: 1 consecutive failures; last: GET ") || !strings.HasSuffix(why, "; reset to resume") {
		t.Errorf("broken-x's explanation: %q", why)
	}
	screenshot(t, ctx, t.TempDir(), "overview.png")

	// Filter: choosing "error" submits the form (by the page's script; its
	// button does the same without it).
	run(t, ctx, "filter to error",
		js(`(s => { s.value = "error"; s.dispatchEvent(new Event("change")); })(document.getElementById("state"))`),
		loaded(`location.search.includes("state=error") && document.getElementById("sources")`))
	if got, want := tableRows(t, ctx), []string{"broken-x", "broken-y"}; !slices.Equal(got, want) {
		t.Errorf("filtered to error: %v, want %v", got, want)
	}

	// Search narrows (the state filter set back to all, without its
	// change event): type, then press the button.
	run(t, ctx, "search for web",
		js(`document.getElementById("state").value = ""`),
		chromedp.SendKeys(css("#q"), "web"),
		chromedp.Click(css(`#filter button[type="submit"]`)),
		loaded(`location.search.includes("q=web") && document.getElementById("sources")`))
	if got, want := tableRows(t, ctx), []string{"web-a", "web-b"}; !slices.Equal(got, want) {
		t.Errorf("search web: %v, want %v", got, want)
	}

	// Reset through the source page's button, the upstream healed.
	u.Set("/x", behavior{})
	run(t, ctx, "reset broken-x",
		chromedp.Navigate(base+"/sources/broken-x"), chromedp.WaitVisible(css("#reset")),
		chromedp.Click(css("#reset")), chromedp.WaitVisible(css(".flash")))
	flash := get(t, ctx, "read the message", chromedp.Text(css(".flash")))
	if flash != "broken-x: reset" {
		t.Errorf("flash after reset: %q", flash)
	}
	eventually(t, 5*time.Second, "broken-x back (API)", func() error {
		if o := d.source("broken-x"); o.State != "ok" {
			return errf("%s", o)
		}
		return nil
	})
	if o := d.source("broken-y"); o.State != "error" {
		t.Errorf("broken-y left error without a reset: %s", o)
	}
	screenshot(t, ctx, t.TempDir(), "source.png")

	// The overview refreshes its table without reloading the page: a
	// change made through the API shows up, the page's own state (a mark
	// left in it) survives. It refreshes every 5 s: this waits at most 10.
	run(t, ctx, "load the overview again", chromedp.Navigate(base+"/"), chromedp.WaitVisible(css("#sources tr.row")),
		js(`window.pacerMark = 1`))
	if code, body := d.do(http.MethodPost, "/api/sources/web-b/pause", "", `{"reason": "refresh check"}`); code != http.StatusOK {
		t.Fatalf("pause web-b: %d %s", code, body)
	}
	run(t, ctx, "wait for the refresh",
		loaded(`window.pacerMark === 1 && document.querySelector('tr[data-name="web-b"]').dataset.state === "paused"`))
	if why := get(t, ctx, "read web-b's explanation", chromedp.Text(css(`tr[data-name="web-b"] td.why`))); why != "paused: refresh check" {
		t.Errorf("web-b's explanation after the refresh: %q", why)
	}
	t.Logf("browser test took %v", time.Since(start).Round(time.Millisecond))
}

// With token_file the page is read-only: an action is refused (401, the
// token form) and changes nothing until the token is entered in the form.
func TestDashboardBrowserToken(t *testing.T) {
	t.Parallel()
	start := time.Now()
	in := newInst(t)
	const token = "browser-t0ken-0123"
	writeFile(t, filepath.Join(in.dir, "token"), token+"\n")
	in.admin = "  token_file: token\n"
	d, u := startDashboard(t, in)
	// Healed, but in error: only a reset brings it back.
	u.Set("/x", behavior{})
	ctx := browser(t)
	base := "http://" + in.addr

	const resetDisabled = `document.getElementById("reset").disabled`
	run(t, ctx, "load broken-x's page",
		chromedp.Navigate(base+"/sources/broken-x"), chromedp.WaitVisible(css("#token-form")))
	if !get(t, ctx, "read the button", chromedp.Evaluate[bool](resetDisabled)) {
		t.Errorf("the reset button is enabled without the token")
	}
	// Submitting the form anyway (a disabled button does not stop a
	// script): 401 with the token form, nothing changed.
	run(t, ctx, "submit reset without a session",
		js(`document.querySelector('form[action$="/reset"]').submit()`),
		loaded(`document.title.startsWith("Token required")`))
	if o := d.source("broken-x"); o.State != "error" {
		t.Fatalf("a refused reset changed the state: %s", o)
	}
	// A wrong token: refused again.
	run(t, ctx, "enter a wrong token",
		chromedp.SendKeys(css("#token"), "wrong"), chromedp.Click(css(`#token-form button[type="submit"]`)),
		loaded(`document.body.innerText.includes("wrong token")`))
	// The right one: back to the page, the buttons enabled; reset works.
	run(t, ctx, "enter the token",
		chromedp.SendKeys(css("#token"), token), chromedp.Click(css(`#token-form button[type="submit"]`)),
		loaded(`location.pathname === "/sources/broken-x"`), chromedp.WaitVisible(css(".flash")))
	if get(t, ctx, "read the button", chromedp.Evaluate[bool](resetDisabled)) {
		t.Fatalf("the reset button is still disabled after the token")
	}
	run(t, ctx, "reset with a session",
		chromedp.Click(css("#reset")), loaded(`document.querySelector(".flash") && document.querySelector(".flash").innerText === "broken-x: reset"`))
	flash := get(t, ctx, "read the message", chromedp.Text(css(".flash")))
	if flash != "broken-x: reset" {
		t.Errorf("flash after reset: %q", flash)
	}
	eventually(t, 5*time.Second, "broken-x back (API)", func() error {
		if o := d.source("broken-x"); o.State != "ok" {
			return errf("%s", o)
		}
		return nil
	})
	screenshot(t, ctx, t.TempDir(), "token.png")
	t.Logf("browser token test took %v", time.Since(start).Round(time.Millisecond))
}
