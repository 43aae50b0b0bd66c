package main

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// evalOnce evaluates expr once (awaiting a promise) and returns its string.
func evalOnce(b *browser, what, expr string) string {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 10*time.Second)
	defer cancel()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[string](expr, chromedp.EvalAwaitPromise))
	if err != nil {
		b.fatalf("%s: %v", what, err)
	}
	return v
}

// bannerJS is the connection banner's text while it is shown, "" otherwise.
const bannerJS = `(() => { const e = document.getElementById("conn-status");
	return e && !e.hidden && e.getBoundingClientRect().height > 0 ? e.textContent.trim() : ""; })()`

// TestBrowserLiveConnectionLost stops the master (kill -9) while the Nodes
// page is open: the live table keeps its last rows, marked stale, and a banner
// says "Connection lost — retrying" with the time of the last good update; a
// Disable pressed meanwhile says in the toast region that it did not reach the
// master. When a master is back on the same address, the banner clears by
// itself and the rows refresh again, without a page reload.
func TestBrowserLiveConnectionLost(t *testing.T) {
	t.Parallel()
	chromium := findChromium(t)
	m := startMaster(t, "")
	startWorker(t, m, "lw1")
	m.waitNode("lw1", 30*time.Second, "running", func(n *nodeJSON) bool { return n.Status == 2 })

	b := newBrowser(t, chromium)
	b.logIn(m, "", "dash-live")
	b.do("open Nodes", 20*time.Second, chromedp.Navigate(m.URL+"/nodes"), chromedp.WaitVisible(chromedp.ID("nodes-table")))
	b.wait("lw1 running", 10*time.Second, textJS("#node-lw1 [data-testid=status]"), equals("running"))
	b.wait("no banner while the master answers", 5*time.Second, bannerJS, equals(""))
	b.run("set the no-reload marker", 5*time.Second, chromedp.Evaluate[chromedp.Void](`window.__noReload = 42`))

	m.kill()
	msg := b.wait("the connection banner", 20*time.Second, bannerJS, contains("Connection lost — retrying"))
	t.Logf("banner: %s", msg)
	// The time it names is the last good refresh: a clock time of the last
	// seconds before the master died, not now and not the page load.
	age := b.wait("the banner names the last good update", 5*time.Second, `(() => {
		const m = document.getElementById("conn-status").textContent.match(/Last good update (\d\d):(\d\d):(\d\d)/);
		if (!m) return "no time";
		const d = new Date(); d.setHours(+m[1], +m[2], +m[3], 0);
		let s = Math.round((Date.now() - d.getTime()) / 1000);
		if (s < -5) s += 86400;
		return String(s); })()`, matches(`^-?\d+$`))
	if n, _ := strconv.Atoi(age); n < -1 || n > 60 {
		t.Fatalf("the banner's last good update is %ss ago, want the seconds before the kill", age)
	}
	b.wait("the live table marked stale", 5*time.Second, existsJS("#nodes-live.stale"), equals("true"))
	b.wait("the last rows kept", 5*time.Second, textJS("#node-lw1 [data-testid=status]"), equals("running"))

	// An action cannot reach the master: the toast says so, naming it.
	b.do("click Disable while the master is down", 20*time.Second, chromedp.Click(actionButton("disable", "lw1")))
	toast := b.wait("the toast says the action did not reach the master", 15*time.Second, textJS("#flash .flash-error"), contains("did not reach the master"))
	if !strings.Contains(toast, "Disable lw1") {
		t.Fatalf("toast %q does not name the action", toast)
	}
	b.wait("the toast is fixed, out of the flow", 5*time.Second, `getComputedStyle(document.getElementById("flash")).position`, equals("fixed"))
	b.checkMarker("while the master is down")

	// A master comes back on the same address and database.
	addr := strings.TrimPrefix(m.URL, "http://")
	m2 := startMaster(t, m.DataDir, "--listen", addr)
	b.wait("the banner clears by itself", 30*time.Second, bannerJS, equals(""))
	b.wait("nothing stale", 5*time.Second, existsJS(".stale"), equals("false"))
	b.wait("lw1 still listed after the refresh", 10*time.Second, existsJS("#node-lw1"), equals("true"))
	b.checkMarker("after the master came back")
	if n := m2.node("lw1"); n == nil || n.Status != 2 {
		t.Fatalf("lw1 after the refused Disable: %+v, want still running", n)
	}
	b.checkConsole()
}

