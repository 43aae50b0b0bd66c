package main

import (
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// TestBrowserRunLiveOutputAndKill drives a run in progress in a real
// headless Chromium against real master and worker processes: a shell task
// that prints a line every 0.2 s shows on its task page as running; its run
// page shows the output growing without a reload; Kill (after its
// confirmation) ends it: the page says killed, the output keeps what was
// printed and who killed it, the Kill button is gone and the page stops
// polling.
//
// With SM_SCREENSHOT_RUN_LIVE=/path/to/file.png it also writes a screenshot
// of the run page while the run is in progress.
func TestBrowserRunLiveOutputAndKill(t *testing.T) {
	t.Parallel()
	chromium := findChromium(t)
	m := startMaster(t, "")
	startWorker(t, m, "lw1", "--allow-shell")
	m.waitNode("lw1", 30*time.Second, "running", func(n *nodeJSON) bool { return n.Status == 2 })
	task := m.createTask(`{"title":"nightly export","type":"shell","schedule":{"kind":"interval","every":"1h"},
		"shell":{"command":"i=0; while [ $i -lt 600 ]; do echo exported batch $i; i=$((i+1)); sleep 0.2; done"},
		"timeout":"5m","retries":1,"executors":["lw1"]}`)
	m.taskAction(task.ID, "run")
	runs := m.waitRuns(task.ID, 20*time.Second, "the run listed as running", func(r []runJSON) bool {
		return len(r) == 1 && r[0].Result == "running"
	})
	runID := runs[0].ID

	b := newBrowser(t, chromium)
	b.logIn(m, "", "dash-live")
	b.do("open the task page", 20*time.Second,
		chromedp.Navigate(m.URL+"/tasks/"+task.ID),
		chromedp.WaitVisible(chromedp.ID("runs-table")),
	)
	b.wait("the run shown as running", 10*time.Second, textJS("#run-"+runID+" .badge"), equals("running"))
	b.do("open the run", 20*time.Second,
		chromedp.Click(chromedp.CSS(`#run-`+runID+` a[href="/runs/`+runID+`"]`)),
		chromedp.WaitVisible(chromedp.ID("run-output")),
	)
	b.wait("location of the run page", 10*time.Second, `location.pathname`, equals("/runs/"+runID))
	b.wait("the result badge", 5*time.Second, textJS(`[data-testid="result"]`), equals("running"))
	b.wait("where the output comes from", 10*time.Second, textJS("#live-note"), contains("of output so far, from node lw1"))
	b.run("set the no-reload marker", 5*time.Second, chromedp.Evaluate[chromedp.Void](`window.__noReload = 42`))
	// The output grows while the page stays: a later line than any shown now.
	shown := b.wait("some output", 10*time.Second, textJS("#run-output"), contains("exported batch 2"))
	next := "exported batch " + strconv.Itoa(strings.Count(shown, "\n")+8)
	b.wait("the output growing live", 15*time.Second, textJS("#run-output"), contains(next))
	b.wait("the duration counting", 5*time.Second, textJS("#run-duration"), contains("running for"))
	b.checkMarker("while the output streams")
	if path := os.Getenv("SM_SCREENSHOT_RUN_LIVE"); path != "" {
		b.screenshot(path)
	}

	before := len(b.dialogMessages())
	b.do("press Kill", 20*time.Second, chromedp.Click(chromedp.CSS(`#run-live button[data-action="kill"]`)))
	b.wait("the run recorded as killed", 20*time.Second, textJS(`[data-testid="result"]`), equals("killed"))
	if d := b.dialogMessages()[before:]; len(d) != 1 || !strings.Contains(d[0], "Kill this run of “nightly export” on node lw1?") {
		t.Fatalf("confirmation dialogs: %q", d)
	}
	b.wait("the kill note in the output", 10*time.Second, textJS("#run-output"), contains("[killed by admin]"))
	b.wait("the output printed before the kill kept", 5*time.Second, textJS("#run-output"), contains(next))
	b.wait("no Kill button any more", 5*time.Second, countJS(`button[data-action="kill"]`), equals("0"))
	b.wait("no more polling", 5*time.Second, attrJS("#run-live", "hx-trigger"), equals("null"))
	b.checkMarker("after the kill")

	// Recorded once, not retried (retries: 1).
	final := m.waitRuns(task.ID, 10*time.Second, "the killed run", func(r []runJSON) bool { return len(r) == 1 && r[0].Result == "killed" })
	if final[0].ID != runID {
		t.Fatalf("killed run %s, want %s", final[0].ID, runID)
	}
	b.checkConsole()
}
