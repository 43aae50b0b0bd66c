package main

import (
	"os"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// TestBrowserPools drives pools in a real headless Chromium against a real
// master and two workers that declare pool=billing, one of which an admin
// moves to pool=reports: the task form's selector preview follows the typing
// (the running members it matches, then the sentence pointing at a bad
// character), and the Pools page, reached from the navigation, lists each
// pool's members and their comings and goings, and approves one.
func TestBrowserPools(t *testing.T) {
	t.Parallel()
	chromium := findChromium(t)
	m := startMaster(t, "")
	// pw1 declares its pool; an admin puts pw2 in another.
	startWorker(t, m, "pw1", "--labels", "pool=billing")
	startWorker(t, m, "pw2", "--labels", "pool=billing")
	for _, name := range []string{"pw1", "pw2"} {
		m.waitNode(name, 30*time.Second, "running", func(n *nodeJSON) bool { return n.Status == 2 })
	}
	if status, body := m.api("PUT", "/api/v1/nodes/pw2/labels", `{"labels":{"pool":"reports"}}`); status != 200 {
		t.Fatalf("label pw2: %d %s", status, body)
	}

	b := newBrowser(t, chromium)
	b.logIn(m, "/tasks/new", "task-form")
	b.wait("the blank preview", 10*time.Second, textJS("#selector-preview"), contains("Type a selector"))
	b.do("type a selector", 10*time.Second, sendKeys(chromedp.ID("selector"), "pool=billing"))
	b.wait("the billing member", 10*time.Second, textJS("#selector-matches"), equals("matches 1 running node: pw1"))
	b.do("widen it", 10*time.Second, clearJS("selector"), sendKeys(chromedp.ID("selector"), "pool in (billing,reports)"))
	b.wait("both members", 10*time.Second, textJS("#selector-matches"), equals("matches 2 running nodes: pw1, pw2"))
	b.do("break it", 10*time.Second, clearJS("selector"), sendKeys(chromedp.ID("selector"), "pool in billing"))
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
	b.wait("pw2 moved out of billing by an admin", 5*time.Second, textJS(billing+` .pool-events [data-action="node.labels"][data-node=pw2]`), contains("pool=reports"))
	b.wait("pw1 registered in billing", 5*time.Second, existsJS(billing+` .pool-events [data-action="node.register"][data-node=pw1]`), equals("true"))
	b.wait("pw2 not a member of billing", 5*time.Second, existsJS(billing+` tr[data-node=pw2]`), equals("false"))
	b.do("approve billing", 20*time.Second, chromedp.Click(chromedp.CSS(`button[data-action=approve][data-pool="pool=billing"]`)))
	b.wait("approved", 10*time.Second, textJS(billing+` [data-testid=approved]`), equals("approved"))
	b.wait("the flash", 5*time.Second, textJS("#flash .flash-ok"), contains("pool=billing approved"))
	if path := os.Getenv("SM_SCREENSHOT_POOLS"); path != "" {
		b.screenshot(path)
	}
	b.checkConsole()
}