// consistencyJS installs a MutationObserver that checks, at every change of
// the page, that check() (a JS function body returning "" or a complaint)
// holds, and records the complaints in window.__bad.
func consistencyJS(check string) string {
	return fmt.Sprintf(`(() => {
		window.__bad = [];
		const check = () => { const c = (() => { %s })(); if (c) window.__bad.push(c); };
		check();
		new MutationObserver(check).observe(document.body, {subtree: true, childList: true, characterData: true, attributes: true});
		return "installed"; })()`, check)
}

// nodesAgreeJS: the counters are the worker rows by status, and an offline
// row's failures are the count its reason names.
const nodesAgreeJS = `
	const rows = [...document.querySelectorAll("#node-rows tr[data-type=worker]")];
	const n = s => rows.filter(r => r.dataset.status === s).length;
	const c = id => { const e = document.getElementById(id); return e ? +e.textContent : -1; };
	if (c("count-running") !== n("2") || c("count-idle") !== n("1") || c("count-offline") !== n("0"))
		return "counters " + [c("count-running"), c("count-idle"), c("count-offline")] + " vs rows " + [n("2"), n("1"), n("0")];
	for (const r of rows) {
		const m = r.querySelector("td.reason").textContent.match(/offline after (\d+) failed health checks/);
		const f = r.querySelector("[data-testid=failures]").textContent.trim();
		if (r.dataset.status === "0" && m && f !== m[1]) return r.id + ": failures " + f + " vs reason " + m[0];
	}
	return "";`

// taskAgreesJS: the summary card, the heading and the runs panel say the same.
const taskAgreesJS = `
	const t = sel => { const e = document.querySelector(sel); return e ? e.textContent.trim() : "<absent>"; };
	if (t("#summary-run-count") !== t("#run-count")) return "run count " + t("#summary-run-count") + " vs " + t("#run-count");
	if (t("#task-live h1 [data-testid=status]") !== t("[data-testid=live-status]"))
		return "status " + t("#task-live h1 [data-testid=status]") + " vs " + t("[data-testid=live-status]");
	if (document.querySelectorAll('#run-rows tr[id^="run-"]').length > 0 && t("#summary-last-run").startsWith("never"))
		return "runs listed but last run never";
	return "";`

