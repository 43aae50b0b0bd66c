package main

import (
	"encoding/json"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"
)

// focusedJS describes the focused element: its data-action and the node or
// task it acts on, "message" for the result message, or its tag.
const focusedJS = `(() => { const e = document.activeElement;
	if (!e || e === document.body) return "body";
	if (e.classList.contains("flash")) return "message";
	return (e.getAttribute("data-action") || e.tagName.toLowerCase()) + " " + (e.getAttribute("data-node") || e.getAttribute("data-task") || ""); })()`

// pressEnterOn focuses the element sel matches and presses Enter on it, as a
// keyboard user does.
func (b *browser) pressEnterOn(what, sel string) {
	b.t.Helper()
	b.do(what, 20*time.Second,
		chromedp.Focus(chromedp.CSS(sel)),
		chromedp.KeyEvent(kb.Enter),
	)
}

// TestBrowserFocusSurvivesActions drives actions from the keyboard: after
// Connect the focus is on the row's Enable, after Enable on its Disable;
// after a task's Start on its Stop; after Run now on Run now again; after a
// Delete (the row is gone) on the result message. The page's one polite
// live region says each outcome.
func TestBrowserFocusSurvivesActions(t *testing.T) {
	t.Parallel()
	chromium := findChromium(t)
	m := startMaster(t, "")
	_, host := startWorker(t, m, "fw1", "--autor=false", "--workerof", "master")
	if st, body := m.api("POST", "/api/v1/nodes", `{"name":"fw1","host":"`+host+`"}`); st != http.StatusCreated {
		t.Fatalf("add node: %d %s", st, body)
	}
	b := newBrowserWithin(t, chromium, 120*time.Second)
	b.logIn(m, "/nodes", "nodes-table")
	b.wait("one live region in the layout", 5*time.Second, `String(document.querySelectorAll("[aria-live]").length) + " " +
		document.querySelector("[aria-live]").id + " " + document.querySelector("[aria-live]").getAttribute("aria-live")`, equals("1 announcer polite"))

	b.pressEnterOn("Connect fw1 by the keyboard", `button[data-action=connect][data-node=fw1]`)
	b.wait("Connect done", 20*time.Second, textJS("#node-fw1 [data-testid=status]"), equals("idle"))
	b.wait("the focus on Enable fw1", 10*time.Second, focusedJS, equals("enable fw1"))
	b.wait("the outcome said in the live region", 5*time.Second, textJS("#announcer"), contains("Connect fw1"))

	b.do("Enter on Enable", 20*time.Second, chromedp.KeyEvent(kb.Enter))
	b.wait("Enable done", 20*time.Second, textJS("#node-fw1 [data-testid=status]"), equals("running"))
	b.wait("the focus on Disable fw1", 10*time.Second, focusedJS, equals("disable fw1"))
	b.wait("the outcome said", 5*time.Second, textJS("#announcer"), contains("Enable fw1"))

	tg := newTarget(t)
	tk := m.createTask(`{"title":"focus task","type":"http","schedule":{"kind":"interval","every":"1h"},
		"http":{"method":"GET","url":"` + tg.URL + `/ok"},"executors":["fw1"]}`)
	gone := m.createTask(`{"title":"focus task to delete","type":"http","schedule":{"kind":"interval","every":"1h"},
		"http":{"method":"GET","url":"` + tg.URL + `/ok"},"executors":["fw1"]}`)
	b.do("open the tasks", 20*time.Second, chromedp.Navigate(m.URL+"/tasks"), chromedp.WaitVisible(chromedp.ID("tasks-table")))
	b.pressEnterOn("Start by the keyboard", `button[data-action=start][data-task="`+tk.ID+`"]`)
	b.wait("started", 20*time.Second, textJS("#task-"+tk.ID+" [data-testid=status]"), equals("running"))
	b.wait("the focus on the task's Stop", 10*time.Second, focusedJS, equals("stop "+tk.ID))
	b.wait("the start said", 5*time.Second, textJS("#announcer"), nonEmpty)
	b.wait("a running task's Edit offered (edited in place)", 5*time.Second, attrJS(`#task-`+tk.ID+` a[data-action=edit]`, "href"), equals("/tasks/"+tk.ID+"/edit"))

	b.pressEnterOn("Delete by the keyboard (confirmed)", `button[data-action=delete][data-task="`+gone.ID+`"]`)
	b.wait("the row gone", 20*time.Second, existsJS("#task-"+gone.ID), equals("false"))
	b.wait("the focus on the message", 10*time.Second, focusedJS, equals("message"))
	b.wait("the message said", 5*time.Second, textJS("#announcer"), contains("focus task to delete"))

	// A bulk action: the bar it was pressed in stays, and so does the focus
	// (on the message when the button could not keep it).
	b.tick("tick the task", 10*time.Second, "select-"+tk.ID, true)
	b.wait("one selected", 5*time.Second, textJS("#bulk-count"), equals("1 selected"))
	b.pressEnterOn("bulk Pause by the keyboard (confirmed)", `button[data-bulk=pause]`)
	b.wait("paused", 20*time.Second, textJS("#task-"+tk.ID+" [data-testid=status]"), equals("paused"))
	b.wait("the focus kept by the bulk button or on the message", 10*time.Second,
		`document.activeElement.getAttribute("data-bulk") || (document.activeElement.classList.contains("flash") ? "message" : document.activeElement.tagName)`,
		func(s string) bool { return s == "pause" || s == "message" })
	b.wait("the bulk message said", 5*time.Second, textJS("#announcer"), nonEmpty)
	b.pressEnterOn("Resume by the keyboard", `button[data-action=resume][data-task="`+tk.ID+`"]`)
	b.wait("resumed", 20*time.Second, textJS("#task-"+tk.ID+" [data-testid=status]"), equals("running"))
	b.wait("the focus on Pause", 10*time.Second, focusedJS, equals("pause "+tk.ID))

	b.do("open the task", 20*time.Second, chromedp.Navigate(m.URL+"/tasks/"+tk.ID), chromedp.WaitVisible(chromedp.ID("task-live")))
	b.pressEnterOn("Run now by the keyboard", `#task-live button[data-action=run]`)
	b.wait("the run recorded", 20*time.Second, textJS("#run-count"), func(s string) bool { return s != "0" && s != absent })
	b.wait("the focus back on Run now", 10*time.Second, focusedJS, equals("run "+tk.ID))
	b.wait("the run said", 5*time.Second, textJS("#announcer"), nonEmpty)
	b.wait("Edit offered on the running task's page", 5*time.Second, attrJS(`#task-live a[data-action=edit]`, "href"), equals("/tasks/"+tk.ID+"/edit"))
	b.checkConsole()
}

