package main

import (
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"
)

// TestBrowserSkipLinkIsTheFirstStop: on every main page the first Tab
// reaches "Skip to content" (shown when focused), and Enter on it moves the
// focus into the page's content, past the menu; no table has a header cell
// without a name.
func TestBrowserSkipLinkIsTheFirstStop(t *testing.T) {
	t.Parallel()
	chromium := findChromium(t)
	m := startMaster(t, "")
	b := newBrowserWithin(t, chromium, 90*time.Second)
	b.logIn(m, "", "dash-live")
	for _, pg := range []struct{ path, ready string }{
		{"/dashboard", "dash-live"}, {"/nodes", "nodes-table"}, {"/tasks", "tasks-table"}, {"/runs", "run-list-table"},
		{"/delayed", "delayed-table"}, {"/events", "events-table"}, {"/projects", "projects-table"},
	} {
		b.do("open "+pg.path, 20*time.Second, chromedp.Navigate(m.URL+pg.path), chromedp.WaitVisible(chromedp.ID(pg.ready)))
		b.do(pg.path+": first Tab", 10*time.Second, chromedp.KeyEvent(kb.Tab))
		b.wait(pg.path+": the skip link has the focus", 5*time.Second, `document.activeElement.id`, equals("skip-link"))
		b.wait(pg.path+": and is shown", 5*time.Second,
			`String(document.activeElement.getBoundingClientRect().left >= 0 && document.activeElement.getBoundingClientRect().width > 0)`, equals("true"))
		b.do(pg.path+": Enter", 10*time.Second, chromedp.KeyEvent(kb.Enter))
		b.wait(pg.path+": the focus is in the content", 5*time.Second,
			`String(document.activeElement.id === "main" || !!document.activeElement.closest("main"))`, equals("true"))
		b.wait(pg.path+": every header cell has a name", 5*time.Second,
			`String([...document.querySelectorAll("th")].filter(th => th.textContent.trim() === "").length)`, equals("0"))
	}
}
