package main

import (
	"net/http"
	"strings"
	"testing"
	"time"

	cdpbrowser "github.com/chromedp/cdproto/browser"
	"github.com/chromedp/chromedp"
)

// grantClipboard lets the pages of origin read and write the clipboard, as a
// person allows it once.
func grantClipboard(b *browser, origin string) {
	b.t.Helper()
	for _, name := range []string{"clipboard-read", "clipboard-write"} {
		if _, err := chromedp.CallBrowser(b.ctx, cdpbrowser.SetPermission, cdpbrowser.SetPermissionParams{
			Permission: &cdpbrowser.PermissionDescriptor{Name: name, AllowWithoutSanitization: true}, Setting: "granted", Origin: origin,
			// The test's own browser context: without it the grant goes
			// to the default one, which the tests do not use.
			BrowserContextID: chromedp.FromContext(b.ctx).BrowserContextID}); err != nil {
			b.fatalf("grant %s: %v", name, err)
		}
	}
}

// clipboardJS reads the clipboard (after grantClipboard).
const clipboardJS = `navigator.clipboard.readText()`

// TestBrowserSmallFixes goes through the smaller things a new operator
// tripped over: the logo leads where login lands; the dashboard counts
// workers only; the runs chart fills its card; "Start a worker" suggests a
// name nobody has; the worker command and a new API token have copy buttons
// that fill the clipboard; revoking a token asks first, naming it, and says
// which was revoked; run pages are titled by their task and time; the users
// form refuses an address with no dot in its domain; a viewer's 403 page
// leads back where they came from.
func TestBrowserSmallFixes(t *testing.T) {
	t.Parallel()
	chromium := findChromium(t)
	m := startMaster(t, "")
	startWorker(t, m, "w1")
	m.waitNode("w1", 30*time.Second, "running", func(n *nodeJSON) bool { return n.Status == 2 })
	tg := newTarget(t)
	tk := m.createTask(`{"title":"Nightly backup","type":"http","schedule":{"kind":"interval","every":"1h"},
		"http":{"method":"GET","url":"` + tg.URL + `/backup"},"executors":["w1"]}`)
	m.taskAction(tk.ID, "run")
	runs := m.waitRuns(tk.ID, 20*time.Second, "one run", func(r []runJSON) bool { return len(r) == 1 })

	b := newBrowserWithin(t, chromium, 150*time.Second)
	b.logIn(m, "", "dash-live")
	grantClipboard(b, m.URL)

	// The dashboard: one worker running (the master runs no task); the chart
	// as wide as its card.
	b.wait("one running worker", 10*time.Second, textJS("#dash-nodes-running"), equals("1"))
	b.wait("the chart fills its card", 5*time.Second, `(() => { const c = document.getElementById("runs-chart"), s = document.getElementById("runs-per-day");
		const cs = getComputedStyle(c), inner = c.clientWidth - parseFloat(cs.paddingLeft) - parseFloat(cs.paddingRight);
		return Math.abs(s.getBoundingClientRect().width - inner) <= 1 ? "yes" : s.getBoundingClientRect().width + " in " + inner; })()`, equals("yes"))

	// The logo leads to the dashboard, where login lands.
	b.do("open Nodes", 20*time.Second, chromedp.Navigate(m.URL+"/nodes"), chromedp.WaitVisible(chromedp.ID("nodes-table")))
	b.do("click the logo", 20*time.Second, chromedp.Click(chromedp.CSS("header.topbar a.brand")), chromedp.WaitVisible(chromedp.ID("dash-live")))
	b.wait("on the dashboard", 5*time.Second, `location.pathname`, equals("/dashboard"))

	// Start a worker: w1 exists, so the suggestion is w2; copy it.
	b.do("open Nodes again", 20*time.Second, chromedp.Navigate(m.URL+"/nodes"), chromedp.WaitVisible(chromedp.ID("nodes-table")))
	b.do("unfold the auto worker command", 10*time.Second, chromedp.Click(chromedp.CSS("details.help summary")))
	cmd := b.wait("a free name suggested", 5*time.Second, textJS("#auto-command"), contains("--identity=w2 "))
	b.do("copy the command", 10*time.Second, chromedp.Click(chromedp.ID("copy-auto-command")))
	b.wait("the button says copied", 5*time.Second, textJS("#copy-auto-command"), equals("Copied"))
	if got := evalOnce(b, "clipboard", clipboardJS); got != cmd {
		t.Fatalf("clipboard %q, want the command %q", got, cmd)
	}
	b.do("open Add node", 20*time.Second, chromedp.Navigate(m.URL+"/nodes/new"), chromedp.WaitVisible(chromedp.ID("node-form")))
	b.do("copy the manual command", 10*time.Second, chromedp.Click(chromedp.ID("copy-worker-command")))
	b.wait("copied", 5*time.Second, textJS("#copy-worker-command"), equals("Copied"))
	if got, want := evalOnce(b, "clipboard", clipboardJS), evalOnce(b, "command", textJS("#worker-command")); got != want || !strings.Contains(got, "schedulemaster worker") {
		t.Fatalf("clipboard %q, want the worker command %q", got, want)
	}

	// A token: copied once, revoked after a confirmation that names it.
	b.do("open the tokens page", 20*time.Second, chromedp.Navigate(m.URL+"/tokens"), chromedp.WaitVisible(chromedp.ID("token-name")))
	b.do("create ci-deploy", 20*time.Second,
		sendKeys(chromedp.ID("token-name"), "ci-deploy"),
		chromedp.Click(chromedp.ID("create-token")),
		chromedp.WaitVisible(chromedp.ID("new-token")),
	)
	token := b.wait("the token", 5*time.Second, textJS("#new-token"), contains("smt_"))
	b.do("copy the token", 10*time.Second, chromedp.Click(chromedp.ID("copy-new-token")))
	b.wait("copied", 5*time.Second, textJS("#copy-new-token"), equals("Copied"))
	if got := evalOnce(b, "clipboard", clipboardJS); got != token {
		t.Fatalf("clipboard %q, want the new token", got)
	}
	if got := bearerStatus(t, m, token); got != http.StatusOK {
		t.Fatalf("the copied token: %d, want 200", got)
	}
	b.do("revoke ci-deploy", 20*time.Second, chromedp.Click(chromedp.CSS(`button[data-action=revoke][data-token="ci-deploy"]`)))
	b.wait("the toast names it", 10*time.Second, textJS("#flash .flash-ok"), contains("“ci-deploy” revoked"))
	b.wait("listed as revoked", 5*time.Second, `(() => { const r = [...document.querySelectorAll("#tokens-table tbody tr")].find(r => r.textContent.includes("ci-deploy"));
		return r ? r.querySelector("[data-testid=state]").textContent.trim() : "absent"; })()`, equals("revoked"))
	if d := b.dialogMessages(); len(d) != 1 || !strings.Contains(d[0], "ci-deploy") {
		t.Fatalf("confirm dialogs %q, want one naming ci-deploy", d)
	}
	if got := bearerStatus(t, m, token); got != http.StatusUnauthorized {
		t.Fatalf("the revoked token: %d, want 401", got)
	}

	// A run page is titled by its task and time.
	b.do("open the run", 20*time.Second, chromedp.Navigate(m.URL+"/runs/"+runs[0].ID), chromedp.WaitVisible(chromedp.ID("run-output")))
	h1 := b.wait("the heading names the task", 5*time.Second, textJS("h1"), contains("Nightly backup · run of "+time.Now().UTC().Format("2006-01-02")))
	if strings.Contains(h1, runs[0].ID) {
		t.Fatalf("run heading %q still shows the UUID", h1)
	}
	b.wait("the window title too", 5*time.Second, `document.title`, contains("Nightly backup · run of"))
	b.wait("the id kept in the details", 5*time.Second, textJS("#run-id"), equals(runs[0].ID))

	// The users form refuses an address with no dot in its domain.
	b.do("open Users", 20*time.Second, chromedp.Navigate(m.URL+"/users"), chromedp.WaitVisible(chromedp.ID("user-form")))
	b.do("create olga@example", 20*time.Second,
		sendKeys(chromedp.ID("username"), "olga"),
		sendKeys(chromedp.ID("email"), "olga@example"),
		sendKeys(chromedp.ID("password"), "olga-password-1"),
		sendKeys(chromedp.ID("password_confirm"), "olga-password-1"),
		chromedp.Click(chromedp.ID("create-user")),
		chromedp.WaitVisible(chromedp.ID("error-email")),
	)
	b.wait("the email refused", 5*time.Second, textJS("#error-email"), contains("dot"))
	if status, _ := m.api("GET", "/api/v1/users/olga", ""); status != http.StatusNotFound {
		t.Fatalf("olga was created with olga@example: %d", status)
	}

	// A viewer refused a page is led back where they came from.
	if status, body := m.api("POST", "/api/v1/users", `{"username":"vic","password":"vic-password-1","role":"viewer"}`); status != http.StatusCreated {
		t.Fatalf("create vic: %d %s", status, body)
	}
	b.do("log out", 20*time.Second, chromedp.Click(chromedp.CSS(`form.logout button[type=submit]`)), chromedp.WaitVisible(chromedp.ID("login-submit")))
	b.do("log in as vic", 20*time.Second,
		sendKeys(chromedp.ID("username"), "vic"),
		sendKeys(chromedp.ID("password"), "vic-password-1"),
		chromedp.Click(chromedp.ID("login-submit")),
		chromedp.WaitVisible(chromedp.ID("account-link")),
	)
	b.do("open Tasks", 20*time.Second, chromedp.Navigate(m.URL+"/tasks"), chromedp.WaitVisible(chromedp.ID("tasks-table")))
	b.do("follow a link to the New task form", 20*time.Second,
		chromedp.Evaluate[chromedp.Void](`(() => { const a = document.createElement("a"); a.href = "/tasks/new"; a.id = "to-new"; document.body.append(a); a.click(); })()`),
		chromedp.WaitVisible(chromedp.ID("error-back")),
	)
	b.wait("refused", 5*time.Second, textJS("h1"), contains("403"))
	b.wait("back to tasks", 5*time.Second, textJS("#error-back"), equals("Back to tasks"))
	b.wait("to the task list", 5*time.Second, attrJS("#error-back", "href"), equals("/tasks"))
	b.do("open a user's edit page by its address", 20*time.Second, chromedp.Navigate(m.URL+"/users/admin/edit"), chromedp.WaitVisible(chromedp.ID("error-back")))
	b.wait("back to users", 5*time.Second, textJS("#error-back"), equals("Back to users"))
	b.checkConsole()
}
