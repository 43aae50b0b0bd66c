package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// noSidewaysJS is "ok" when the page does not scroll sideways, else the
// widths and the elements that stick out, for the failure message.
const noSidewaysJS = `(() => {
	const sw = document.scrollingElement.scrollWidth, iw = innerWidth;
	if (sw <= iw) return "ok";
	const out = [...document.querySelectorAll("body *")].filter(e => e.getBoundingClientRect().right > iw + 0.5)
		.slice(0, 6).map(e => e.tagName.toLowerCase() + (e.id ? "#" + e.id : "") + "." + [...e.classList].join(".") + " right=" + Math.round(e.getBoundingClientRect().right));
	return "scrollWidth " + sw + " > innerWidth " + iw + ": " + out.join("; "); })()`

// inViewJS is "ok" when every element sel matches is drawn and lies within
// the window's width, else the first that is not.
func inViewJS(sel string) string {
	return `(() => { const all = [...document.querySelectorAll(` + jsQuote(sel) + `)];
		if (all.length === 0) return "none";
		for (const e of all) { const r = e.getBoundingClientRect();
			if (r.width === 0 || r.height === 0 || r.left < -0.5 || r.right > innerWidth + 0.5)
				return (e.id || e.textContent.trim().slice(0, 30)) + " at " + Math.round(r.left) + ".." + Math.round(r.right); }
		return "ok"; })()`
}

func jsQuote(s string) string {
	return `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(s) + `"`
}

