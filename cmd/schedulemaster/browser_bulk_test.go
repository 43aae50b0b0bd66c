package main

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// checkedJS gives the checked state of each checkbox, "true false …", by id.
func checkedJS(ids ...string) string {
	return fmt.Sprintf(`%q.split(" ").map(id => { const e = document.getElementById(id); return e ? String(e.checked) : "absent"; }).join(" ")`,
		strings.Join(ids, " "))
}

// TestBrowserBulkActions drives the task list's bulk actions in a real
// headless Chromium against a real master and worker: two of three running
// tasks are selected; the list keeps polling (a third task paused meanwhile
// shows up paused) and the selection survives each refresh; Pause selected
// asks one confirmation naming the two tasks, and both end paused with one
// toast naming them, without a reload. Select all picks every row of the
// page; with nothing selected the buttons are disabled. At phone width the
// checkboxes and the bulk buttons stay on the screen.
func TestBrowserBulkActions(t *testing.T) {
	t.Parallel()
	chromium := findChromium(t)
	m := startMaster(t, "")
	startWorker(t, m, "bk1")
	m.waitNode("bk1", 30*time.Second, "running", func(n *nodeJSON) bool { return n.Status == 2 })
	tg := newTarget(t)
	task := func(title string) taskJSON {
		tk := m.createTask(`{"title":"` + title + `","type":"http","schedule":{"kind":"interval","every":"1h"},
			"http":{"method":"GET","url":"` + tg.URL + `/` + title + `"},"executors":["bk1"]}`)
		m.taskAction(tk.ID, "start")
		return tk
	}
	a, bt, c := task("backup"), task("report"), task("sync")
	sel := func(tk taskJSON) string { return "select-" + tk.ID }

	b := newBrowserWithin(t, chromium, 120*time.Second)
	b.logIn(m, "", "dash-live")
	b.do("open Tasks", 20*time.Second, chromedp.Navigate(m.URL+"/tasks"), chromedp.WaitVisible(chromedp.ID("tasks-table")))
	b.wait("three running rows", 10*time.Second, countJS(`#task-rows tr[data-status="1"]`), equals("3"))
	b.wait("a checkbox per row", 5*time.Second, countJS("#task-rows input.row-select"), equals("3"))
	b.wait("nothing selected", 5*time.Second, textJS("#bulk-count"), equals("none selected"))
	b.wait("the buttons wait for a selection", 5*time.Second, `String([...document.querySelectorAll("[data-bulk]")].every(e => e.disabled))`, equals("true"))
	b.run("set the no-reload marker", 5*time.Second, chromedp.Evaluate[chromedp.Void](`window.__noReload = 42`))

	b.tick("select backup", 20*time.Second, sel(a), true)
	b.wait("one selected", 5*time.Second, textJS("#bulk-count"), equals("1 selected"))
	b.tick("select report", 20*time.Second, sel(bt), true)
	b.wait("two selected", 5*time.Second, textJS("#bulk-count"), equals("2 selected"))
	b.wait("the boxes", 5*time.Second, checkedJS(sel(a), sel(bt), sel(c)), equals("true true false"))
	b.wait("select all half ticked", 5*time.Second, `String(document.getElementById("select-all").indeterminate)`, equals("true"))

	// The list keeps polling: sync paused by someone else shows up, and the
	// selection is still there after the refreshes.
	b.run("mark the live part", 5*time.Second, chromedp.Evaluate[chromedp.Void](`document.getElementById("tasks-live").__old = true`))
	m.taskAction(c.ID, "pause")
	b.wait("sync paused by the refresh", 15*time.Second, attrJS("#task-"+c.ID, "data-status"), equals("2"))
	b.wait("the live part was replaced", 5*time.Second, `String(document.getElementById("tasks-live").__old === true)`, equals("false"))
	b.run("mark it again", 5*time.Second, chromedp.Evaluate[chromedp.Void](`document.getElementById("tasks-live").__old = true`))
	b.wait("another refresh", 15*time.Second, `String(document.getElementById("tasks-live").__old === true)`, equals("false"))
	b.wait("the selection survived the refreshes", 5*time.Second, checkedJS(sel(a), sel(bt), sel(c)), equals("true true false"))
	b.wait("still two selected", 5*time.Second, textJS("#bulk-count"), equals("2 selected"))
	// A refresh is held back while a pointer is pressed in the list: with
	// the button down on sync's checkbox, a poll is answered and the live
	// part stays; the release then ticks sync (the click is not lost), and
	// the next poll refreshes again.
	b.run("count the polls", 5*time.Second, chromedp.Evaluate[chromedp.Void](`window.__polls = 0;
		document.addEventListener("htmx:afterRequest", e => { if (e.detail.elt.id === "tasks-live") { window.__polls++; } })`))
	box := b.wait("sync's checkbox on the screen", 5*time.Second, fmt.Sprintf(`(() => { const r = document.getElementById(%q).getBoundingClientRect();
		return r.width > 0 ? (r.x + r.width/2) + " " + (r.y + r.height/2) : ""; })()`, sel(c)), nonEmpty)
	var x, y float64
	if _, err := fmt.Sscan(box, &x, &y); err != nil {
		t.Fatalf("checkbox position %q: %v", box, err)
	}
	b.run("press", 5*time.Second, chromedp.MouseEvent(chromedp.MousePressed, x, y, chromedp.ButtonLeft, chromedp.ClickCount(1)))
	b.run("mark the live part under the press", 5*time.Second, chromedp.Evaluate[chromedp.Void](`document.getElementById("tasks-live").__old = true;
		window.__polls = 0`))
	b.wait("two polls answered while pressed", 20*time.Second, `String(window.__polls >= 2)`, equals("true"))
	b.wait("the live part kept under the press", 5*time.Second, `String(document.getElementById("tasks-live").__old === true)`, equals("true"))
	b.run("release", 5*time.Second, chromedp.MouseEvent(chromedp.MouseReleased, x, y, chromedp.ButtonLeft, chromedp.ClickCount(1)))
	b.wait("the click after the held refresh ticked sync", 5*time.Second, checkedJS(sel(a), sel(bt), sel(c)), equals("true true true"))
	b.wait("refreshed again after the release", 15*time.Second, `String(document.getElementById("tasks-live").__old === true)`, equals("false"))
	b.tick("untick sync", 20*time.Second, sel(c), false)
	b.wait("two selected again", 5*time.Second, textJS("#bulk-count"), equals("2 selected"))
	if path := os.Getenv("SM_SCREENSHOT_BULK"); path != "" {
		b.screenshot(path)
	}

	// One confirmation, naming the two tasks; both paused; one toast naming them.
	before := len(b.dialogMessages())
	b.do("Pause selected", 20*time.Second, chromedp.Click(chromedp.CSS(`button[data-bulk=pause]`)))
	toast := b.wait("the toast names both", 20*time.Second, textJS("#flash .flash-ok"), contains("Paused 2 of 2"))
	if !strings.Contains(toast, "backup") || !strings.Contains(toast, "report") || strings.Contains(toast, "sync") {
		t.Fatalf("the toast says %q, want backup and report and not sync", toast)
	}
	b.wait("backup paused", 10*time.Second, attrJS("#task-"+a.ID, "data-status"), equals("2"))
	b.wait("report paused", 10*time.Second, attrJS("#task-"+bt.ID, "data-status"), equals("2"))
	d := b.dialogMessages()[before:]
	if len(d) != 1 || !strings.HasPrefix(d[0], "Pause 2 tasks: ") || !strings.Contains(d[0], "backup") || !strings.Contains(d[0], "report") {
		t.Fatalf("confirmations: %q, want one naming backup and report", d)
	}
	for _, tk := range []taskJSON{a, bt, c} {
		if got := getTask(t, m, tk.ID); got.Status != 2 {
			t.Fatalf("task %s: status %d, want paused", tk.ID, got.Status)
		}
	}

	// A refusal is named in the same toast: resume all three, one of which
	// (after stopping it) can no longer be resumed.
	m.taskAction(c.ID, "stop")
	b.wait("sync stopped by the refresh", 15*time.Second, attrJS("#task-"+c.ID, "data-status"), equals("0"))
	b.tick("select all", 20*time.Second, "select-all", true)
	b.wait("all three ticked", 5*time.Second, checkedJS(sel(a), sel(bt), sel(c)), equals("true true true"))
	b.wait("three selected", 5*time.Second, textJS("#bulk-count"), equals("3 selected"))
	b.do("Resume selected", 20*time.Second, chromedp.Click(chromedp.CSS(`button[data-bulk=resume]`)))
	toast = b.wait("the mixed outcome", 20*time.Second, textJS("#flash .flash-error"), contains("Resumed 2 of 3"))
	if !strings.Contains(toast, "resume refused for sync: it is stopped") {
		t.Fatalf("the toast says %q, want sync's refusal", toast)
	}
	b.wait("backup running", 10*time.Second, attrJS("#task-"+a.ID, "data-status"), equals("1"))
	b.wait("sync still stopped", 5*time.Second, attrJS("#task-"+c.ID, "data-status"), equals("0"))
	b.tick("unselect all", 20*time.Second, "select-all", false)
	b.wait("none ticked", 5*time.Second, checkedJS(sel(a), sel(bt), sel(c)), equals("false false false"))
	b.wait("buttons disabled again", 5*time.Second, `String([...document.querySelectorAll("[data-bulk]")].every(e => e.disabled))`, equals("true"))
	b.checkMarker("after the bulk actions")

	// Phone width: cards, with the checkbox and the bulk buttons on the screen.
	b.run("phone viewport", 10*time.Second, chromedp.EmulateViewport(390, 844, chromedp.EmulateMobile, chromedp.EmulateTouch))
	b.do("reopen Tasks", 20*time.Second, chromedp.Navigate(m.URL+"/tasks"), chromedp.WaitVisible(chromedp.ID("tasks-table")))
	b.wait("no sideways scroll", 5*time.Second, noSidewaysJS, equals("ok"))
	b.wait("the checkboxes", 5*time.Second, inViewJS("#task-rows input.row-select"), equals("ok"))
	b.wait("select all", 5*time.Second, inViewJS("#select-all"), equals("ok"))
	b.wait("the bulk buttons", 5*time.Second, inViewJS("[data-bulk]"), equals("ok"))
	b.tick("tick sync on the phone", 20*time.Second, sel(c), true)
	b.wait("one selected on the phone", 5*time.Second, textJS("#bulk-count"), equals("1 selected"))
	b.checkConsole()
}

