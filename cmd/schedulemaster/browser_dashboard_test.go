package main

import (
	"fmt"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// closedPortURL returns an http URL on loopback where nothing listens.
func closedPortURL(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return "http://" + addr + "/nothing-here"
}

// countJS gives the number of elements matching sel, as a string.
func countJS(sel string) string {
	return fmt.Sprintf(`String(document.querySelectorAll(%q).length)`, sel)
}

// TestBrowserDashboard drives the dashboard in a real headless Chromium
// against a real master and a real worker process: after the login it shows
// the node counts and the runs chart; a failing HTTP task (to a closed port)
// run once shows up in the live failures block without a page reload, with a
// link to the run's output, and in today's bar of the chart.
//
// With SM_SCREENSHOT_DASHBOARD=/path/to/file.png it also writes a full-page
// screenshot of the dashboard (the README image).
func TestBrowserDashboard(t *testing.T) {
	t.Parallel()
	chromium := findChromium(t)

	m := startMaster(t, "")
	startWorker(t, m, "dw1")
	m.waitNode("dw1", 30*time.Second, "running", func(n *nodeJSON) bool { return n.Status == 2 })

	b := newBrowser(t, chromium)
	b.logIn(m, "", "dash-live")

	// dw1 runs (the master is no worker: not counted); nothing is idle or
	// offline; no failure yet.
	b.wait("running workers", 10*time.Second, textJS("#dash-nodes-running"), equals("1"))
	b.wait("idle nodes", 5*time.Second, textJS("#dash-nodes-idle"), equals("0"))
	b.wait("offline nodes", 5*time.Second, textJS("#dash-nodes-offline"), equals("0"))
	b.wait("no failure yet", 5*time.Second, existsJS("#no-failures"), equals("true"))
	b.wait("the chart", 5*time.Second, existsJS("svg#runs-per-day"), equals("true"))
	b.wait("one bar per hour of the last 24 (the default range)", 5*time.Second, countJS("svg#runs-per-day g.chart-day"), equals("24"))
	b.wait("the 24 h range marked as chosen", 5*time.Second, attrJS(`#chart-ranges a[aria-current=page]`, "data-range"), equals("24h"))
	b.wait("the chart is drawn", 5*time.Second,
		`String(document.querySelector("svg#runs-per-day").getBoundingClientRect().width > 300)`, equals("true"))

	// A task that fails: HTTP to a closed port, run once through the open API.
	b.run("set the no-reload marker", 5*time.Second, chromedp.Evaluate[chromedp.Void](`window.__noReload = 42`))
	tk := m.createTask(`{"title":"dash fails","type":"http","schedule":{"kind":"interval","every":"1h"},
		"http":{"method":"GET","url":"` + closedPortURL(t) + `"},"timeout":"3s","executors":["dw1"]}`)
	m.taskAction(tk.ID, "run")
	runs := m.waitRuns(tk.ID, 20*time.Second, "one failed run", func(r []runJSON) bool { return len(r) == 1 })
	if runs[0].Result != "failed" {
		t.Fatalf("run to a closed port: %+v, want failed", runs[0])
	}
	run := runs[0].ID

	// The live block shows it by itself (it polls every 5s).
	start := time.Now()
	link := fmt.Sprintf(`#dash-failures a.failure-link[href="/runs/%s"]`, run)
	b.wait("the failure in the live block", 15*time.Second, existsJS(link), equals("true"))
	t.Logf("the failure showed up on the dashboard %s after the run was recorded", time.Since(start).Round(100*time.Millisecond))
	b.wait("today's failed count", 5*time.Second, textJS("#dash-today-failed"), equals("1"))
	b.wait("the failure names its task", 5*time.Second, textJS("#failures-"+tk.ID+" td.name"), equals("dash fails"))
	b.checkMarker("after the live refresh")

	// The chart is drawn once per page: open its 14 days to see today's failed bar.
	b.do("open the 14 days", 20*time.Second,
		chromedp.Click(chromedp.CSS(`#chart-ranges a[data-range="14d"]`)),
		chromedp.WaitVisible(chromedp.ID("runs-per-day")),
	)
	b.wait("one bar group per day", 5*time.Second, countJS("svg#runs-per-day g.chart-day"), equals("14"))
	today := time.Now().UTC().Format(time.DateOnly)
	b.wait("today's bar group", 5*time.Second, attrJS(`svg#runs-per-day g.chart-day[data-day="`+today+`"]`, "data-failed"), equals("1"))
	b.wait("today's failed bar", 5*time.Second,
		existsJS(`svg#runs-per-day g.chart-day[data-day="`+today+`"] rect.bar-failed`), equals("true"))
	tip := b.wait("today's tooltip", 5*time.Second, textJS(`svg#runs-per-day g.chart-day[data-day="`+today+`"] title`), contains("1 failed"))
	t.Logf("today's tooltip: %s", tip)

	if path := os.Getenv("SM_SCREENSHOT_DASHBOARD"); path != "" {
		b.screenshot(path)
	}

	// The link opens the run's output.
	b.do("open the failure", 20*time.Second,
		chromedp.Click(chromedp.CSS(link)),
		chromedp.WaitVisible(chromedp.ID("run-output")),
	)
	b.wait("location of the run", 10*time.Second, `location.pathname`, equals("/runs/"+run))
	b.wait("the run's result", 5*time.Second, textJS("[data-testid=result]"), equals("failed"))
	b.wait("the run's output", 5*time.Second, textJS("#run-output"), nonEmpty)
	b.checkConsole()
}

// TestBrowserEventLogAfterConnectEnable adds a manual worker through the open
// API, connects and enables it by clicking on the nodes page, and reads the
// event log: node.create, node.connect and node.enable by admin, all ok, after
// the first admin's user.create; the filter form narrows the log to one action.
//
// With SM_SCREENSHOT_EVENTS=/path/to/file.png it also writes a full-page
// screenshot of the event log.
func TestBrowserEventLogAfterConnectEnable(t *testing.T) {
	t.Parallel()
	chromium := findChromium(t)

	m := startMaster(t, "")
	_, host := startWorker(t, m, "ew1", "--autor=false", "--workerof", "master")
	if status, body := m.api("POST", "/api/v1/nodes", `{"name":"ew1","host":"`+host+`"}`); status != 201 {
		t.Fatalf("add node ew1: %d %s", status, body)
	}

	b := newBrowser(t, chromium)
	b.logIn(m, "", "dash-live")
	b.wait("ew1 counted offline", 10*time.Second, textJS("#dash-nodes-offline"), equals("1"))

	b.do("open Nodes from the menu", 20*time.Second,
		chromedp.Click(chromedp.CSS(`header.topbar nav a[href="/nodes"]`)),
		chromedp.WaitVisible(chromedp.ID("nodes-table")),
	)
	b.wait("ew1 offline", 10*time.Second, textJS("#node-ew1 [data-testid=status]"), equals("offline"))
	b.do("click Connect", 20*time.Second, chromedp.Click(actionButton("connect", "ew1")))
	b.wait("Connect flash", 20*time.Second, textJS("#flash .flash-ok"), contains("Connect ew1"))
	b.wait("ew1 idle", 10*time.Second, textJS("#node-ew1 [data-testid=status]"), equals("idle"))
	b.do("click Enable", 20*time.Second, chromedp.Click(actionButton("enable", "ew1")))
	b.wait("Enable flash", 20*time.Second, textJS("#flash .flash-ok"), contains("Enable ew1"))
	b.wait("ew1 running", 10*time.Second, textJS("#node-ew1 [data-testid=status]"), equals("running"))

	b.do("open Events from the menu", 20*time.Second,
		chromedp.Click(chromedp.CSS(`header.topbar nav a[href="/events"]`)),
		chromedp.WaitVisible(chromedp.ID("events-table")),
	)
	b.wait("location of the event log", 10*time.Second, `location.pathname`, equals("/events"))
	rows := `Array.from(document.querySelectorAll("#event-rows tr[data-action]")).map(r =>
		[r.querySelector("[data-testid=actor]").textContent.trim(), r.dataset.action,
		 r.querySelector("[data-testid=target]").textContent.trim(), r.dataset.outcome].join(" ")).join("\n")`
	got := b.wait("the six events, newest first", 10*time.Second, rows, equals(strings.Join([]string{
		"admin node.enable ew1 ok",
		"admin node.connect ew1 ok",
		"admin user.login admin ok", // the browser's sign-in (method local)
		"admin node.create ew1 ok",
		"admin user.login admin ok",   // the API client's sign-in
		"system user.create admin ok", // the first admin, made by the master on its first start
	}, "\n")))
	t.Logf("event log:\n%s", got)
	b.wait("the range", 5*time.Second, textJS("#events-range"), equals("1–6 of 6"))

	// Narrow it with the filter form: one action, by typing as a user does.
	b.do("filter on node.connect", 20*time.Second,
		sendKeys(chromedp.ID("filter-action"), "node.connect"),
		chromedp.SetValue(chromedp.ID("filter-outcome"), "ok"),
		chromedp.Click(chromedp.ID("apply-event-filters")),
		chromedp.WaitVisible(chromedp.ID("clear-event-filters")),
	)
	b.wait("location with the filters", 10*time.Second, `location.search`, func(s string) bool {
		return strings.Contains(s, "action=node.connect") && strings.Contains(s, "outcome=ok")
	})
	b.wait("only the connect", 10*time.Second, rows, equals("admin node.connect ew1 ok"))

	// Clicking the target shows everything that happened to ew1.
	b.do("click the target", 20*time.Second,
		chromedp.Click(chromedp.CSS(`#event-rows [data-testid=target]`)),
		chromedp.WaitVisible(chromedp.ID("clear-event-filters")),
	)
	b.wait("every event of ew1", 10*time.Second, countJS("#event-rows tr[data-action]"), equals("3"))
	b.wait("target filter kept in the form", 5*time.Second, `document.getElementById("filter-target").value`, equals("ew1"))
	if path := os.Getenv("SM_SCREENSHOT_EVENTS"); path != "" {
		b.screenshot(path)
	}
	b.checkConsole()
}