// TestBrowserLivePartsAgree watches the numbers of one page against each
// other at every change while they move: on Nodes, a worker killed goes
// offline with the counters following the rows and its failures matching its
// offline reason; on a task page, Start shows running in the runs panel in
// the same swap, and the summary card (run count, last run) follows the runs
// streaming in.
func TestBrowserLivePartsAgree(t *testing.T) {
	t.Parallel()
	chromium := findChromium(t)
	m := startMaster(t, "")
	startWorker(t, m, "cw1")
	cw2, _ := startWorker(t, m, "cw2")
	for _, n := range []string{"cw1", "cw2"} {
		m.waitNode(n, 30*time.Second, "running", func(n *nodeJSON) bool { return n.Status == 2 })
	}
	tg := newTarget(t)

	b := newBrowserWithin(t, chromium, 120*time.Second)
	b.logIn(m, "", "dash-live")
	b.do("open Nodes", 20*time.Second, chromedp.Navigate(m.URL+"/nodes"), chromedp.WaitVisible(chromedp.ID("nodes-table")))
	b.wait("two workers running", 10*time.Second, textJS("#count-running"), equals("2"))
	b.wait("the master is not counted as a worker", 5*time.Second, textJS("#count-masters"), equals("1 master"))
	b.wait("watch the nodes page", 5*time.Second, consistencyJS(nodesAgreeJS), equals("installed"))

	cw2.kill()
	b.wait("cw2 offline", 30*time.Second, textJS("#node-cw2 [data-testid=status]"), equals("offline"))
	b.wait("one running", 5*time.Second, textJS("#count-running"), equals("1"))
	b.wait("one offline", 5*time.Second, textJS("#count-offline"), equals("1"))
	reason := b.wait("cw2's reason", 5*time.Second, textJS("#node-cw2 td.reason"), contains("offline after 3 failed health checks"))
	b.wait("cw2's failures follow its reason", 5*time.Second, textJS("#node-cw2 [data-testid=failures]"), equals("3"))
	t.Logf("cw2: %s", reason)
	if bad := evalOnce(b, "complaints", `window.__bad.join("\n")`); bad != "" {
		t.Fatalf("the nodes page contradicted itself:\n%s", bad)
	}

	tk := m.createTask(`{"title":"agree","type":"http","schedule":{"kind":"interval","every":"1s"},
		"http":{"method":"GET","url":"` + tg.URL + `/agree"},"timeout":"3s","executors":["cw1"]}`)
	b.do("open the task", 20*time.Second, chromedp.Navigate(m.URL+"/tasks/"+tk.ID), chromedp.WaitVisible(chromedp.ID("task-live")))
	b.wait("stopped, never run", 5*time.Second, textJS("#summary-last-run"), contains("never"))
	b.wait("watch the task page", 5*time.Second, consistencyJS(taskAgreesJS), equals("installed"))
	b.run("set the no-reload marker", 5*time.Second, chromedp.Evaluate[chromedp.Void](`window.__noReload = 42`))
	b.do("click Start", 20*time.Second, chromedp.Click(taskButton("start", tk.ID)))
	b.wait("Start toast", 20*time.Second, textJS("#flash .flash-ok"), contains("started"))
	// The answer to Start carried the runs panel too: no poll needed.
	if st := evalOnce(b, "statuses after Start", `[document.querySelector("#task-live h1 [data-testid=status]").textContent,
		document.querySelector("[data-testid=live-status]").textContent].join(" ")`); st != "running running" {
		t.Fatalf("right after Start the heading and the runs panel say %q, want running running", st)
	}
	b.wait("three runs listed", 30*time.Second, runRowsJS, atLeast(3))
	b.wait("the summary counts them", 10*time.Second, textJS("#summary-run-count"), atLeast(3))
	b.wait("the summary's last run", 5*time.Second, textJS("#summary-last-run"), func(s string) bool {
		return s != absent && !strings.HasPrefix(s, "never") && strings.Contains(s, "success")
	})
	b.checkMarker("after the runs streamed in")
	if bad := evalOnce(b, "complaints", `window.__bad.join("\n")`); bad != "" {
		t.Fatalf("the task page contradicted itself:\n%s", bad)
	}
	b.checkConsole()
}

// rectJS gives "top,left,height" of the element sel, rounded to the pixel.
func rectJS(sel string) string {
	return fmt.Sprintf(`(() => { const e = document.querySelector(%q); if (!e) return %q;
		const r = e.getBoundingClientRect(); return [Math.round(r.top), Math.round(r.left), Math.round(r.height)].join(","); })()`, sel, absent)
}

