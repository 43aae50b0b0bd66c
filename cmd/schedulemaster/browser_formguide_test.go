package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/chromedp"
)

// activeJS is the id of the focused element ("" for one without, "body").
const activeJS = `(() => { const e = document.activeElement; return !e || e === document.body ? "body" : e.id; })()`

// saveInViewJS is "ok" when the Save and Cancel buttons are drawn inside the
// window as it is scrolled now, else where they are.
const saveInViewJS = `(() => { for (const id of ["save-task", "cancel-task"]) {
	const r = document.getElementById(id).getBoundingClientRect();
	if (r.height === 0 || r.top < 0 || r.bottom > innerHeight + 0.5 || r.left < 0 || r.right > innerWidth + 0.5)
		return id + " at " + Math.round(r.top) + ".." + Math.round(r.bottom) + " of " + innerHeight; }
	return "ok"; })()`

// optionsFitJS is "ok" when the text of every option of every select of the
// task form fits its select's box (measured in the select's own font, with
// room for its padding and arrow), else the first that does not.
const optionsFitJS = `(() => { const c = document.createElement("canvas").getContext("2d");
	for (const s of document.querySelectorAll("#task-form select")) {
		if (s.getClientRects().length === 0) continue;
		const st = getComputedStyle(s); c.font = st.font;
		const room = s.getBoundingClientRect().width - parseFloat(st.paddingLeft) - parseFloat(st.paddingRight) - 24;
		for (const o of s.options) { const w = c.measureText(o.textContent).width;
			if (w > room) return s.id + ": " + JSON.stringify(o.textContent) + " is " + Math.round(w) + "px in " + Math.round(room) + "px"; } }
	return "ok"; })()`

// captureViewport writes what the window shows now (not the full page) as PNG.
func captureViewport(b *browser, path string) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 20*time.Second)
	defer cancel()
	png, err := chromedp.Run(ctx, chromedp.CaptureScreenshot())
	if err != nil {
		b.fatalf("screenshot: %v", err)
	}
	if err := os.WriteFile(path, png, 0o644); err != nil {
		b.fatalf("screenshot: %v", err)
	}
	b.t.Logf("wrote %s (%d bytes)", path, len(png))
}