// TestBrowserPhoneWidth opens every main page at 390×844, a phone held
// upright, and checks what a person sees there: nothing scrolls sideways; the
// menu is one "Menu" button that opens to every entry (CSS only); the tables
// of nodes, tasks, runs and events become cards that keep the name, the
// status and the actions on the screen; a cron expression is never broken
// over two lines.
//
// With SM_SCREENSHOT_PHONE_DIR=/some/dir it also writes a screenshot of each
// page there (the README images).
func TestBrowserPhoneWidth(t *testing.T) {
	t.Parallel()
	chromium := findChromium(t)
	m := startMaster(t, "")
	startWorker(t, m, "phone-worker-1")
	m.waitNode("phone-worker-1", 30*time.Second, "running", func(n *nodeJSON) bool { return n.Status == 2 })
	// A manual node never started: offline, with its buttons.
	if status, body := m.api("POST", "/api/v1/nodes", `{"name":"phone-manual-node","host":"127.0.0.1:9"}`); status != 201 {
		t.Fatalf("add node: %d %s", status, body)
	}
	tg := newTarget(t)
	cron := m.createTask(`{"title":"nightly report for the billing team","type":"http","timezone":"America/Argentina/Buenos_Aires",
		"schedule":{"kind":"cron","cron":"*/2 * * * * *"},"http":{"method":"POST","url":"` + tg.URL + `/a/rather/long/path/for/the/nightly/report?with=query&and=more"},
		"executors":["phone-worker-1"]}`)
	m.taskAction(cron.ID, "start")
	stopped := m.createTask(`{"title":"once","type":"http","schedule":{"kind":"interval","every":"1h"},
		"http":{"method":"GET","url":"` + tg.URL + `/once"},"executors":["phone-worker-1"]}`)
	runs := m.waitRuns(cron.ID, 30*time.Second, "two runs", func(r []runJSON) bool { return len(r) >= 2 })

	b := newBrowserWithin(t, chromium, 150*time.Second)
	b.logIn(m, "", "dash-live")
	b.run("phone viewport", 10*time.Second, chromedp.EmulateViewport(390, 844, chromedp.EmulateMobile, chromedp.EmulateTouch))
	b.wait("the window is a phone's", 10*time.Second, `String(innerWidth)`, equals("390"))

	shots := os.Getenv("SM_SCREENSHOT_PHONE_DIR")
	pages := []struct{ name, path, ready string }{
		{"dashboard", "/dashboard", "dash-live"},
		{"nodes", "/nodes", "nodes-table"},
		{"node-form", "/nodes/new", "node-form"},
		{"tasks", "/tasks", "tasks-table"},
		{"task", "/tasks/" + cron.ID, "task-live"},
		{"task-form", "/tasks/new", "task-form"},
		{"task-edit", "/tasks/" + stopped.ID + "/edit", "task-form"},
		{"run", "/runs/" + runs[0].ID, "run-output"},
		{"events", "/events", "events-table"},
		{"users", "/users", "users-table"},
		{"user", "/users/admin/edit", "user-edit-form"},
		{"settings", "/settings", "settings-form"},
		{"tokens", "/tokens", "tokens-table"},
		{"account", "/account", "account-email-form"},
	}
	for _, pg := range pages {
		b.do("open "+pg.path, 20*time.Second, chromedp.Navigate(m.URL+pg.path), chromedp.WaitVisible(chromedp.ID(pg.ready)))
		b.wait(pg.path+": no sideways scroll", 5*time.Second, noSidewaysJS, equals("ok"))
		b.wait(pg.path+": the menu button", 5*time.Second, inViewJS("#nav-toggle-label"), equals("ok"))
		b.wait(pg.path+": the menu entries folded away", 5*time.Second, `getComputedStyle(document.querySelector("header.topbar nav")).display`, equals("none"))
		if shots != "" {
			writeScreenshot(b, filepath.Join(shots, "phone-"+pg.name+".png"), "phone "+pg.name)
		}
	}

	// The menu opens (a checkbox and its label: no script) to every entry.
	b.do("open the menu", 10*time.Second, chromedp.Navigate(m.URL+"/dashboard"), chromedp.WaitVisible(chromedp.ID("dash-live")))
	b.do("press Menu", 10*time.Second, chromedp.Click(chromedp.ID("nav-toggle-label")))
	b.wait("every menu entry on the screen", 5*time.Second, inViewJS("header.topbar nav a"), equals("ok"))
	b.wait("seven entries", 5*time.Second, countJS("header.topbar nav a"), atLeast(7))
	b.wait("log out on the screen", 5*time.Second, inViewJS("form.logout button"), equals("ok"))
	b.wait("no sideways scroll with the menu open", 5*time.Second, noSidewaysJS, equals("ok"))
	if shots != "" {
		writeScreenshot(b, filepath.Join(shots, "phone-menu.png"), "phone menu")
	}
	b.do("go to Events by the menu", 10*time.Second, chromedp.Click(chromedp.CSS(`header.topbar nav a[href="/events"]`)), chromedp.WaitVisible(chromedp.ID("events-table")))
	b.wait("on the event log", 5*time.Second, `location.pathname`, equals("/events"))

	// Tables become cards: name, status and actions stay on the screen.
	b.do("open Nodes", 20*time.Second, chromedp.Navigate(m.URL+"/nodes"), chromedp.WaitVisible(chromedp.ID("nodes-table")))
	b.wait("node names", 5*time.Second, inViewJS("#node-rows td.name"), equals("ok"))
	b.wait("node statuses", 5*time.Second, inViewJS("#node-rows [data-testid=status]"), equals("ok"))
	b.wait("node buttons", 5*time.Second, inViewJS("#node-rows td.actions .btn"), equals("ok"))
	b.wait("node cards, not a table", 5*time.Second, `getComputedStyle(document.querySelector("#node-rows tr")).display`, equals("block"))
	b.do("open Tasks", 20*time.Second, chromedp.Navigate(m.URL+"/tasks"), chromedp.WaitVisible(chromedp.ID("tasks-table")))
	b.wait("task titles", 5*time.Second, inViewJS("#task-rows td.name a"), equals("ok"))
	b.wait("task statuses", 5*time.Second, inViewJS("#task-rows [data-testid=status]"), equals("ok"))
	b.wait("task buttons", 5*time.Second, inViewJS("#task-rows td.actions .btn"), equals("ok"))
	b.wait("the Stop button of the running task", 5*time.Second, inViewJS(`button[data-action=stop][data-task="`+cron.ID+`"]`), equals("ok"))
	// A cron expression is one line: one line box, never wrapped mid-expression.
	b.wait("cron on one line in the list", 5*time.Second, `(() => { const e = document.querySelector("#task-`+cron.ID+` .schedule-expr");
		return e ? e.textContent.trim() + " / " + e.getClientRects().length : "absent"; })()`, equals("cron */2 * * * * * / 1"))
	b.wait("its zone shown too", 5*time.Second, textJS("#task-"+cron.ID+" td.schedule"), contains("America/Argentina/Buenos_Aires"))
	b.wait("the expression inside its card, not under the zone", 5*time.Second, `(() => {
		const row = document.querySelector("#task-`+cron.ID+`"), e = row.querySelector(".schedule-expr"), z = row.querySelector(".schedule-zone");
		const re = e.getBoundingClientRect(), rz = [...z.getClientRects()], rr = row.getBoundingClientRect();
		if (re.right > rr.right) return "the expression sticks out of the card";
		for (const r of rz) if (r.left < re.right && r.right > re.left && r.top < re.bottom && r.bottom > re.top) return "the zone overlaps the expression";
		return "ok"; })()`, equals("ok"))
	b.do("open the cron task", 20*time.Second, chromedp.Navigate(m.URL+"/tasks/"+cron.ID), chromedp.WaitVisible(chromedp.ID("task-live")))
	b.wait("cron on one line on its page", 5*time.Second, `String(document.querySelector("#task-live .schedule-expr").getClientRects().length)`, equals("1"))
	b.wait("the task's buttons", 5*time.Second, inViewJS("#task-live .task-actions .btn"), equals("ok"))
	b.wait("the run cards' results", 5*time.Second, inViewJS("#run-rows .badge"), equals("ok"))
	b.checkConsole()
}
