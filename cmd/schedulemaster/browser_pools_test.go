package main

import (
	"os"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// TestBrowserPools drives pools in a real headless Chromium against a real
// master and two workers labelled by an admin: the task form's selector
// preview follows the typing (the running members it matches, then the
// sentence pointing at a bad character), and the Pools page, reached from
// the navigation, lists each pool's members and how they joined, and
// approves one.
func TestBrowserPools(t *testing.T) {
	t.Parallel()
	chromium := findChromium(t)
	m := startMaster(t, "")
	startWorker(t, m, "pw1")
	startWorker(t, m, "pw2")
	for name, pool := range map[string]string{"pw1": "billing", "pw2": "reports"} {
		m.waitNode(name, 30*time.Second, "running", func(n *nodeJSON) bool { return n.Status == 2 })
		if status, body := m.api("PUT", "/api/v1/nodes/"+name+"/labels", `{"labels":{"pool":"`+pool+`"}}`); status != 200 {
			t.Fatalf("label %s: %d %s", name, status, body)
		}
	}

	b := newBrowser(t, chromium)
	b.logIn(m, "/tasks/new", "task-form")
	b.wait("the blank preview", 10*time.Second, textJS("#selector-preview"), contains("Type a selector"))
	b.do("type a selector", 10*time.Second, chromedp.SendKeys(chromedp.ID("selector"), "pool=billing"))
	b.wait("the billing member", 10*time.Second, textJS("#selector-matches"), equals("matches 1 running node: pw1"))
	b.do("widen it", 10*time.Second, clearJS("selector"), chromedp.SendKeys(chromedp.ID("selector"), "pool in (billing,reports)"))
	b.wait("both members", 10*time.Second, textJS("#selector-matches"), equals("matches 2 running nodes: pw1, pw2"))
	b.do("break it", 10*time.Second, clearJS("selector"), chromedp.SendKeys(chromedp.ID("selector"), "pool in billing"))
	msg := b.wait("the bad character named", 10*time.Second, textJS("#selector-error"), contains("at character 9"))
	t.Logf("bad selector: %s", msg)

	b.do("open Pools", 20*time.Second,
		chromedp.Click(chromedp.CSS(`header.topbar nav a[href="/pools"]`)),
		chromedp.WaitVisible(chromedp.ID("pool-key-form")),
	)
	billing := `[data-pool="pool=billing"]`
	b.wait("pw1 running in billing", 10*time.Second, textJS(billing+` tr[data-node=pw1] [data-testid=status]`), equals("running"))
	b.wait("pw2 in reports", 5*time.Second, existsJS(`[data-pool="pool=reports"] tr[data-node=pw2]`), equals("true"))
	b.wait("billing not approved", 5*time.Second, textJS(billing+` [data-testid=approved]`), equals("not approved"))
	b.wait("pw1 joined billing by its labels", 5*time.Second, textJS(billing+` .pool-events [data-action="node.labels"]`), contains("pw1"))
	b.do("approve billing", 20*time.Second, chromedp.Click(chromedp.CSS(`button[data-action=approve][data-pool="pool=billing"]`)))
	b.wait("approved", 10*time.Second, textJS(billing+` [data-testid=approved]`), equals("approved"))
	b.wait("the flash", 5*time.Second, textJS("#flash .flash-ok"), contains("pool=billing approved"))
	if path := os.Getenv("SM_SCREENSHOT_POOLS"); path != "" {
		b.screenshot(path)
	}
	b.checkConsole()
}