// TestBrowserTaskFormGuides drives the New task form as a demanding operator
// does, at 1280x800 and 390x844: a fresh form focuses Title, folds the
// advanced sections and keeps Save and Cancel on the screen; the cron field's
// example agrees with its label; the zone field suggests the embedded zones;
// a title near its limit shows a counter, and a paste longer than the limit
// says it was cut; the preview says the fires in the reader's zone too; a
// refused form lists each bad field as a link, marks it aria-invalid and
// describedby its message (a sentence: "minute 61 is outside 0-59"), focuses
// the first bad field (not Title when Title is fine), opens the sections that
// hold an error or a changed value and leaves the others folded; a link opens
// a folded section and focuses its field. Nothing scrolls sideways and no
// option text is clipped at either width.
//
// With SM_SCREENSHOT_FORM_DIR=/some/dir it writes screenshots there
// (taskform-{1280,390}-{fresh,refused}[-full].png).
func TestBrowserTaskFormGuides(t *testing.T) {
	t.Parallel()
	chromium := findChromium(t)
	m := startMaster(t, "")
	startWorker(t, m, "gw1")
	m.waitNode("gw1", 30*time.Second, "running", func(n *nodeJSON) bool { return n.Status == 2 })
	shots := os.Getenv("SM_SCREENSHOT_FORM_DIR")

	b := newBrowserWithin(t, chromium, 150*time.Second)
	b.logIn(m, "", "dash-live")
	// The reader lives in Tokyo; the task runs in Berlin.
	{
		ctx, cancel := context.WithTimeout(b.ctx, 10*time.Second)
		_, err := chromedp.Call(ctx, emulation.SetTimezoneOverride, emulation.SetTimezoneOverrideParams{TimezoneID: "Asia/Tokyo"})
		cancel()
		if err != nil {
			t.Fatalf("the reader's zone: %v", err)
		}
	}

	for _, w := range []struct {
		name          string
		width, height int64
	}{{"1280", 1280, 800}, {"390", 390, 844}} {
		if w.width == 390 {
			b.run("phone viewport", 10*time.Second, chromedp.EmulateViewport(390, 844, chromedp.EmulateMobile, chromedp.EmulateTouch))
		} else {
			b.run("desktop viewport", 10*time.Second, chromedp.EmulateViewport(1280, 800))
		}
		b.do(w.name+": open the New task form", 20*time.Second, chromedp.Navigate(m.URL+"/tasks/new"), chromedp.WaitVisible(chromedp.ID("task-form")))
		b.wait(w.name+": the window", 5*time.Second, `String(innerWidth)`, equals(fmt.Sprint(w.width)))
		b.wait(w.name+": a fresh form focuses Title", 5*time.Second, activeJS, equals("title"))
		b.wait(w.name+": the advanced sections folded", 5*time.Second,
			`[...document.querySelectorAll("details.fold")].map(d => d.id + "=" + d.open + "/" + d.dataset.state).join(" ")`,
			equals("fold-retries=false/default fold-routing=false/default fold-overlap=false/default fold-notify=false/default fold-children=false/default fold-params=false/default"))
		b.wait(w.name+": Save and Cancel on the screen without scrolling", 5*time.Second, saveInViewJS, equals("ok"))
		b.wait(w.name+": the URL before the advanced sections", 5*time.Second, `String(document.getElementById("http-url").getBoundingClientRect().top < document.getElementById("fold-retries").getBoundingClientRect().top)`, equals("true"))
		b.wait(w.name+": no sideways scroll", 5*time.Second, noSidewaysJS, equals("ok"))
		b.wait(w.name+": no option text clipped", 5*time.Second, optionsFitJS, equals("ok"))
		if shots != "" {
			captureViewport(b, filepath.Join(shots, "taskform-"+w.name+"-fresh.png"))
			writeScreenshot(b, filepath.Join(shots, "taskform-"+w.name+"-fresh-full.png"), "task form "+w.name)
		}
		// Scrolled to the middle, Save is still there (the bar sticks).
		b.run(w.name+": scroll to the middle", 5*time.Second, chromedp.Evaluate[chromedp.Void](`scrollTo(0, document.scrollingElement.scrollHeight / 2)`))
		b.wait(w.name+": Save on the screen scrolled half way", 5*time.Second, saveInViewJS, equals("ok"))
		b.run(w.name+": back to the top", 5*time.Second, chromedp.Evaluate[chromedp.Void](`scrollTo(0, 0)`))
	}

	// Back at 1280: the schedule's label and example agree, zones suggested.
	b.run("desktop viewport", 10*time.Second, chromedp.EmulateViewport(1280, 800))
	b.do("open the New task form", 20*time.Second, chromedp.Navigate(m.URL+"/tasks/new"), chromedp.WaitVisible(chromedp.ID("task-form")))
	b.wait("the cron example has 5 fields", 5*time.Second, `String(document.getElementById("schedule-cron").placeholder.trim().split(/\s+/).length)`, equals("5"))
	b.wait("the label says 5 fields", 5*time.Second, `document.querySelector("label[for=schedule-cron]").textContent`, contains("5 fields"))
	b.wait("the zone field suggests zones", 5*time.Second, `document.getElementById("timezone").list.id + " " + document.querySelectorAll("#tz-names option").length`, contains("tz-names 3"))
	b.wait("Europe/Berlin among them", 5*time.Second, existsJS(`#tz-names option[value="Europe/Berlin"]`), equals("true"))

	// The preview in the task's zone and in the reader's.
	b.do("a cron in Berlin", 10*time.Second,
		sendKeys(chromedp.ID("timezone"), "Europe/Berlin"),
		sendKeys(chromedp.ID("schedule-cron"), "0 3 * * *"))
	b.wait("five fires", 10*time.Second, countJS("#schedule-preview .preview-fires li"), equals("5"))
	b.wait("the zones named", 5*time.Second, textJS("#preview-zones"), contains("Europe/Berlin"))
	reader := b.wait("each fire in the reader's zone too", 10*time.Second, textJS("#schedule-preview li .reader-time"), contains("Asia/Tokyo"))
	t.Logf("first fire for the reader: %s", reader)
	b.wait("five reader times", 5*time.Second, countJS("#schedule-preview .reader-time"), equals("5"))
	if shots != "" {
		b.run("the preview in view", 5*time.Second, chromedp.Evaluate[chromedp.Void](`document.getElementById("schedule-preview").scrollIntoView({block: "center"})`))
		captureViewport(b, filepath.Join(shots, "taskform-1280-preview.png"))
	}
	// A wrong cron: a sentence, not the parser's words.
	b.do("a wrong minute", 10*time.Second, clearJS("schedule-cron"), sendKeys(chromedp.ID("schedule-cron"), "61 * * * *"))
	b.wait("the preview says which field and why", 10*time.Second, textJS("#schedule-preview .preview-error"), contains("minute 61 is outside 0-59"))

	// The title's counter near its limit, and a paste cut to it.
	// (The first characters are set at once: typing 186 keys one by one is
	// slow under -race; the last ones are typed.)
	setTitle := func(n int) chromedp.Action[chromedp.Void] {
		return chromedp.Evaluate[chromedp.Void](fmt.Sprintf(`(() => { const e = document.getElementById("title"); e.value = "t".repeat(%d);
			e.dispatchEvent(new Event("input", {bubbles: true})); })()`, n))
	}
	b.do("a title far from the limit", 10*time.Second, setTitle(149), sendKeys(chromedp.ID("title"), "t"))
	b.wait("no counter far from the limit", 5*time.Second, `(() => { const c = document.getElementById("title-count"); return c && !c.hidden ? "shown" : "hidden"; })()`, equals("hidden"))
	b.do("type up to 187", 10*time.Second, setTitle(185), sendKeys(chromedp.ID("title"), "uu"))
	b.wait("the counter near the limit", 5*time.Second, textJS("#title-count"), equals("187 / 200"))
	b.wait("the counter describes the field", 5*time.Second, attrJS("#title", "aria-describedby"), contains("title-count"))
	b.do("paste 10,000 characters", 10*time.Second, clearJS("title"), chromedp.Focus(chromedp.ID("title")),
		chromedp.Evaluate[chromedp.Void](`(() => { const t = "p".repeat(10000), dt = new DataTransfer(); dt.setData("text/plain", t);
			const el = document.getElementById("title");
			if (el.dispatchEvent(new ClipboardEvent("paste", {clipboardData: dt, bubbles: true, cancelable: true}))) document.execCommand("insertText", false, t); })()`))
	b.wait("the field holds 200", 5*time.Second, `String(document.getElementById("title").value.length)`, equals("200"))
	cut := b.wait("it says the paste was cut", 5*time.Second, textJS("#title-cut"), contains("cut to 200 characters"))
	b.wait("the counter at the limit", 5*time.Second, textJS("#title-count"), equals("200 / 200"))
	t.Logf("paste note: %s", cut)
	b.do("type one more", 10*time.Second, sendKeys(chromedp.ID("title"), "\b"))
	b.wait("the note goes with the next edit", 5*time.Second, `String(document.getElementById("title-cut").hidden)`, equals("true"))

	// A refused form: Title fine, the cron wrong, the URL missing, retries
	// out of range, overlap changed from its default.
	b.do("fill a form with errors", 20*time.Second,
		clearJS("title"), sendKeys(chromedp.ID("title"), "nightly export"),
		chromedp.Click(chromedp.CSS("#fold-retries > summary")),
		clearJS("retries"), sendKeys(chromedp.ID("retries"), "99"),
		chromedp.Click(chromedp.CSS("#fold-overlap > summary")),
		chooseJS("overlap", "queue"),
		chromedp.Evaluate[chromedp.Void](`document.getElementById("fold-retries").open = false; document.getElementById("fold-overlap").open = false`),
	)
	b.do("save", 20*time.Second, chromedp.Click(chromedp.ID("save-task")), chromedp.WaitVisible(chromedp.ID("form-errors")))
	links := b.wait("the summary links each bad field in page order", 5*time.Second,
		`[...document.querySelectorAll("#form-errors a[data-field-link]")].map(a => a.getAttribute("href")).join(" ")`,
		equals("#schedule-cron #http-url #retries"))
	b.wait("each link names its field and says why", 5*time.Second, textJS("#form-errors li"), equals("Cron expression: minute 61 is outside 0-59"))
	b.wait("focus on the first bad field, not Title", 5*time.Second, activeJS, equals("schedule-cron"))
	for _, f := range []struct{ id, err string }{{"schedule-cron", "error-schedule-cron"}, {"http-url", "error-http-url"}, {"retries", "error-retries"}} {
		b.wait(f.id+" aria-invalid", 5*time.Second, attrJS("#"+f.id, "aria-invalid"), equals("true"))
		b.wait(f.id+" described by its message", 5*time.Second, attrJS("#"+f.id, "aria-describedby"), contains(f.err))
		b.wait(f.id+"'s message shown", 5*time.Second, textJS("#"+f.err), nonEmpty)
		b.wait(f.id+" looks invalid", 5*time.Second, `getComputedStyle(document.getElementById("`+f.id+`")).borderTopColor`, equals("rgb(185, 28, 28)"))
	}
	b.wait("Title not marked", 5*time.Second, attrJS("#title", "aria-invalid"), equals("null"))
	b.wait("sections with an error or a change open, the rest folded", 5*time.Second,
		`[...document.querySelectorAll("details.fold")].map(d => d.id + "=" + d.open + "/" + d.dataset.state).join(" ")`,
		equals("fold-retries=true/error fold-routing=false/default fold-overlap=true/changed fold-notify=false/default fold-children=false/default fold-params=false/default"))
	b.wait("what was typed is kept", 5*time.Second, `document.getElementById("overlap").value + " " + document.getElementById("retries").value`, equals("queue 99"))
	t.Logf("summary links: %s", links)

	// Following a link opens its folded section and focuses the field.
	b.run("fold the retries again", 5*time.Second, chromedp.Evaluate[chromedp.Void](`document.getElementById("fold-retries").open = false`))
	b.do("follow the retries link", 10*time.Second, chromedp.Click(chromedp.CSS(`#form-errors a[href="#retries"]`)))
	b.wait("the section opened", 5*time.Second, `String(document.getElementById("fold-retries").open)`, equals("true"))
	b.wait("the field focused", 5*time.Second, activeJS, equals("retries"))
	b.do("follow the URL link", 10*time.Second, chromedp.Click(chromedp.CSS(`#form-errors a[href="#http-url"]`)))
	b.wait("the URL focused", 5*time.Second, activeJS, equals("http-url"))
	b.wait("no option text clipped on the refused form", 5*time.Second, optionsFitJS, equals("ok"))
	if shots != "" {
		b.run("to the top", 5*time.Second, chromedp.Evaluate[chromedp.Void](`scrollTo(0, 0)`))
		captureViewport(b, filepath.Join(shots, "taskform-1280-refused.png"))
		writeScreenshot(b, filepath.Join(shots, "taskform-1280-refused-full.png"), "refused task form 1280")
	}

	// The same at a phone's width: Save reachable, nothing sideways.
	b.run("phone viewport", 10*time.Second, chromedp.EmulateViewport(390, 844, chromedp.EmulateMobile, chromedp.EmulateTouch))
	b.run("to the top", 5*time.Second, chromedp.Evaluate[chromedp.Void](`scrollTo(0, 0)`))
	b.wait("phone: Save on the screen", 5*time.Second, saveInViewJS, equals("ok"))
	b.wait("phone: no sideways scroll on the refused form", 5*time.Second, noSidewaysJS, equals("ok"))
	b.wait("phone: no option text clipped", 5*time.Second, optionsFitJS, equals("ok"))
	if shots != "" {
		captureViewport(b, filepath.Join(shots, "taskform-390-refused.png"))
		writeScreenshot(b, filepath.Join(shots, "taskform-390-refused-full.png"), "refused task form 390")
	}
	if n := taskTotal(t, m); n != 0 {
		t.Fatalf("a refused task was stored (%d tasks)", n)
	}
	b.checkConsole()
}

