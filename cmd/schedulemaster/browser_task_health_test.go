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

// TestBrowserTaskHealth looks at task health in a real headless Chromium
// against a real master and worker: a task whose target starts failing gets
// a red "failing" marker in the list once its last three runs failed (not
// before), and its page shows the success rate, p50 and p95 and the
// duration chart with the failed runs marked. A success clears the marker
// with the next refresh of the list, without a reload.
//
// With SM_SCREENSHOT_HEALTH=/path/to/file.png it also writes a screenshot of
// the task page.
func TestBrowserTaskHealth(t *testing.T) {
	t.Parallel()
	chromium := findChromium(t)
	m := startMaster(t, "")
	startWorker(t, m, "hw1")
	m.waitNode("hw1", 30*time.Second, "running", func(n *nodeJSON) bool { return n.Status == 2 })
	var failing atomic.Bool
	flaky := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		if failing.Load() {
			http.Error(w, "down", http.StatusInternalServerError)
			return
		}
		fmt.Fprintln(w, "ok")
	}))
	t.Cleanup(flaky.Close)
	steadyTarget := newTarget(t)
	task := func(title, url string) taskJSON {
		return m.createTask(`{"title":"` + title + `","type":"http","schedule":{"kind":"interval","every":"1h"},
			"http":{"method":"GET","url":"` + url + `"},"timeout":"5s","executors":["hw1"]}`)
	}
	flakyTask, steady := task("invoice export", flaky.URL), task("steady ping", steadyTarget.URL+"/ok")
	runOnce := func(id string, n int) {
		m.taskAction(id, "run")
		m.waitRuns(id, 20*time.Second, fmt.Sprintf("run %d", n), func(r []runJSON) bool { return len(r) == n })
	}
	// One success, then two failures: not failing yet.
	runOnce(flakyTask.ID, 1)
	failing.Store(true)
	runOnce(flakyTask.ID, 2)
	runOnce(flakyTask.ID, 3)
	runOnce(steady.ID, 1)

	b := newBrowserWithin(t, chromium, 120*time.Second)
	b.logIn(m, "", "dash-live")
	b.do("open Tasks", 20*time.Second, chromedp.Navigate(m.URL+"/tasks"), chromedp.WaitVisible(chromedp.ID("tasks-table")))
	b.wait("both rows", 10*time.Second, countJS("#task-rows tr[data-status]"), equals("2"))
	b.wait("no failing marker after two failures", 5*time.Second, countJS("[data-testid=failing]"), equals("0"))
	b.run("set the no-reload marker", 5*time.Second, chromedp.Evaluate[chromedp.Void](`window.__noReload = 42`))

	runOnce(flakyTask.ID, 4) // the third failure in a row
	marker := "#task-" + flakyTask.ID + " [data-testid=failing]"
	b.wait("the failing marker, live", 15*time.Second, textJS(marker), equals("failing"))
	b.wait("its title says why", 5*time.Second, attrJS(marker, "title"), equals("last 3 runs failed"))
	b.wait("it is red", 5*time.Second, `getComputedStyle(document.querySelector(`+jsQuote(marker)+`)).color`, equals("rgb(185, 28, 28)"))
	b.wait("none on the steady task", 5*time.Second, existsJS("#task-"+steady.ID+" [data-testid=failing]"), equals("false"))
	b.checkMarker("after the marker came")

	b.do("open the failing task", 20*time.Second, chromedp.Click(chromedp.CSS(`#task-`+flakyTask.ID+` td.name a`)), chromedp.WaitVisible(chromedp.ID("task-health")))
	b.wait("its success rate", 10*time.Second, textJS("#health-rate"), equals("25%"))
	b.wait("of how many runs", 5*time.Second, textJS("#health-runs"), equals("(1 of 4 runs succeeded)"))
	b.wait("its p50", 5*time.Second, textJS("#health-p50"), matches(`^[0-9.]+m?s$`))
	b.wait("its p95", 5*time.Second, textJS("#health-p95"), matches(`^[0-9.]+m?s$`))
	b.wait("the failing badge", 5*time.Second, textJS("#health-failing"), equals("failing"))
	b.wait("a bar per run in the chart", 5*time.Second, countJS("#duration-chart .duration-run"), equals("4"))
	b.wait("the failed runs marked", 5*time.Second, countJS("#duration-chart .duration-fail-mark"), equals("3"))
	b.wait("the marks on the failed runs", 5*time.Second, countJS(`#duration-chart .duration-run[data-result="failed"] .duration-fail-mark`), equals("3"))
	b.wait("the chart drawn in its card", 5*time.Second, `(() => { const c = document.getElementById("duration-chart").getBoundingClientRect(),
		k = document.getElementById("task-health").getBoundingClientRect();
		return String(c.height > 60 && c.width > 300 && c.left >= k.left && c.right <= k.right); })()`, equals("true"))
	b.wait("the p95 level", 5*time.Second, textJS("#duration-chart .health-p95-label"), contains("p95 "))
	if path := os.Getenv("SM_SCREENSHOT_HEALTH"); path != "" {
		b.screenshot(path)
	}

	// A success: the page follows by itself, then the list drops the marker.
	b.run("set the no-reload marker", 5*time.Second, chromedp.Evaluate[chromedp.Void](`window.__noReload = 42`))
	failing.Store(false)
	runOnce(flakyTask.ID, 5)
	b.wait("the rate follows, live", 15*time.Second, textJS("#health-rate"), equals("40%"))
	b.wait("no failing badge", 5*time.Second, existsJS("#health-failing"), equals("false"))
	b.wait("five bars", 5*time.Second, countJS("#duration-chart .duration-run"), equals("5"))
	b.checkMarker("after the success")
	b.do("back to Tasks", 20*time.Second, chromedp.Navigate(m.URL+"/tasks"), chromedp.WaitVisible(chromedp.ID("tasks-table")))
	b.wait("no failing marker after a success", 10*time.Second, countJS("[data-testid=failing]"), equals("0"))

	// The API says the same.
	status, body := m.api("GET", "/api/v1/tasks/"+flakyTask.ID, "")
	if status != 200 || !contains(`"health":{"runs":5,"success_rate":0.4,`)(body) || !contains(`"last_failed_streak":0`)(body) {
		t.Fatalf("API task health: %d %s", status, body)
	}
	b.checkConsole()
}
