package main

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"
)

// TestBrowserNodeLifecycle drives the console in a real headless Chromium
// against a real master process and real worker processes: log in, add a
// manual node (first with a bad host), connect, enable, disable (confirm
// dialog) and enable it from the live table without a page reload, watch the
// table notice a killed worker, see a refused Connect name the node, and
// delete it through the confirm dialog.
//
// With SM_SCREENSHOT=/path/to/file.png it also writes a full-page screenshot
// of the nodes page while both workers run (the README image).
func TestBrowserNodeLifecycle(t *testing.T) {
	t.Parallel()
	chromium := findChromium(t)

	m := startMaster(t, "")
	// An auto-registered worker: it must show up in the browser by itself.
	startWorker(t, m, "auto1")
	m.waitNode("auto1", 30*time.Second, "running", func(n *nodeJSON) bool { return n.Status == 2 })
	// A manual worker: it waits for the console to add and connect it.
	bw1, host := startWorker(t, m, "bw1", "--autor=false", "--workerof", "master")

	b := newBrowser(t, chromium)

	b.logIn(m, "/nodes", "nodes-table")
	b.wait("master row", 10*time.Second, attrJS("#node-master", "data-status"), equals("2"))
	b.wait("auto1 row, auto-registered", 10*time.Second, textJS("#node-auto1 [data-testid=status]"), equals("running"))

	// Add node: first with a bad host, which the form refuses inline.
	b.do("open the Add node form", 20*time.Second,
		chromedp.Click(chromedp.ID("add-node")),
		chromedp.WaitVisible(chromedp.ID("node-form")),
	)
	b.do("submit the form with a bad host", 20*time.Second,
		sendKeys(chromedp.ID("name"), "bw1"),
		sendKeys(chromedp.ID("host"), "nohost"),
		chromedp.Click(chromedp.ID("save-node")),
		chromedp.WaitVisible(chromedp.ID("error-host")),
	)
	b.wait("inline host error", 5*time.Second, textJS("#error-host"), nonEmpty)
	b.wait("no inline name error", 5*time.Second, textJS("#error-name"), equals(absent))
	if n := m.node("bw1"); n != nil {
		t.Fatalf("a node with a bad host was stored: %+v", n)
	}

	// Then valid values: the worker command follows the typing.
	b.do("fix the host", 20*time.Second,
		chromedp.WaitVisible(chromedp.ID("node-form")),
		// Clear the refused value, then type as a user does. (SetValue with ""
		// does not work in chromedp v0.23.0: the empty argument is dropped.)
		chromedp.Evaluate[chromedp.Void](`document.getElementById("host").value = ""`),
		sendKeys(chromedp.ID("host"), host),
	)
	b.wait("name kept after the refused submit", 5*time.Second, `document.getElementById("name").value`, equals("bw1"))
	b.wait("worker command for bw1", 10*time.Second, textJS("#worker-command"), func(s string) bool {
		return strings.Contains(s, "--identity=bw1") && strings.Contains(s, "--workerof=master") &&
			strings.Contains(s, "--port="+host[strings.LastIndex(host, ":")+1:])
	})
	b.do("save the node", 20*time.Second,
		chromedp.Click(chromedp.ID("save-node")),
		chromedp.WaitVisible(chromedp.ID("nodes-table")),
	)
	b.wait("location after save", 10*time.Second, `location.pathname`, equals("/nodes"))
	b.wait("success flash after save", 10*time.Second, textJS("#flash .flash-ok"), contains("bw1"))
	b.wait("bw1 row offline", 10*time.Second, attrJS("#node-bw1", "data-status"), equals("0"))
	b.wait("bw1 badge offline", 5*time.Second, textJS("#node-bw1 [data-testid=status]"), equals("offline"))
	if n := m.node("bw1"); n == nil || n.Status != 0 || n.Mode != "manual" || n.Host != host {
		t.Fatalf("bw1 after save: %+v, want offline manual node on %s", n, host)
	}

	// From here on the page must never reload: every action swaps fragments.
	b.run("set the no-reload marker", 5*time.Second, chromedp.Evaluate[chromedp.Void](`window.__noReload = 42`))

	b.do("click Connect", 20*time.Second, chromedp.Click(actionButton("connect", "bw1")))
	b.wait("Connect flash", 20*time.Second, textJS("#flash .flash-ok"), contains("Connect bw1"))
	b.wait("bw1 badge idle", 10*time.Second, textJS("#node-bw1 [data-testid=status]"), equals("idle"))
	b.wait("bw1 row idle", 5*time.Second, attrJS("#node-bw1", "data-status"), equals("1"))

	b.do("click Enable", 20*time.Second, chromedp.Click(actionButton("enable", "bw1")))
	b.wait("Enable flash", 20*time.Second, textJS("#flash .flash-ok"), contains("Enable bw1"))
	b.wait("bw1 badge running", 10*time.Second, textJS("#node-bw1 [data-testid=status]"), equals("running"))
	b.wait("bw1 Disable button", 5*time.Second, existsJS(`button[data-action=disable][data-node=bw1]`), equals("true"))
	m.waitNode("bw1", 10*time.Second, "running", func(n *nodeJSON) bool { return n.Status == 2 })
	b.checkMarker("after Connect and Enable")

	if path := os.Getenv("SM_SCREENSHOT"); path != "" {
		b.screenshot(path)
	}

	// Disable asks a confirm dialog (accepted by the dialog handler), then
	// Enable again: the worker is running when it dies.
	b.do("click Disable", 20*time.Second, chromedp.Click(actionButton("disable", "bw1")))
	b.wait("Disable flash", 20*time.Second, textJS("#flash .flash-ok"), contains("Disable bw1"))
	b.wait("bw1 badge idle after Disable", 10*time.Second, textJS("#node-bw1 [data-testid=status]"), equals("idle"))
	m.waitNode("bw1", 10*time.Second, "idle", func(n *nodeJSON) bool { return n.Status == 1 })
	b.do("click Enable again", 20*time.Second, chromedp.Click(actionButton("enable", "bw1")))
	b.wait("second Enable flash", 20*time.Second, textJS("#flash .flash-ok"), contains("Enable bw1"))
	b.wait("bw1 badge running again", 10*time.Second, textJS("#node-bw1 [data-testid=status]"), equals("running"))
	m.waitNode("bw1", 10*time.Second, "running", func(n *nodeJSON) bool { return n.Status == 2 })

	// Kill the worker: the live table must show it offline without a reload.
	bw1.kill()
	start := time.Now()
	b.wait("bw1 badge offline after the kill", 20*time.Second, textJS("#node-bw1 [data-testid=status]"), equals("offline"))
	t.Logf("the live table showed the killed worker offline after %s", time.Since(start).Round(100*time.Millisecond))
	b.checkMarker("after the worker died")

	// Connect to the dead worker is refused with a message naming the node.
	b.do("click Connect on the dead worker", 20*time.Second, chromedp.Click(actionButton("connect", "bw1")))
	msg := b.wait("error flash naming bw1", 20*time.Second, textJS("#flash .flash-error"), contains("bw1"))
	t.Logf("refused Connect says: %s", msg)
	b.wait("bw1 still offline", 5*time.Second, textJS("#node-bw1 [data-testid=status]"), equals("offline"))
	if n := m.node("bw1"); n == nil || n.Status != 0 {
		t.Fatalf("bw1 after a refused connect: %+v, want offline", n)
	}

	// Delete asks a confirm dialog, which the dialog handler accepts.
	b.do("click Delete", 20*time.Second, chromedp.Click(actionButton("delete", "bw1")))
	b.wait("bw1 row gone", 20*time.Second, existsJS("#node-bw1"), equals("false"))
	b.wait("Delete flash", 10*time.Second, textJS("#flash .flash-ok"), contains("Delete bw1"))
	if n := m.node("bw1"); n != nil {
		t.Fatalf("bw1 still exists after Delete: %+v", n)
	}
	if d := b.dialogMessages(); len(d) != 2 || !strings.Contains(d[0], "Disable node bw1") || !strings.Contains(d[1], "Delete node bw1") {
		t.Fatalf("confirm dialogs: %q, want one to disable bw1, then one to delete it", d)
	}
	b.wait("auto1 still running", 5*time.Second, textJS("#node-auto1 [data-testid=status]"), equals("running"))
	b.checkMarker("at the end")
	b.checkConsole()
}

