package main

import (
	"os"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// TestBrowserNodePage drives the node page in a real headless Chromium
// against a real master and worker: from the Nodes list, the worker's name
// opens its page, which shows the task it executes, its run, and the chart of
// its health checks; when the worker is killed, the page marks the failed
// checks by itself, without a reload; its runs link opens the runs page
// filtered by the node.
//
// With SM_SCREENSHOT_NODE=/path/to/file.png it also writes a full-page
// screenshot of the node page.
func TestBrowserNodePage(t *testing.T) {
	t.Parallel()
	chromium := findChromium(t)
	m := startMaster(t, "")
	nw1, _ := startWorker(t, m, "nw1")
	m.waitNode("nw1", 30*time.Second, "running", func(n *nodeJSON) bool { return n.Status == 2 })
	tg := newTarget(t)
	tk := m.createTask(`{"title":"node page task","type":"http","schedule":{"kind":"interval","every":"1h"},
		"http":{"method":"GET","url":"` + tg.URL + `/ok"},"timeout":"5s","executors":["nw1"]}`)
	m.taskAction(tk.ID, "run")
	runs := m.waitRuns(tk.ID, 20*time.Second, "one run", func(r []runJSON) bool { return len(r) == 1 })

	b := newBrowser(t, chromium)
	b.logIn(m, "", "dash-live")
	b.do("open Nodes", 20*time.Second,
		chromedp.Click(chromedp.CSS(`header.topbar nav a[href="/nodes"]`)),
		chromedp.WaitVisible(chromedp.ID("nodes-table")),
	)
	b.do("open nw1 from the list", 20*time.Second,
		chromedp.Click(chromedp.CSS(`#node-nw1 a.node-link`)),
		chromedp.WaitVisible(chromedp.ID("node-live")),
	)
	b.wait("location of the node page", 10*time.Second, `location.pathname`, equals("/nodes/nw1"))
	b.wait("the node's name", 5*time.Second, textJS("#node-title"), equals("nw1"))
	b.wait("the node's status", 5*time.Second, textJS("#node-summary [data-testid=status]"), equals("running"))
	b.wait("the task it executes", 5*time.Second, textJS("#node-task-"+tk.ID+" td a"), equals("node page task"))
	b.wait("its run", 5*time.Second, existsJS("#node-run-"+runs[0].ID), equals("true"))
	b.wait("the health chart", 10*time.Second, existsJS("svg#health-chart"), equals("true"))
	b.wait("a successful check on the chart", 15*time.Second, countJS("svg#health-chart circle.health-ok"), atLeast(1))
	b.wait("no failure yet", 5*time.Second, countJS("svg#health-chart circle.health-failed"), equals("0"))
	b.wait("the chart is drawn", 5*time.Second,
		`String(document.querySelector("svg#health-chart").getBoundingClientRect().width > 300)`, equals("true"))

	// Killed: the failed checks show up by themselves.
	b.run("set the no-reload marker", 5*time.Second, chromedp.Evaluate[chromedp.Void](`window.__noReload = 42`))
	nw1.kill()
	b.wait("failed checks marked on the chart", 20*time.Second, countJS("svg#health-chart circle.health-failed"), atLeast(1))
	b.wait("the failures counted", 10*time.Second, textJS("#health-failures"), atLeast(1))
	b.wait("the node offline", 20*time.Second, textJS("#node-summary [data-testid=status]"), equals("offline"))
	tip := b.wait("a failure's numbers", 5*time.Second, textJS("svg#health-chart circle.health-failed title"), contains("failed after"))
	t.Logf("a failed check reads: %s", tip)
	b.checkMarker("after the worker died")
	if path := os.Getenv("SM_SCREENSHOT_NODE"); path != "" {
		b.screenshot(path)
	}

	// The runs link opens the runs page filtered by the node.
	b.do("open all runs of nw1", 20*time.Second,
		chromedp.Click(chromedp.ID("node-runs-link")),
		chromedp.WaitVisible(chromedp.ID("run-list-table")),
	)
	b.wait("the node filter in the address", 10*time.Second, `location.search`, equals("?node=nw1"))
	b.wait("the node chosen in the form", 5*time.Second, `document.getElementById("filter-node").value`, equals("nw1"))
	b.wait("its run listed", 5*time.Second, everyRowJS("#run-list-rows tr[data-node]", "data-node", "nw1"), equals("true"))
	b.checkConsole()
}
