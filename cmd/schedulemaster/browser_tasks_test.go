package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// TestBrowserTaskLifecycle drives the task console in a real headless
// Chromium against a real master and a real worker process, with a real HTTP
// target: create a task (first with a bad cron, refused inline), start it,
// watch its runs arrive in the live table without a page reload, open a run
// and read the target's answer, then stop it through the confirm dialog and
// check that the target is hit exactly once per recorded run.
//
// With SM_SCREENSHOT_TASKS=/path/to/file.png it also writes a full-page
// screenshot of the task page with its runs (the README image).
func TestBrowserTaskLifecycle(t *testing.T) {
	t.Parallel()
	chromium := findChromium(t)

	m := startMaster(t, "")
	startWorker(t, m, "tw1")
	m.waitNode("tw1", 30*time.Second, "running", func(n *nodeJSON) bool { return n.Status == 2 })
	tg := newTarget(t)

	b := newBrowser(t, chromium)

	// Log in, then go to Tasks through the menu.
	b.logIn(m, "/nodes", "nodes-table")
	b.do("open Tasks from the menu", 20*time.Second,
		chromedp.Click(chromedp.CSS(`header.topbar nav a[href="/tasks"]`)),
		chromedp.WaitVisible(chromedp.ID("tasks-table")),
	)
	b.wait("location of the task list", 10*time.Second, `location.pathname`, equals("/tasks"))
	b.wait("empty task list", 10*time.Second, textJS("#task-rows td.empty"), contains("No tasks yet"))

	// New task: everything valid but the cron expression, which is refused inline.
	b.do("open the New task form", 20*time.Second,
		chromedp.Click(chromedp.ID("new-task")),
		chromedp.WaitVisible(chromedp.ID("task-form")),
	)
	b.wait("tw1 offered as executor", 10*time.Second, existsJS("#executor-tw1"), equals("true"))
	b.do("fill the form with a garbage cron", 20*time.Second,
		sendKeys(chromedp.ID("title"), "browser tick"),
		chromedp.SetValue(chromedp.ID("type"), "http"),
		chromedp.SetValue(chromedp.ID("schedule-kind"), "cron"),
		sendKeys(chromedp.ID("schedule-cron"), "every tuesday"),
		chromedp.SetValue(chromedp.ID("http-method"), "GET"),
		sendKeys(chromedp.ID("http-url"), tg.URL+"/browser"),
		chromedp.Click(chromedp.ID("executor-tw1")),
	)
	b.wait("tw1 checked", 5*time.Second, `String(document.getElementById("executor-tw1").checked)`, equals("true"))
	b.do("submit the garbage cron", 20*time.Second,
		chromedp.Click(chromedp.ID("save-task")),
		chromedp.WaitVisible(chromedp.ID("error-schedule-cron")),
	)
	cronErr := b.wait("inline cron error", 5*time.Second, textJS("#error-schedule-cron"), nonEmpty)
	t.Logf("the form refuses the cron with: %s", cronErr)
	b.wait("form error summary", 5*time.Second, textJS("#form-errors"), contains("not saved"))
	for _, field := range []string{"title", "type", "schedule-kind", "schedule-every", "timeout", "executors", "http", "http-method", "http-url"} {
		b.wait("no inline error for "+field, 5*time.Second, textJS("#error-"+field), equals(absent))
	}
	b.wait("location after the refused submit", 5*time.Second, `location.pathname`, equals("/tasks"))
	if n := taskTotal(t, m); n != 0 {
		t.Fatalf("a task with a garbage cron was stored: total %d", n)
	}

	// The refused form keeps what was typed; fix the schedule and save.
	b.wait("title kept", 5*time.Second, `document.getElementById("title").value`, equals("browser tick"))
	b.wait("URL kept", 5*time.Second, `document.getElementById("http-url").value`, equals(tg.URL+"/browser"))
	b.wait("cron kept", 5*time.Second, `document.getElementById("schedule-cron").value`, equals("every tuesday"))
	b.wait("tw1 still checked", 5*time.Second, `String(document.getElementById("executor-tw1").checked)`, equals("true"))
	b.do("switch to an interval of 1s", 20*time.Second,
		// Clear the refused value, then type as a user does. (SetValue with ""
		// does not work in chromedp v0.23.0: the empty argument is dropped.)
		chromedp.Evaluate[chromedp.Void](`document.getElementById("schedule-cron").value = ""`),
		chromedp.SetValue(chromedp.ID("schedule-kind"), "interval"),
		sendKeys(chromedp.ID("schedule-every"), "1s"),
	)
	b.do("save the task", 20*time.Second,
		chromedp.Click(chromedp.ID("save-task")),
		chromedp.WaitVisible(chromedp.ID("task-panel")),
	)
	loc := b.wait("task page after save", 10*time.Second, `location.pathname`, matches(`^/tasks/[^/]+$`))
	id := strings.TrimPrefix(loc, "/tasks/")
	b.wait("success flash after save", 10*time.Second, textJS("#flash .flash-ok"), contains("browser tick"))
	b.wait("created message", 5*time.Second, textJS("#flash .flash-ok"), contains("created"))
	b.wait("task stopped after save", 5*time.Second, textJS("#task-panel [data-testid=status]"), equals("stopped"))
	b.wait("request shown", 5*time.Second, `document.getElementById("task-panel").innerText`, contains("GET "+tg.URL+"/browser"))
	b.wait("no runs yet", 5*time.Second, textJS("#run-rows td.empty"), contains("No runs yet"))
	if n := taskTotal(t, m); n != 1 {
		t.Fatalf("after save: %d tasks, want 1", n)
	}
	if tk := getTask(t, m, id); tk.Status != 0 || len(tk.Executors) != 1 || tk.Executors[0] != "tw1" {
		t.Fatalf("task after save: %+v, want stopped with executor tw1", tk)
	}

	// Start it from the task page; from here on the page must not reload.
	b.run("set the no-reload marker", 5*time.Second, chromedp.Evaluate[chromedp.Void](`window.__noReload = 42`))
	b.do("click Start", 20*time.Second, chromedp.Click(taskButton("start", id)))
	b.wait("Start flash", 20*time.Second, textJS("#flash .flash-ok"), contains("started"))
	b.wait("status running", 10*time.Second, textJS("#task-panel [data-testid=status]"), equals("running"))
	b.wait("Stop button", 5*time.Second, existsJS(`button[data-action=stop][data-task="`+id+`"]`), equals("true"))
	start := time.Now()
	b.wait("three runs in the live table", 30*time.Second, runRowsJS, atLeast(3))
	t.Logf("the live table showed 3 runs %s after Start", time.Since(start).Round(100*time.Millisecond))
	b.wait("runs succeeded", 5*time.Second, `(() => {
		const rows = document.querySelectorAll('#run-rows tr[id^="run-"]');
		return Array.from(rows).every(r => r.textContent.includes("success") && r.textContent.includes("HTTP 200")) ? "yes" : "no: " + rows[0].innerText;
	})()`, equals("yes"))
	b.checkMarker("after Start and the live runs")

	// Open the newest run. The table swaps itself every 2s and new runs are
	// prepended, so a mouse click at a row's position could hit a newer row:
	// take the link's run id and click that very link in the page.
	href := b.wait("first run link", 5*time.Second, attrJS(`#run-rows tr[id^="run-"] a`, "href"), matches(`^/runs/[^/]+$`))
	runID := strings.TrimPrefix(href, "/runs/")
	b.run("click the first run", 10*time.Second, chromedp.Evaluate[chromedp.Void](
		fmt.Sprintf(`document.querySelector(%s).click()`, strconv.Quote(`a[href="`+href+`"]`))))
	b.wait("run page", 10*time.Second, `location.pathname`, equals(href))
	b.wait("run output", 10*time.Second, textJS("#run-output"), contains("ok /browser"))
	b.wait("run result", 5*time.Second, textJS("[data-testid=result]"), equals("success"))
	b.wait("run page heading", 5*time.Second, textJS("h1"), contains("browser tick · run of "))
	b.wait("run id in the details", 5*time.Second, textJS("#run-id"), equals(runID))
	b.wait("run HTTP status", 5*time.Second, `(() => {
		const dt = Array.from(document.querySelectorAll("dl.summary dt")).find(e => e.textContent.trim() === "HTTP status");
		return dt ? dt.nextElementSibling.textContent.trim() : "<absent>";
	})()`, equals("200"))

	// Back to the task through the crumbs; Stop asks a confirm dialog.
	b.do("back to the task", 20*time.Second,
		chromedp.Click(chromedp.CSS(`.crumbs a[href="/tasks/`+id+`"]`)),
		chromedp.WaitVisible(chromedp.ID("task-panel")),
	)
	b.wait("task page again", 10*time.Second, `location.pathname`, equals("/tasks/"+id))
	b.wait("still running", 5*time.Second, textJS("#task-panel [data-testid=status]"), equals("running"))
	b.wait("the opened run listed", 5*time.Second, existsJS("#run-"+runID), equals("true"))
	if path := os.Getenv("SM_SCREENSHOT_TASKS"); path != "" {
		// Only the runs tbody is live: load the page afresh so its pager and
		// run count agree with the rows in the picture.
		m.waitRuns(id, 20*time.Second, "6 runs for the screenshot", func(r []runJSON) bool { return len(r) >= 6 })
		b.do("reload the task page for the screenshot", 20*time.Second,
			chromedp.Navigate(m.URL+"/tasks/"+id),
			chromedp.WaitVisible(chromedp.ID("run-rows")),
		)
		writeScreenshot(b, path, "task page")
	}
	b.run("set the no-reload marker again", 5*time.Second, chromedp.Evaluate[chromedp.Void](`window.__noReload = 42`))
	b.do("click Stop", 20*time.Second, chromedp.Click(taskButton("stop", id)))
	b.wait("Stop flash", 20*time.Second, textJS("#flash .flash-ok"), contains("stopped"))
	b.wait("status stopped", 10*time.Second, textJS("#task-panel [data-testid=status]"), equals("stopped"))
	b.wait("Start button back", 5*time.Second, existsJS(`button[data-action=start][data-task="`+id+`"]`), equals("true"))
	if d := b.dialogMessages(); len(d) != 1 || !strings.Contains(d[0], "Stop task browser tick") {
		t.Fatalf("confirm dialogs: %q, want one to stop the task", d)
	}
	if tk := getTask(t, m, id); tk.Status != 0 {
		t.Fatalf("task after Stop: status %d, want 0 (stopped)", tk.Status)
	}

	// The target stops being hit (a run under way may still land), and every
	// hit is one recorded run.
	quiet := waitQuiet(t, tg, "/browser", 3*time.Second, 15*time.Second)
	runs := settle(t, m, tg, "/browser", id)
	if hits := tg.count("/browser"); hits != len(runs) || hits != quiet {
		t.Fatalf("target hit %d times (%d when it went quiet) for %d run records", hits, quiet, len(runs))
	}
	for _, r := range runs {
		if r.Node != "tw1" || r.Result != "success" || r.HTTPStatus != 200 || !strings.Contains(r.Output, "ok /browser") {
			t.Errorf("run %+v: want a success on tw1 with HTTP 200 and the target's answer", r)
		}
	}
	t.Logf("%d runs, %d target hits", len(runs), tg.count("/browser"))

	// The live table catches up with the last runs by itself.
	want := min(len(runs), 50)
	b.wait(fmt.Sprintf("all %d runs in the live table", want), 10*time.Second, runRowsJS, equals(strconv.Itoa(want)))
	b.checkMarker("after Stop")
	b.checkConsole()
}