// findChromium returns the Chromium binary, or skips (fails under
// SM_TEST_REQUIRE_ALL=1) when there is none.
func findChromium(t *testing.T) string {
	t.Helper()
	path := "/usr/bin/chromium"
	if _, err := os.Stat(path); err != nil {
		if p, lerr := exec.LookPath("chromium"); lerr == nil {
			path = p
		} else {
			msg := "no Chromium: neither /usr/bin/chromium nor chromium on PATH"
			if os.Getenv("SM_TEST_REQUIRE_ALL") == "1" {
				t.Fatal(msg + " (SM_TEST_REQUIRE_ALL=1)")
			}
			t.Skip(msg)
		}
	}
	return path
}

// absent is what textJS and attrJS give when no element matches.
const absent = "<absent>"

func textJS(sel string) string {
	return fmt.Sprintf(`(() => { const e = document.querySelector(%s); return e ? e.textContent.trim() : %q; })()`,
		strconv.Quote(sel), absent)
}

func attrJS(sel, attr string) string {
	return fmt.Sprintf(`(() => { const e = document.querySelector(%s); return e ? String(e.getAttribute(%s)) : %q; })()`,
		strconv.Quote(sel), strconv.Quote(attr), absent)
}

func existsJS(sel string) string {
	return fmt.Sprintf(`String(document.querySelector(%s) !== null)`, strconv.Quote(sel))
}

