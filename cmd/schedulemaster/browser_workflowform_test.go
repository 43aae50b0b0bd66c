package main

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// TestBrowserWorkflowFormAddsRowsAndSavesOnEnter drives the New workflow
// form with no script of its own: a workflow run by hand shows no window,
// overlap or preview, a schedule shows them; Add step and Add a step it
// waits for post the form back with the new row focused and what was typed
// kept; Enter in a field saves (not a row's Remove); the workflow's page
// then draws the two steps.
func TestBrowserWorkflowFormAddsRowsAndSavesOnEnter(t *testing.T) {
	t.Parallel()
	chromium := findChromium(t)
	m := startMaster(t, "")
	if st, body := m.api("POST", "/api/v1/nodes", `{"name":"wfnode","host":"127.0.0.1:9"}`); st != http.StatusCreated {
		t.Fatalf("add node: %d %s", st, body)
	}
	first := m.createTask(`{"title":"extract rows","type":"http","schedule":{"kind":"interval","every":"1h"},"http":{"method":"GET","url":"http://127.0.0.1:9/x"},"executors":["wfnode"]}`)
	second := m.createTask(`{"title":"page the team","type":"http","schedule":{"kind":"interval","every":"1h"},"http":{"method":"GET","url":"http://127.0.0.1:9/y"},"executors":["wfnode"]}`)

	b := newBrowserWithin(t, chromium, 120*time.Second)
	b.logIn(m, "", "dash-live")
	b.do("open the New workflow form", 20*time.Second, chromedp.Navigate(m.URL+"/workflows/new"), chromedp.WaitVisible(chromedp.ID("workflow-form")))
	want := func(when string, shown, hidden []string) {
		t.Helper()
		for _, id := range shown {
			b.wait(when+": "+id+" shown", 5*time.Second, shownJS(id), equals("shown"))
		}
		for _, id := range hidden {
			b.wait(when+": "+id+" hidden", 5*time.Second, shownJS(id), equals("hidden"))
		}
	}
	want("by hand", []string{"timezone", "steps-0-name"}, []string{"schedule-cron", "start-at", "overlap", "schedule-preview"})
	b.do("choose cron", 10*time.Second, chooseJS("schedule-kind", "cron"))
	want("cron", []string{"schedule-cron", "start-at", "overlap", "misfire"}, []string{"schedule-every", "schedule-at"})
	b.do("back to by hand", 10*time.Second, chooseJS("schedule-kind", "manual"))

	b.do("fill the first step", 10*time.Second, sendKeys(chromedp.ID("title"), "nightly etl"),
		sendKeys(chromedp.ID("steps-0-name"), "extract"), chooseJS("steps-0-task", first.ID))
	b.do("add a step", 20*time.Second, chromedp.Click(chromedp.ID("add-step")), chromedp.WaitVisible(chromedp.ID("steps-1-name")))
	b.wait("the new step's name focused", 5*time.Second, activeJS, equals("steps-1-name"))
	b.wait("the title kept", 5*time.Second, `document.getElementById("title").value`, equals("nightly etl"))
	b.wait("the first step's task kept", 5*time.Second, `document.getElementById("steps-0-task").value`, equals(first.ID))
	b.do("fill the second step", 10*time.Second, sendKeys(chromedp.ID("steps-1-name"), "alert"), chooseJS("steps-1-task", second.ID))
	b.do("add what it waits for", 20*time.Second, chromedp.Click(chromedp.ID("steps-1-add-edge")), chromedp.WaitVisible(chromedp.ID("steps-1-after-0-step")))
	b.wait("the new edge focused", 5*time.Second, activeJS, equals("steps-1-after-0-step"))
	b.do("name the parent, on failure", 10*time.Second, chooseJS("steps-1-after-0-on", "failure"), sendKeys(chromedp.ID("steps-1-after-0-step"), "extract"))

	// Enter in the field saves the workflow.
	b.do("press Enter", 20*time.Second, chromedp.KeyEvent("\r"), chromedp.WaitVisible(chromedp.ID("workflow-summary")))
	path := b.wait("the workflow's page", 5*time.Second, "location.pathname", contains("/workflows/"))
	if strings.HasSuffix(path, "/new") || strings.Count(path, "/") != 2 {
		t.Fatalf("after Enter the browser is at %s", path)
	}
	b.wait("saved", 5*time.Second, textJS("#flash"), contains("nightly etl"))
	b.wait("two steps drawn", 5*time.Second, countJS("svg.dag .dag-node"), equals("2"))
	b.wait("the failure edge labelled", 5*time.Second, textJS("svg.dag .dag-edge-label"), equals("failure"))
	b.checkConsole()
}