// runRowsJS counts the run rows of the task page.
const runRowsJS = `String(document.querySelectorAll('#run-rows tr[id^="run-"]').length)`

func taskButton(action, id string) chromedp.CSS {
	return chromedp.CSS(fmt.Sprintf(`button[data-action=%s][data-task=%q]`, action, id))
}

func matches(pattern string) func(string) bool {
	re := regexp.MustCompile(pattern)
	return func(s string) bool { return s != absent && re.MatchString(s) }
}

func atLeast(n int) func(string) bool {
	return func(s string) bool {
		v, err := strconv.Atoi(s)
		return err == nil && v >= n
	}
}

// taskTotal is the number of tasks the open API lists.
func taskTotal(t *testing.T, m *masterProc) int {
	t.Helper()
	status, body := m.api("GET", "/api/v1/tasks", "")
	var page struct {
		Total int `json:"total"`
	}
	if status != http.StatusOK || json.Unmarshal([]byte(body), &page) != nil {
		t.Fatalf("list tasks: %d %s", status, body)
	}
	return page.Total
}

func getTask(t *testing.T, m *masterProc, id string) taskJSON {
	t.Helper()
	status, body := m.api("GET", "/api/v1/tasks/"+id, "")
	var tk taskJSON
	if status != http.StatusOK || json.Unmarshal([]byte(body), &tk) != nil {
		t.Fatalf("get task %s: %d %s", id, status, body)
	}
	return tk
}

// waitQuiet polls until the target's hit count on path has not changed for
// quiet, and returns it; it fails when that does not happen within timeout.
func waitQuiet(t *testing.T, tg *target, path string, quiet, timeout time.Duration) int {
	t.Helper()
	deadline := time.Now().Add(timeout)
	last, since := tg.count(path), time.Now()
	for {
		if n := tg.count(path); n != last {
			last, since = n, time.Now()
		}
		if time.Since(since) >= quiet {
			return last
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s still hit %s after the stop (%d hits)", path, timeout, last)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// writeScreenshot writes a full-page PNG of the current page at 1280x800.
func writeScreenshot(b *browser, path, what string) {
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
	b.t.Logf("wrote the %s screenshot to %s (%d bytes)", what, path, len(png))
}