func actionButton(action, node string) chromedp.CSS {
	return chromedp.CSS(fmt.Sprintf(`button[data-action=%s][data-node=%s]`, action, node))
}

func equals(want string) func(string) bool { return func(s string) bool { return s == want } }

func contains(want string) func(string) bool {
	return func(s string) bool { return s != absent && strings.Contains(s, want) }
}

func nonEmpty(s string) bool { return s != "" && s != absent }

// logIn logs the browser in as admin from the login page, asking to go to
// next ("" for where login lands, the dashboard), and waits there for the
// element with id ready.
func (b *browser) logIn(m *masterProc, next, ready string) {
	b.t.Helper()
	page, want := "/login", "/dashboard"
	if next != "" {
		page, want = "/login?next="+url.QueryEscape(next), next
	}
	b.do("open the login page", 20*time.Second,
		chromedp.Navigate(m.URL+page),
		chromedp.WaitVisible(chromedp.ID("username")),
	)
	b.submitLogin("admin", adminPassword, ready)
	b.wait("location after login", 10*time.Second, `location.pathname`, equals(want))
}

// submitLogin fills in the login form on the page and waits for the element
// with id ready on the page the login leads to. That wait evaluates script,
// which is retried while the next page loads, instead of a chromedp query,
// which can hold a node of the page being replaced.
func (b *browser) submitLogin(user, password, ready string) {
	b.t.Helper()
	b.do("log in as "+user, 20*time.Second,
		sendKeys(chromedp.ID("username"), user),
		sendKeys(chromedp.ID("password"), password),
		chromedp.Click(chromedp.ID("login-submit")),
	)
	b.wait("logged in as "+user+": #"+ready+" shown", 20*time.Second, visibleJS("#"+ready), equals("true"))
}