// TestBrowserFailuresGroupedAndDelayedNames: a task that fails every second
// and a delayed task that fails are one line each on the dashboard, with
// their count, their last error in one line and links to their failed runs;
// the delayed one is named by its topic and key, not its id, on the
// dashboard and in the delayed list, where a pending one says how soon it is
// due. Dangerous buttons look unlike everyday ones.
//
// With SM_SCREENSHOT_A11Y_DIR=/some/dir it writes screenshots of the
// dashboard and a node page at 1280 and 390 pixels there.
func TestBrowserFailuresGroupedAndDelayedNames(t *testing.T) {
	t.Parallel()
	chromium := findChromium(t)
	m := startMaster(t, "")
	startWorker(t, m, "gw1")
	m.waitNode("gw1", 30*time.Second, "running", func(n *nodeJSON) bool { return n.Status == 2 })
	if st, body := m.api("POST", "/api/v1/nodes", `{"name":"gw-manual","host":"127.0.0.1:9"}`); st != http.StatusCreated {
		t.Fatalf("add node: %d %s", st, body)
	}
	tg := newTarget(t)
	failing := m.createTask(`{"title":"` + longWord + `","type":"http","schedule":{"kind":"interval","every":"1s"},
		"http":{"method":"GET","url":"` + tg.URL + `/fail"},"executors":["gw1"]}`)
	m.taskAction(failing.ID, "start")
	var pending, broken struct {
		ID string `json:"id"`
	}
	st, body := m.api("POST", "/api/v1/delayed", `{"source_app":"shop","topic":"order-timeout","content_key":"order-4711","delay":"30m","notify_url":"`+tg.URL+`/cb"}`)
	if st != http.StatusCreated || json.Unmarshal([]byte(body), &pending) != nil {
		t.Fatalf("create delayed: %d %s", st, body)
	}
	st, body = m.api("POST", "/api/v1/delayed", `{"source_app":"shop","topic":"invoice-reminder","content_key":"invoice-99","delay":"1s","notify_url":"`+tg.URL+`/fail"}`)
	if st != http.StatusCreated || json.Unmarshal([]byte(body), &broken) != nil {
		t.Fatalf("create delayed: %d %s", st, body)
	}
	m.waitRuns(failing.ID, 30*time.Second, "three failed runs", func(r []runJSON) bool { return len(r) >= 3 })
	deadline := time.Now().Add(30 * time.Second)
	for d := m.delayed(broken.ID); d.Status != "failed"; d = m.delayed(broken.ID) {
		if time.Now().After(deadline) {
			t.Fatalf("the delayed task to a failing URL: %+v, want failed", d)
		}
		time.Sleep(100 * time.Millisecond)
	}

	b := newBrowserWithin(t, chromium, 120*time.Second)
	b.logIn(m, "", "dash-live")
	row := "#failures-" + failing.ID
	b.wait("the failing task is one line", 15*time.Second, countJS(`#failures-table tr[id="failures-`+failing.ID+`"]`), equals("1"))
	b.wait("with its failures counted", 5*time.Second, attrJS(row, "data-count"), atLeast(3))
	b.wait("its last error in one line", 5*time.Second, textJS(row+" td.excerpt"), contains("boom"))
	b.wait("the last error cut, not wrapped", 5*time.Second, `getComputedStyle(document.querySelector("`+row+` td.excerpt")).whiteSpace`, equals("nowrap"))
	runsLink := b.wait("a link to its failed runs", 5*time.Second, attrJS(row+" a.failure-runs", "href"), contains("task="+failing.ID))
	u, err := url.Parse(runsLink)
	if err != nil || u.Query().Get("result") != "failed" || u.Query().Get("since") == "" {
		t.Fatalf("runs link %q: want the task's failed runs since a time", runsLink)
	}
	drow := `#dash-failures tr[data-delayed]`
	b.wait("the delayed task named by its topic", 15*time.Second, textJS(drow+" a.failure-topic"), equals("invoice-reminder"))
	b.wait("and its key, linked to it", 5*time.Second, attrJS(drow+` a[href="/delayed/`+broken.ID+`"]`, "title"), equals("invoice-99"))
	b.wait("no bare id on the dashboard", 5*time.Second, `String(document.querySelector("#dash-failures").innerText.includes("`+broken.ID+`"))`, equals("false"))
	b.wait("two groups", 5*time.Second, countJS("#failures-table tbody tr"), equals("2"))

	shots := os.Getenv("SM_SCREENSHOT_A11Y_DIR")
	if shots != "" {
		writeScreenshot(b, filepath.Join(shots, "dashboard-1280.png"), "dashboard at 1280")
	}

	b.do("follow the failed runs link", 20*time.Second, chromedp.Click(chromedp.CSS(row+" a.failure-runs")), chromedp.WaitVisible(chromedp.ID("run-list-table")))
	b.wait("only its failed runs", 10*time.Second, `(() => { const rs = [...document.querySelectorAll("#run-list-table tbody tr[id]")];
		return rs.length > 0 && rs.every(r => r.querySelector("[data-testid=result]").textContent.trim() === "failed") ? "ok" : "rows " + rs.length; })()`, equals("ok"))

	b.do("open the delayed task's runs", 20*time.Second, chromedp.Navigate(m.URL+"/runs?task="+broken.ID), chromedp.WaitVisible(chromedp.ID("run-list-table")))
	b.wait("its run named by topic and key", 10*time.Second, textJS("#run-list-table a.delayed-run"), equals("invoice-reminder"))
	b.wait("with its key", 5*time.Second, textJS("#run-list-table .delayed-run-key"), equals("invoice-99"))

	b.do("open the delayed list", 20*time.Second, chromedp.Navigate(m.URL+"/delayed"), chromedp.WaitVisible(chromedp.ID("delayed-table")))
	b.wait("the pending one by its topic", 10*time.Second, textJS("#delayed-"+pending.ID+" [data-testid=topic]"), equals("order-timeout"))
	b.wait("and its key", 5*time.Second, textJS("#delayed-"+pending.ID+" [data-testid=key]"), equals("order-4711"))
	b.wait("due in about 30 minutes", 5*time.Second, textJS("#delayed-"+pending.ID+" [data-testid=due-rel]"), func(s string) bool {
		return s == "in 29m" || s == "in 30m"
	})

	b.do("open the nodes", 20*time.Second, chromedp.Navigate(m.URL+"/nodes"), chromedp.WaitVisible(chromedp.ID("nodes-table")))
	b.wait("Delete looks dangerous", 5*time.Second, `(() => { const d = getComputedStyle(document.querySelector("button[data-action=delete][data-node=gw-manual]"));
		const c = getComputedStyle(document.querySelector("button[data-action=connect][data-node=gw-manual]"));
		return d.backgroundColor !== c.backgroundColor && d.borderColor !== c.borderColor ? "ok" : d.backgroundColor + " " + d.borderColor; })()`, equals("ok"))
	b.wait("and stands apart", 5*time.Second, `String(!!document.querySelector("#node-gw-manual .danger-actions button[data-action=delete]"))`, equals("true"))

	if shots != "" {
		b.do("open a node page", 20*time.Second, chromedp.Navigate(m.URL+"/nodes/gw1"), chromedp.WaitVisible(chromedp.ID("node-title")))
		writeScreenshot(b, filepath.Join(shots, "node-1280.png"), "node page at 1280")
		b.run("phone viewport", 10*time.Second, chromedp.EmulateViewport(390, 844, chromedp.EmulateMobile, chromedp.EmulateTouch))
		b.do("reload the node page", 20*time.Second, chromedp.Navigate(m.URL+"/nodes/gw1"), chromedp.WaitVisible(chromedp.ID("node-title")))
		writeScreenshot(b, filepath.Join(shots, "node-390.png"), "node page at 390")
		b.do("open the dashboard", 20*time.Second, chromedp.Navigate(m.URL+"/dashboard"), chromedp.WaitVisible(chromedp.ID("dash-live")))
		b.wait("the failures shown", 10*time.Second, existsJS("#failures-table"), equals("true"))
		writeScreenshot(b, filepath.Join(shots, "dashboard-390.png"), "dashboard at 390")
	}
	b.checkConsole()
}
