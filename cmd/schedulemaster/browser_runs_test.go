package main

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// everyRowJS is "true" when there are rows matching sel and each has attr = want.
func everyRowJS(sel, attr, want string) string {
	return fmt.Sprintf(`(() => { const rows = [...document.querySelectorAll(%q)];
		return String(rows.length > 0 && rows.every(r => r.getAttribute(%q) === %q)); })()`, sel, attr, want)
}

// TestBrowserRunsFilteredByResult drives the runs page in a real headless
// Chromium against a real master and worker: runs of two tasks, one of them
// failing every other time, are listed together; filtering by result shows
// only the failed ones, and the live refresh keeps the filter as new runs
// come in. On the task page, the runs panel's result filter swaps in the
// task's failed runs without a reload.
//
// With SM_SCREENSHOT_RUNS=/path/to/file.png it also writes a full-page
// screenshot of the filtered runs page.
func TestBrowserRunsFilteredByResult(t *testing.T) {
	t.Parallel()
	chromium := findChromium(t)
	m := startMaster(t, "")
	startWorker(t, m, "rw1")
	m.waitNode("rw1", 30*time.Second, "running", func(n *nodeJSON) bool { return n.Status == 2 })
	var hits atomic.Int64
	flaky := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		if hits.Add(1)%2 == 0 {
			http.Error(w, "every other call fails", http.StatusInternalServerError)
			return
		}
		fmt.Fprintln(w, "ok")
	}))
	t.Cleanup(flaky.Close)
	steadyTarget := newTarget(t)
	task := func(title, url string) taskJSON {
		return m.createTask(`{"title":"` + title + `","type":"http","schedule":{"kind":"interval","every":"1h"},
			"http":{"method":"GET","url":"` + url + `"},"timeout":"5s","executors":["rw1"]}`)
	}
	flakyTask, steadyTask := task("flaky export", flaky.URL), task("steady ping", steadyTarget.URL+"/ok")
	// One run at a time, so the target alternates: 2 successes, 2 failures.
	for i := range 4 {
		m.taskAction(flakyTask.ID, "run")
		m.waitRuns(flakyTask.ID, 20*time.Second, "the run", func(r []runJSON) bool { return len(r) == i+1 })
	}
	m.taskAction(steadyTask.ID, "run")
	m.waitRuns(steadyTask.ID, 20*time.Second, "the run", func(r []runJSON) bool { return len(r) == 1 })

	b := newBrowser(t, chromium)
	b.logIn(m, "", "dash-live")
	b.do("open Runs from the menu", 20*time.Second,
		chromedp.Click(chromedp.CSS(`header.topbar nav a[href="/runs"]`)),
		chromedp.WaitVisible(chromedp.ID("run-list-table")),
	)
	b.wait("location of the runs page", 10*time.Second, `location.pathname`, equals("/runs"))
	b.wait("every run listed", 10*time.Second, countJS("#run-list-rows tr[data-result]"), equals("5"))
	b.wait("successes among them", 5*time.Second, countJS(`#run-list-rows tr[data-result="success"]`), equals("3"))

	b.do("filter by result failed", 20*time.Second,
		chromedp.SetValue(chromedp.ID("filter-result"), "failed"),
		chromedp.Click(chromedp.ID("apply-run-filters")),
	)
	b.wait("the filter in the address", 10*time.Second, `location.search`, contains("result=failed"))
	b.wait("only the failed runs", 10*time.Second, countJS("#run-list-rows tr[data-result]"), equals("2"))
	b.wait("all of them failed", 5*time.Second, everyRowJS("#run-list-rows tr[data-result]", "data-result", "failed"), equals("true"))
	b.wait("their task", 5*time.Second, textJS("#run-list-rows tr td:nth-child(2)"), equals("flaky export"))
	b.wait("the filter kept in the form", 5*time.Second, `document.getElementById("filter-result").value`, equals("failed"))

	// New runs arrive: the live refresh lists the failed one only.
	b.run("set the no-reload marker", 5*time.Second, chromedp.Evaluate[chromedp.Void](`window.__noReload = 42`))
	m.taskAction(flakyTask.ID, "run") // the 5th call succeeds
	m.waitRuns(flakyTask.ID, 20*time.Second, "the 5th run", func(r []runJSON) bool { return len(r) == 5 })
	m.taskAction(flakyTask.ID, "run") // the 6th fails
	m.waitRuns(flakyTask.ID, 20*time.Second, "the 6th run", func(r []runJSON) bool { return len(r) == 6 })
	b.wait("the new failure, live", 15*time.Second, countJS("#run-list-rows tr[data-result]"), equals("3"))
	b.wait("still only failures", 5*time.Second, everyRowJS("#run-list-rows tr[data-result]", "data-result", "failed"), equals("true"))
	b.checkMarker("after the live refresh")
	if path := os.Getenv("SM_SCREENSHOT_RUNS"); path != "" {
		b.screenshot(path)
	}

	// The task page's runs panel filters by result in place.
	b.do("open the flaky task from a run", 20*time.Second,
		chromedp.Click(chromedp.CSS(`#run-list-rows tr td:nth-child(2) a`)),
		chromedp.WaitVisible(chromedp.ID("runs-table")),
	)
	b.wait("location of the task page", 10*time.Second, `location.pathname`, equals("/tasks/"+flakyTask.ID))
	b.wait("all six runs", 10*time.Second, countJS("#run-rows tr[id^=run-]"), equals("6"))
	b.run("set the no-reload marker", 5*time.Second, chromedp.Evaluate[chromedp.Void](`window.__noReload = 42`))
	b.do("choose failed in the runs panel", 20*time.Second,
		chromedp.SetValue(chromedp.ID("runs-result"), "failed"),
		chromedp.Evaluate[chromedp.Void](`document.getElementById("runs-result").dispatchEvent(new Event("change", {bubbles: true}))`),
	)
	b.wait("the task's failed runs", 15*time.Second, countJS("#run-rows tr[id^=run-]"), equals("3"))
	b.wait("only failures in the panel", 5*time.Second,
		`String([...document.querySelectorAll("#run-rows tr[id^=run-] .badge")].every(e => e.textContent === "failed"))`, equals("true"))
	b.wait("the panel polls with the filter", 5*time.Second, attrJS("#task-live", "hx-get"), contains("result=failed"))
	b.wait("the choice shown", 5*time.Second, `document.getElementById("runs-result").value`, equals("failed"))
	b.checkMarker("after filtering the task's runs")
	b.checkConsole()
}