// visibleJS gives "true" when an element matches sel and has a box on the page.
func visibleJS(sel string) string {
	return fmt.Sprintf(`(() => { const e = document.querySelector(%s); return String(e !== null && e.getClientRects().length > 0); })()`,
		strconv.Quote(sel))
}

// browser is one headless Chromium tab with its dialog handler and console log.
type browser struct {
	t   *testing.T
	ctx context.Context

	mu      sync.Mutex
	dialogs []string
	console []chromedp.ConsoleMessage
}

// sharedBrowser is the one headless Chromium that the browser tests share; the
// first test that needs it starts it and TestMain stops it.
var sharedBrowser sharedChromium

// sharedChromium starts Chromium once, with the flags this machine needs.
type sharedChromium struct {
	once  sync.Once
	ctx   context.Context // the browser's first tab: the browser lives as long as it
	err   error
	close func()
}

// get starts Chromium on the first call and returns the context of its first
// tab, from which each test makes a browser context of its own.
func (c *sharedChromium) get(execPath string) (context.Context, error) {
	c.once.Do(func() {
		dir, err := os.MkdirTemp("", "smchromium")
		if err != nil {
			c.err = err
			return
		}
		actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(),
			chromedp.ExecPath(execPath),
			chromedp.Headless,
			chromedp.NoSandbox,
			chromedp.DisableGPU,
			chromedp.NoFirstRun,
			chromedp.NoDefaultBrowserCheck,
			chromedp.Flag("disable-quic", true),
			chromedp.Flag("disable-background-networking", true),
			chromedp.Flag("disable-component-update", true),
			chromedp.Flag("disable-sync", true),
			chromedp.Flag("disable-dev-shm-usage", true),
			chromedp.Flag("disable-extensions", true),
			// Tests run side by side, each in its own window: none may be
			// slowed down as a window in the background.
			chromedp.Flag("disable-background-timer-throttling", true),
			chromedp.Flag("disable-backgrounding-occluded-windows", true),
			chromedp.Flag("disable-renderer-backgrounding", true),
			chromedp.UserDataDir(dir),
			chromedp.WindowSize(1280, 800),
		)
		ctx, cancelCtx := chromedp.NewContext(actx)
		c.close = func() {
			// Close the browser gracefully (bounded), then make sure the
			// process is gone before its profile dir is removed.
			cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			_ = chromedp.Cancel(cctx)
			cancel()
			cancelCtx()
			cancelAlloc()
			os.RemoveAll(dir)
		}
		// The first run starts the browser; its context must live as long
		// as the browser, so it is ctx itself, not one with a timeout: the
		// start is bounded here instead, so a hang fails the test.
		started := make(chan error, 1)
		go func() { started <- chromedp.Do(ctx) }()
		select {
		case err := <-started:
			if err != nil {
				c.err = err
				return
			}
			c.ctx = ctx
		case <-time.After(60 * time.Second):
			c.err = errors.New("Chromium did not start within 60s")
			cancelCtx()
		}
	})
	return c.ctx, c.err
}

// stop stops the shared Chromium if a test started it.
func (c *sharedChromium) stop() {
	if c.close != nil {
		c.close()
	}
}

// newBrowser opens a browser for the test in the shared Chromium. The whole
// browser session is bounded, so a hang fails the test instead of blocking.
func newBrowser(t *testing.T, execPath string) *browser {
	t.Helper()
	return newBrowserWithin(t, execPath, 85*time.Second)
}

