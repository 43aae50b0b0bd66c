package main

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// TestBrowserDelayedLifecycle drives the delayed task console in a real
// headless Chromium against a real master and worker process: create a
// delayed task in the form (first with a bad delay, refused inline), see it
// in the list, open it, cancel it through the confirm dialog.
func TestBrowserDelayedLifecycle(t *testing.T) {
	t.Parallel()
	chromium := findChromium(t)

	m := startMaster(t, "")
	startWorker(t, m, "bdw1")
	m.waitNode("bdw1", 30*time.Second, "running", func(n *nodeJSON) bool { return n.Status == 2 })
	tg := newTarget(t)

	b := newBrowser(t, chromium)
	b.logIn(m, "/nodes", "nodes-table")
	b.do("open Delayed from the menu", 20*time.Second,
		chromedp.Click(chromedp.CSS(`header.topbar nav a[href="/delayed"]`)),
		chromedp.WaitVisible(chromedp.ID("delayed-table")),
	)
	b.wait("empty list", 10*time.Second, textJS("#delayed-rows td.empty"), contains("No delayed tasks yet"))

	b.do("open the form", 20*time.Second,
		chromedp.Click(chromedp.ID("new-delayed")),
		chromedp.WaitVisible(chromedp.ID("delayed-form")),
	)
	b.wait("bdw1 offered as executor", 10*time.Second, existsJS("#executor-bdw1"), equals("true"))
	b.do("fill the form with a bad delay", 20*time.Second,
		sendKeys(chromedp.ID("source_app"), "shop"),
		sendKeys(chromedp.ID("topic"), "order.timeout"),
		sendKeys(chromedp.ID("content_key"), "order-7"),
		sendKeys(chromedp.ID("delay"), "whenever"),
		sendKeys(chromedp.ID("notify_url"), tg.URL+"/order-7"),
		sendKeys(chromedp.ID("notify_body"), `{"order":7}`),
		chromedp.Click(chromedp.ID("executor-bdw1")),
	)
	b.do("submit the bad delay", 20*time.Second,
		chromedp.Click(chromedp.ID("save-delayed")),
		chromedp.WaitVisible(chromedp.ID("error-delay")),
	)
	msg := b.wait("inline delay error", 5*time.Second, textJS("#error-delay"), contains("whenever"))
	t.Logf("the form refuses the delay with: %s", msg)
	b.wait("no other inline error", 5*time.Second, textJS("#error-notify_url"), equals(absent))
	b.wait("URL kept", 5*time.Second, `document.getElementById("notify_url").value`, equals(tg.URL+"/order-7"))
	if status, resp := m.api("GET", "/api/v1/delayed", ""); status != 200 || !strings.Contains(resp, `"total":0`) {
		t.Fatalf("a refused form stored a task: %s", resp)
	}

	b.do("fix the delay and save", 20*time.Second,
		chromedp.Evaluate[chromedp.Void](`document.getElementById("delay").value = ""`),
		sendKeys(chromedp.ID("delay"), "1h"),
		chromedp.Click(chromedp.ID("save-delayed")),
		chromedp.WaitVisible(chromedp.ID("delayed-detail")),
	)
	loc := b.wait("detail page after save", 10*time.Second, `location.pathname`, matches(`^/delayed/[0-9a-f]{32}$`))
	id := strings.TrimPrefix(loc, "/delayed/")
	b.wait("created flash", 10*time.Second, textJS("#flash .flash-ok"), contains("Delayed task created"))
	b.wait("pending", 5*time.Second, textJS("#delayed-detail [data-testid=status]"), equals("pending"))
	b.wait("due time in UTC", 5*time.Second, textJS("#delayed-due"), contains(" UTC"))
	b.wait("no runs yet", 5*time.Second, textJS("#run-rows td.empty"), contains("No runs yet"))

	b.do("back to the list", 20*time.Second,
		chromedp.Click(chromedp.CSS(`.crumbs a[href="/delayed"]`)),
		chromedp.WaitVisible(chromedp.ID("delayed-table")),
	)
	b.wait("the task in the list", 10*time.Second, attrJS("#delayed-"+id, "data-status"), equals("pending"))
	b.do("filter by another topic", 20*time.Second,
		sendKeys(chromedp.ID("filter-topic"), "other"),
		chromedp.Click(chromedp.ID("apply-filters")),
		chromedp.WaitVisible(chromedp.ID("delayed-table")),
	)
	b.wait("filtered out", 10*time.Second, textJS("#delayed-rows td.empty"), contains("No delayed tasks match"))
	b.do("clear the filter", 20*time.Second,
		chromedp.Navigate(m.URL+"/delayed?status=pending&topic=order.timeout&source_app=shop"),
		chromedp.WaitVisible(chromedp.ID("delayed-table")),
	)
	b.wait("the task in the filtered list", 10*time.Second, attrJS("#delayed-"+id, "data-status"), equals("pending"))

	b.do("open it", 20*time.Second,
		chromedp.Click(chromedp.CSS(fmt.Sprintf(`#delayed-%s a[href="/delayed/%s"]`, id, id))),
		chromedp.WaitVisible(chromedp.ID("delayed-detail")),
	)
	b.run("set the no-reload marker", 5*time.Second, chromedp.Evaluate[chromedp.Void](`window.__noReload = 42`))
	b.do("click Cancel", 20*time.Second, chromedp.Click(chromedp.CSS(fmt.Sprintf(`button[data-action=cancel][data-delayed="%s"]`, id))))
	b.wait("cancel flash", 20*time.Second, textJS("#flash .flash-ok"), contains("cancelled"))
	b.wait("cancelled badge", 10*time.Second, textJS("#delayed-detail [data-testid=status]"), equals("cancelled"))
	b.wait("no cancel button any more", 5*time.Second, existsJS(`button[data-action=cancel]`), equals("false"))
	b.checkMarker("after Cancel")
	if d := b.dialogMessages(); len(d) != 1 || !strings.Contains(d[0], "Cancel delayed task "+id) {
		t.Fatalf("confirm dialogs: %q", d)
	}
	if got := m.delayed(id); got.Status != "cancelled" {
		t.Fatalf("after cancel in the browser: %+v", got)
	}
	if tg.count("/order-7") != 0 {
		t.Fatal("the cancelled task fired")
	}
	b.checkConsole()
}
