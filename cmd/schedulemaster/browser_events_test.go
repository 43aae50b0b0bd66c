package main

import (
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// eventsJS lists the rows of the event log as "action|target as shown|badge|meaning".
const eventsJS = `Array.from(document.querySelectorAll("#event-rows tr[data-action]")).map(r => [r.dataset.action,
	(r.querySelector("[data-testid=target]") || {textContent: ""}).textContent.trim(),
	r.querySelector("[data-testid=outcome]").textContent.trim(), r.dataset.meaning].join("|")).join("\n")`

// TestBrowserEventsByTitleAndMeaning reads the event log as an operator:
// task events show the task's title, not its id; typing part of a title in
// the Target filter finds that task's events; a node name finds the node's;
// a node taken offline by the health checker is red and says "offline", not
// a green "ok".
func TestBrowserEventsByTitleAndMeaning(t *testing.T) {
	t.Parallel()
	chromium := findChromium(t)
	m := startMaster(t, "")
	ew, _ := startWorker(t, m, "ev-w1")
	m.waitNode("ev-w1", 30*time.Second, "running", func(n *nodeJSON) bool { return n.Status == 2 })
	tg := newTarget(t)
	tk := m.createTask(`{"title":"Billing export","type":"http","schedule":{"kind":"interval","every":"1h"},
		"http":{"method":"GET","url":"` + tg.URL + `/billing"},"executors":["ev-w1"]}`)
	m.taskAction(tk.ID, "start")
	other := m.createTask(`{"title":"Other task","type":"http","schedule":{"kind":"interval","every":"1h"},
		"http":{"method":"GET","url":"` + tg.URL + `/other"},"executors":["ev-w1"]}`)
	ew.kill()
	m.waitNode("ev-w1", 30*time.Second, "offline", func(n *nodeJSON) bool { return n.Status == 0 })

	b := newBrowser(t, chromium)
	b.logIn(m, "", "dash-live")
	b.do("open the event log", 20*time.Second, chromedp.Navigate(m.URL+"/events"), chromedp.WaitVisible(chromedp.ID("events-table")))
	rows := b.wait("the node.offline event", 10*time.Second, eventsJS, contains("node.offline|ev-w1|offline|bad"))
	t.Logf("event log:\n%s", rows)
	for _, want := range []string{"task.create|Billing export|ok|good", "task.start|Billing export|ok|good",
		"task.create|Other task|ok|good", "node.register|ev-w1|ok|good"} {
		if !strings.Contains(rows, want) {
			t.Errorf("event log lacks %q", want)
		}
	}
	// What a person sees: titles, no UUIDs; the offline badge is red.
	b.wait("no task id on the page", 5*time.Second, `String(document.getElementById("event-rows").innerText.includes(`+jsQuote(tk.ID)+`))`, equals("false"))
	b.wait("the offline badge is red", 5*time.Second, `getComputedStyle(document.querySelector('#event-rows tr[data-action="node.offline"] [data-testid=outcome]')).color`,
		equals("rgb(185, 28, 28)"))
	b.wait("a green ok for a registration", 5*time.Second, `getComputedStyle(document.querySelector('#event-rows tr[data-action="node.register"] [data-testid=outcome]')).color`,
		equals("rgb(21, 128, 61)"))

	// Part of a title, typed as a person does, finds the task's events.
	b.do("filter by a part of the title", 20*time.Second,
		sendKeys(chromedp.ID("filter-target"), "billing"),
		chromedp.Click(chromedp.ID("apply-event-filters")),
		chromedp.WaitVisible(chromedp.ID("clear-event-filters")),
	)
	b.wait("only Billing export's events", 10*time.Second, eventsJS, equals(strings.Join([]string{
		"task.start|Billing export|ok|good",
		"task.create|Billing export|ok|good",
	}, "\n")))
	// A node name finds the node's events.
	b.do("filter by the node's name", 20*time.Second,
		chromedp.Navigate(m.URL+"/events?target=ev-w1"),
		chromedp.WaitVisible(chromedp.ID("clear-event-filters")),
	)
	got := b.wait("ev-w1's events", 10*time.Second, eventsJS, contains("node.offline|ev-w1|offline|bad"))
	for _, line := range strings.Split(got, "\n") {
		if !strings.Contains(line, "|ev-w1|") {
			t.Errorf("filter by ev-w1 shows %q", line)
		}
	}
	// The API takes the same filter.
	if status, body := m.api("GET", "/api/v1/events?target=export", ""); status != 200 || !strings.Contains(body, tk.ID) || strings.Contains(body, other.ID) {
		t.Fatalf("API events by part of a title: %d %s", status, body)
	}
	b.checkConsole()
}