// newBrowserWithin is newBrowser with a longer (or shorter) budget for the
// whole session, for tests that visit many pages.
//
// Each test gets a browser context of its own (cookies, storage and windows
// apart, as an incognito window) with one tab, in the one Chromium process
// that all browser tests share: starting a Chromium per test cost a second
// or more each, and the contexts keep the tests apart as separate browsers
// did.
func newBrowserWithin(t *testing.T, execPath string, budget time.Duration) *browser {
	t.Helper()
	shared, err := sharedBrowser.get(execPath)
	if err != nil {
		t.Fatalf("start Chromium: %v", err)
	}
	// The budget is what the session takes on a quiet machine; a loaded CI
	// machine (two cores shared with the other test packages) has taken
	// over twice that. Every step has a timeout of its own, which is what
	// catches a hang, so the whole session gets four times its budget.
	root, cancelRoot := context.WithTimeout(shared, 4*budget)
	ctx, cancelCtx := chromedp.NewContext(root, chromedp.WithNewBrowserContext())
	b := &browser{t: t, ctx: ctx}

	var wg sync.WaitGroup
	t.Cleanup(func() {
		// Cancel closes the tab and disposes of the browser context, and
		// waits for that, so the shared browser does not gather tabs.
		if err := chromedp.Cancel(ctx); err != nil && !errors.Is(err, context.Canceled) {
			t.Logf("close the browser context: %v", err)
		}
		cancelCtx()
		cancelRoot()
		wg.Wait()
	})

	// Open the tab now, so that the subscriptions below see every event of
	// the pages. The tab lives as long as ctx, which root bounds.
	if _, err := chromedp.Run(ctx, chromedp.EmulateViewport(1280, 800)); err != nil {
		t.Fatalf("open a tab in Chromium: %v", err)
	}
	// Only one window of a browser has the focus; the page must behave as
	// the focused one it was when each test had a browser of its own (the
	// copy buttons write the clipboard, which needs a focused page).
	if _, err := chromedp.Call(ctx, emulation.SetFocusEmulationEnabled, emulation.SetFocusEmulationEnabledParams{Enabled: true}); err != nil {
		t.Fatalf("emulate a focused page: %v", err)
	}

	// Accept every confirm dialog (Disable and Delete ask one), from another
	// goroutine: the click that opened it waits until it is closed.
	dialogs := chromedp.Events(ctx, page.JavascriptDialogOpening)
	wg.Add(1)
	go func() {
		defer wg.Done()
		for ev, err := range dialogs {
			if err != nil {
				return
			}
			b.mu.Lock()
			b.dialogs = append(b.dialogs, ev.Message)
			b.mu.Unlock()
			_, err := chromedp.Call(ctx, page.HandleJavaScriptDialog, page.HandleJavaScriptDialogParams{Accept: true})
			if err != nil && ctx.Err() == nil {
				b.mu.Lock()
				b.dialogs = append(b.dialogs, "accept failed: "+err.Error())
				b.mu.Unlock()
			}
		}
	}()

	messages := chromedp.Console(ctx)
	wg.Add(1)
	go func() {
		defer wg.Done()
		for msg, err := range messages {
			if err != nil {
				return
			}
			b.mu.Lock()
			b.console = append(b.console, msg)
			b.mu.Unlock()
		}
	}()
	return b
}

// run runs one action with its own deadline; an error fails the test.
// sendKeys types v into the element sel as chromedp.SendKeys does, by
// focusing it and sending the keys. chromedp v0.23.0's SendKeys reads the
// node's attributes before taking the node's lock (query.go), a data race
// with a page that changes an attribute of the input as it is typed into
// (the task form does as it validates); -race reports it and fails every
// test running at the time.
func sendKeys[S chromedp.Selectable](sel S, v string, opts ...chromedp.QueryOption) chromedp.Action[chromedp.Void] {
	// Visible first, as SendKeys waits for.
	return chromedp.Steps(chromedp.Focus(sel, append([]chromedp.QueryOption{chromedp.NodeVisible}, opts...)...), chromedp.KeyEvent(v))
}

// stepSlack multiplies every step's timeout. The timeouts are what a step
// takes on a quiet machine, with room; a CI machine whose two cores also run
// a Galera cluster and the race-instrumented packages has taken more than
// twice that. A step polls its condition, so the slack costs time only when
// the step fails.
const stepSlack = 3

func (b *browser) run(what string, timeout time.Duration, a chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	b.runFor(what, stepSlack*timeout, a)
}