// TestBrowserFormErrorsEverywhere: the node and delayed task forms, refused,
// list their bad fields as links, mark them aria-invalid, described by their
// messages, and focus the first bad one, not the first field.
func TestBrowserFormErrorsEverywhere(t *testing.T) {
	t.Parallel()
	chromium := findChromium(t)
	m := startMaster(t, "")
	b := newBrowserWithin(t, chromium, 90*time.Second)
	b.logIn(m, "", "dash-live")

	b.do("open Add node", 20*time.Second, chromedp.Navigate(m.URL+"/nodes/new"), chromedp.WaitVisible(chromedp.ID("node-form")))
	b.wait("a fresh node form focuses Name", 5*time.Second, activeJS, equals("name"))
	b.do("a good name, a bad host", 20*time.Second,
		sendKeys(chromedp.ID("name"), "gn1"), sendKeys(chromedp.ID("host"), "nohost"),
		chromedp.Click(chromedp.ID("save-node")), chromedp.WaitVisible(chromedp.ID("form-errors")))
	b.wait("the summary links Host", 5*time.Second, `[...document.querySelectorAll("#form-errors a[data-field-link]")].map(a => a.getAttribute("href")).join(" ")`, equals("#host"))
	b.wait("Host focused, not Name", 5*time.Second, activeJS, equals("host"))
	b.wait("Host aria-invalid", 5*time.Second, attrJS("#host", "aria-invalid"), equals("true"))
	b.wait("Host described by its message", 5*time.Second, attrJS("#host", "aria-describedby"), equals("error-host"))
	b.wait("Name not marked", 5*time.Second, attrJS("#name", "aria-invalid"), equals("null"))

	b.do("open New delayed task", 20*time.Second, chromedp.Navigate(m.URL+"/delayed/new"), chromedp.WaitVisible(chromedp.ID("delayed-form")))
	b.do("only a source app", 20*time.Second, sendKeys(chromedp.ID("source_app"), "shop"),
		chromedp.Click(chromedp.ID("save-delayed")), chromedp.WaitVisible(chromedp.ID("form-errors")))
	links := b.wait("the summary links the bad fields", 5*time.Second, `[...document.querySelectorAll("#form-errors a[data-field-link]")].map(a => a.getAttribute("href")).join(" ")`, contains("#topic"))
	if !strings.HasPrefix(links, "#topic") || strings.Contains(links, "#source_app") {
		t.Fatalf("summary links %q: want the topic first and no source app", links)
	}
	b.wait("Topic focused", 5*time.Second, activeJS, equals("topic"))
	b.wait("Topic aria-invalid", 5*time.Second, attrJS("#topic", "aria-invalid"), equals("true"))
	b.do("follow the URL link", 10*time.Second, chromedp.Click(chromedp.CSS(`#form-errors a[href="#notify_url"]`)))
	b.wait("the URL focused", 5*time.Second, activeJS, equals("notify_url"))
	b.wait("no sideways scroll", 5*time.Second, noSidewaysJS, equals("ok"))

	// In Chinese at a phone's width, the task form's options fit too.
	b.run("phone viewport", 10*time.Second, chromedp.EmulateViewport(390, 844, chromedp.EmulateMobile, chromedp.EmulateTouch))
	b.run("choose Chinese", 5*time.Second, chromedp.Evaluate[chromedp.Void](`document.cookie = "sm_lang=zh-CN; path=/"`))
	b.do("open the task form in Chinese", 20*time.Second, chromedp.Navigate(m.URL+"/tasks/new"), chromedp.WaitVisible(chromedp.ID("task-form")))
	b.wait("in Chinese", 5*time.Second, `document.documentElement.lang`, equals("zh-CN"))
	b.wait("zh: no option text clipped", 5*time.Second, optionsFitJS, equals("ok"))
	b.wait("zh: no sideways scroll", 5*time.Second, noSidewaysJS, equals("ok"))
	b.wait("zh: Save on the screen", 5*time.Second, saveInViewJS, equals("ok"))
	if dir := os.Getenv("SM_SCREENSHOT_FORM_DIR"); dir != "" {
		writeScreenshot(b, filepath.Join(dir, "taskform-390-zh-full.png"), "task form 390 zh")
	}
	b.checkConsole()
}