// TestBrowserCloneTask clones a task from its page in a real headless
// Chromium: the form comes prefilled, titled "… (copy)", its secret header
// masked; saved as it is, it makes a new stopped task, and running that copy
// sends the original's secret (it was copied, never shown).
func TestBrowserCloneTask(t *testing.T) {
	t.Parallel()
	chromium := findChromium(t)
	m := startMaster(t, "")
	startWorker(t, m, "cl1")
	m.waitNode("cl1", 30*time.Second, "running", func(n *nodeJSON) bool { return n.Status == 2 })
	var mu sync.Mutex
	var auth []string
	tg := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		auth = append(auth, r.URL.Path+" "+r.Header.Get("Authorization"))
		mu.Unlock()
		fmt.Fprintln(w, "ok")
	}))
	t.Cleanup(tg.Close)
	orig := m.createTask(`{"title":"billing hook","type":"http","schedule":{"kind":"interval","every":"1h"},
		"http":{"method":"GET","url":"` + tg.URL + `/hook","headers":{"Authorization":"Bearer clone-s3cret"}},"executors":["cl1"],"timeout":"9s"}`)

	b := newBrowserWithin(t, chromium, 90*time.Second)
	b.logIn(m, "", "dash-live")
	b.do("open the task", 20*time.Second, chromedp.Navigate(m.URL+"/tasks/"+orig.ID), chromedp.WaitVisible(chromedp.ID("task-live")))
	// The click alone, so that do finds the button again when the task
	// page's live refresh replaced it under the click; then the form.
	b.do("press Clone", 20*time.Second, chromedp.Click(chromedp.ID("clone-task")))
	b.run("the clone's form", 20*time.Second, chromedp.WaitVisible(chromedp.ID("task-form")))
	b.wait("the title of a copy", 5*time.Second, `document.getElementById("title").value`, equals("billing hook (copy)"))
	b.wait("what it copies", 5*time.Second, textJS("#clone-of"), equals("copy of billing hook"))
	b.wait("the secret masked", 5*time.Second, `document.getElementById("http-headers").value`, equals("Authorization: ********"))
	b.wait("the timeout copied", 5*time.Second, `document.getElementById("timeout").value`, equals("9s"))
	b.wait("its executor ticked", 5*time.Second, `String(document.getElementById("executor-cl1").checked)`, equals("true"))
	if strings.Contains(evalOnce(b, "the form's HTML", `document.documentElement.outerHTML`), "clone-s3cret") {
		t.Fatal("the clone form shows the secret")
	}
	b.do("save the copy", 20*time.Second, chromedp.Click(chromedp.ID("save-task")), chromedp.WaitVisible(chromedp.ID("task-panel")))
	loc := b.wait("the copy's page", 10*time.Second, `location.pathname`, matches(`^/tasks/[^/]+$`))
	copyID := strings.TrimPrefix(loc, "/tasks/")
	if copyID == orig.ID {
		t.Fatal("saving the clone went back to the original")
	}
	b.wait("created", 10*time.Second, textJS("#flash .flash-ok"), contains("billing hook (copy)"))
	b.wait("stopped", 5*time.Second, textJS("#task-panel [data-testid=status]"), equals("stopped"))
	if tk := getTask(t, m, copyID); tk.Status != 0 || len(tk.Executors) != 1 || tk.Executors[0] != "cl1" {
		t.Fatalf("the copy: %+v", tk)
	}
	m.taskAction(copyID, "run")
	m.waitRuns(copyID, 20*time.Second, "the copy's run", func(r []runJSON) bool { return len(r) == 1 && r[0].Result == "success" })
	mu.Lock()
	got := strings.Join(auth, "; ")
	mu.Unlock()
	if got != "/hook Bearer clone-s3cret" {
		t.Fatalf("the copy's run sent %q, want the original's secret", got)
	}
	b.checkConsole()
}