// runFor is run with a timeout already given its slack.
func (b *browser) runFor(what string, timeout time.Duration, a chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, timeout)
	defer cancel()
	if _, err := chromedp.Run(ctx, a); err != nil {
		b.fatalf("%s: %v", what, err)
	}
}

// do runs the steps in order with one deadline for all of them.
func (b *browser) do(what string, timeout time.Duration, steps ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	b.doFor(what, stepSlack*timeout, steps...)
}

// doFor is do with a timeout already given its slack.
func (b *browser) doFor(what string, timeout time.Duration, steps ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	// A person cannot click within the milliseconds between a swap and htmx
	// wiring the new buttons, but chromedp can: a form clicked then submits
	// natively and reloads the page. Wait until htmx is idle and every htmx
	// form on the page is wired.
	b.waitFor(what+": htmx idle", timeout, `String(document.querySelectorAll('.htmx-request,.htmx-swapping,.htmx-settling,.htmx-added').length === 0 &&
		[...document.querySelectorAll('[hx-post],[hx-get]')].every(e => e['htmx-internal-data'] && e['htmx-internal-data'].initHash))`, equals("true"))
	// The first step (a click, say) whose element a live refresh replaced
	// between chromedp finding it and acting on it fails with "Could not
	// find node with given id" before anything was done: find it again.
	// The steps after it (waiting for what the click shows) then run once.
	// (A click followed by a wait, on the event log's live rows, failed so
	// when only lone steps were retried.)
	if len(steps) == 0 {
		return
	}
	deadline := time.Now().Add(timeout)
	for {
		ctx, cancel := context.WithTimeout(b.ctx, time.Until(deadline))
		_, err := chromedp.Run(ctx, steps[0])
		cancel()
		if err == nil {
			if len(steps) > 1 {
				b.runFor(what, time.Until(deadline), chromedp.Steps(steps[1:]...))
			}
			return
		}
		if !strings.Contains(err.Error(), "Could not find node with given id") || time.Now().After(deadline) {
			b.fatalf("%s: %v", what, err)
		}
		b.t.Logf("%s: the element was replaced while acting on it; finding it again", what)
		select {
		case <-b.ctx.Done():
			b.fatalf("%s: %v", what, err)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// clickUntil makes click (on an element of a live-refreshed list) until the
// state its click produces shows: after each click it polls state (a
// JavaScript expression giving a string) for a while, and clicks again only
// when ok still does not hold, so a click lost to a refresh (the row
// swapped under the press) is made again rather than waited for. Each click
// goes through do, which waits until htmx is idle, and the console holds a
// live refresh back while a pointer is pressed in its region. state must
// read what the click changes (a checkbox's checked state, say), not a later
// outcome, so that a click that did land is never made twice.
func (b *browser) clickUntil(what string, timeout time.Duration, click chromedp.Action[chromedp.Void], state string, ok func(string) bool) string {
	b.t.Helper()
	timeout *= stepSlack
	deadline := time.Now().Add(timeout)
	for try := 1; ; try++ {
		b.doFor(fmt.Sprintf("%s (click %d)", what, try), time.Until(deadline), click)
		var last string
		for settle := time.Now().Add(2 * time.Second); ; {
			ctx, cancel := context.WithTimeout(b.ctx, 5*time.Second)
			v, err := chromedp.Run(ctx, chromedp.Evaluate[string](state))
			cancel()
			if err == nil && ok(v) {
				return v
			}
			last = v
			if b.ctx.Err() != nil {
				b.fatalf("%s: the browser session ended: %v", what, b.ctx.Err())
			}
			if time.Now().After(settle) {
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
		if time.Now().After(deadline) {
			b.fatalf("%s: not there after %d clicks in %s (last value %q)", what, try, timeout, last)
		}
		b.t.Logf("%s: click %d did not take (state %q); clicking again", what, try, last)
	}
}

// tick sets the checkbox with the given id in a live-refreshed list to want
// (clicking it only if it is not so already, and again if a click was lost)
// and returns once it is.
func (b *browser) tick(what string, timeout time.Duration, id string, want bool) {
	b.t.Helper()
	state := fmt.Sprintf(`String(document.getElementById(%q) ? document.getElementById(%q).checked : "absent")`, id, id)
	wantS := fmt.Sprint(want)
	if b.wait(what+": the box is there", timeout, state, func(v string) bool { return v != "absent" }) == wantS {
		return
	}
	b.clickUntil(what, timeout, chromedp.Click(chromedp.ID(id)), state, equals(wantS))
}

// wait polls the JavaScript expression (which gives a string) until ok holds,
// or fails with the last value after the timeout. An evaluation error, as
// during a navigation, is retried.
func (b *browser) wait(what string, timeout time.Duration, expr string, ok func(string) bool) string {
	b.t.Helper()
	return b.waitFor(what, stepSlack*timeout, expr, ok)
}

// waitFor is wait with a timeout already given its slack.
func (b *browser) waitFor(what string, timeout time.Duration, expr string, ok func(string) bool) string {
	b.t.Helper()
	deadline := time.Now().Add(timeout)
	var last string
	var lastErr error
	for {
		ctx, cancel := context.WithTimeout(b.ctx, 5*time.Second)
		v, err := chromedp.Run(ctx, chromedp.Evaluate[string](expr))
		cancel()
		if err == nil && ok(v) {
			return v
		}
		last, lastErr = v, err
		if b.ctx.Err() != nil {
			b.fatalf("%s: the browser session ended: %v", what, b.ctx.Err())
		}
		if time.Now().After(deadline) {
			b.fatalf("%s: not there after %s (last value %q, last error %v)", what, timeout, last, lastErr)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// checkMarker proves the page was not reloaded since the marker was set.
func (b *browser) checkMarker(when string) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 5*time.Second)
	defer cancel()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[int](`window.__noReload`))
	if errors.Is(err, chromedp.ErrJSUndefined) {
		b.fatalf("%s: the page was reloaded (window.__noReload is gone)", when)
	}
	if err != nil || v != 42 {
		b.fatalf("%s: window.__noReload = %d, %v; want 42", when, v, err)
	}
}

// screenshot writes a full-page PNG of the current page at 1280x800.
func (b *browser) screenshot(path string) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 20*time.Second)
	defer cancel()
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		b.fatalf("screenshot: %v", err)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		b.fatalf("screenshot: %v", err)
	}
	if err := os.WriteFile(path, png, 0o644); err != nil {
		b.fatalf("screenshot: %v", err)
	}
	b.t.Logf("wrote the nodes page screenshot to %s (%d bytes)", path, len(png))
}

func (b *browser) dialogMessages() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]string(nil), b.dialogs...)
}

// checkConsole fails on an uncaught script error or a Content-Security-Policy
// violation: the console must work under its strict CSP.
func (b *browser) checkConsole() {
	b.t.Helper()
	b.mu.Lock()
	msgs := append([]chromedp.ConsoleMessage(nil), b.console...)
	b.mu.Unlock()
	for _, msg := range msgs {
		b.t.Logf("browser console: %s (%s)", msg, msg.URL)
		if msg.IsException() || strings.Contains(msg.Text, "Content Security Policy") {
			b.t.Errorf("browser console: %s (%s:%d)", msg, msg.URL, msg.Line)
		}
	}
}

// fatalf fails the test with the page's location and body text for context.
func (b *browser) fatalf(format string, args ...any) {
	b.t.Helper()
	if b.ctx.Err() == nil {
		ctx, cancel := context.WithTimeout(b.ctx, 3*time.Second)
		loc, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`location.href`))
		body, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`document.body ? document.body.innerText : ""`))
		cancel()
		b.t.Logf("page %s:\n%s", loc, body)
	}
	b.t.Fatalf(format, args...)
}