// TestBrowserToastKeepsTheTableStill presses actions and checks that the
// message does not move what is under the pointer: on the task list a row's
// box stays where it was and the point of its Start button still hits it; on
// the Nodes page and on a task page too.
func TestBrowserToastKeepsTheTableStill(t *testing.T) {
	t.Parallel()
	chromium := findChromium(t)
	m := startMaster(t, "")
	startWorker(t, m, "sw1")
	m.waitNode("sw1", 30*time.Second, "running", func(n *nodeJSON) bool { return n.Status == 2 })
	tg := newTarget(t)
	a := m.createTask(`{"title":"toast a","type":"http","schedule":{"kind":"interval","every":"1h"},
		"http":{"method":"GET","url":"` + tg.URL + `/a"},"executors":["sw1"]}`)
	bk := m.createTask(`{"title":"toast b","type":"http","schedule":{"kind":"interval","every":"1h"},
		"http":{"method":"GET","url":"` + tg.URL + `/b"},"executors":["sw1"]}`)

	b := newBrowserWithin(t, chromium, 120*time.Second)
	b.logIn(m, "", "dash-live")
	b.do("open Tasks", 20*time.Second, chromedp.Navigate(m.URL+"/tasks"), chromedp.WaitVisible(chromedp.ID("tasks-table")))
	b.wait("both rows", 10*time.Second, countJS("#task-rows tr[data-status]"), equals("2"))

	rowA, rowB := "#task-"+a.ID, "#task-"+bk.ID
	beforeA, beforeB := b.wait("row a", 5*time.Second, rectJS(rowA), nonEmpty), b.wait("row b", 5*time.Second, rectJS(rowB), nonEmpty)
	// Where a person would click next: b's Start button.
	pointB := evalOnce(b, "b's Start", fmt.Sprintf(`(() => { const r = document.querySelector(%q).getBoundingClientRect();
		return Math.round(r.left + r.width/2) + "," + Math.round(r.top + r.height/2); })()`, `button[data-action=start][data-task="`+bk.ID+`"]`))
	b.do("Start a", 20*time.Second, chromedp.Click(taskButton("start", a.ID)))
	b.wait("Start toast", 20*time.Second, textJS("#flash .flash-ok"), contains("toast a"))
	b.wait("a running", 10*time.Second, attrJS(rowA, "data-status"), equals("1"))
	if got := evalOnce(b, "row b after", rectJS(rowB)); got != beforeB {
		t.Fatalf("row b moved from %s to %s (top,left,height) when the message came", beforeB, got)
	}
	if got := evalOnce(b, "row a after", rectJS(rowA)); strings.Split(got, ",")[0] != strings.Split(beforeA, ",")[0] {
		t.Fatalf("row a moved from %s to %s when the message came", beforeA, got)
	}
	hit := evalOnce(b, "what is under the pointer now", fmt.Sprintf(`(() => { const [x, y] = %q.split(",").map(Number);
		const e = document.elementFromPoint(x, y); const btn = e && e.closest("button");
		return btn ? btn.dataset.action + " " + btn.dataset.task : "nothing"; })()`, pointB))
	if hit != "start "+bk.ID {
		t.Fatalf("a second click where b's Start was would hit %q", hit)
	}
	b.wait("the toast is visible in the window", 5*time.Second, `(() => { const r = document.querySelector("#flash .flash").getBoundingClientRect();
		return String(r.height > 0 && r.top >= 0 && r.bottom <= innerHeight && r.right <= innerWidth); })()`, equals("true"))

	// The same on the Nodes page (Disable asks a confirmation).
	b.do("open Nodes", 20*time.Second, chromedp.Navigate(m.URL+"/nodes"), chromedp.WaitVisible(chromedp.ID("nodes-table")))
	before := b.wait("sw1 row", 10*time.Second, rectJS("#node-sw1"), nonEmpty)
	b.do("Disable sw1", 20*time.Second, chromedp.Click(actionButton("disable", "sw1")))
	b.wait("Disable toast", 20*time.Second, textJS("#flash .flash-ok"), contains("Disable sw1"))
	if got := evalOnce(b, "sw1 row after", rectJS("#node-sw1")); strings.Split(got, ",")[0] != strings.Split(before, ",")[0] {
		t.Fatalf("the sw1 row moved from %s to %s when the message came", before, got)
	}

	// And on a task page: Run once.
	b.do("open task b", 20*time.Second, chromedp.Navigate(m.URL+"/tasks/"+bk.ID), chromedp.WaitVisible(chromedp.ID("task-live")))
	before = b.wait("task b's heading", 5*time.Second, rectJS("#task-live h1"), nonEmpty)
	b.do("Run b once", 20*time.Second, chromedp.Click(taskButton("run", bk.ID)))
	b.wait("Run once toast", 20*time.Second, textJS("#flash"), func(s string) bool { return s != absent && s != "" })
	if got := evalOnce(b, "heading after", rectJS("#task-live h1")); got != before {
		t.Fatalf("the task heading moved from %s to %s when the message came", before, got)
	}
	b.checkConsole()
}
