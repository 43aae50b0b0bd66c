package main

import (
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// shownJS is "shown" when the element with id is drawn, "hidden" otherwise.
func shownJS(id string) string {
	return fmt.Sprintf(`(() => { const e = document.getElementById(%q); if (!e) return %q;
		return e.getClientRects().length > 0 && e.getBoundingClientRect().height > 0 ? "shown" : "hidden"; })()`, id, absent)
}

// chooseJS picks value in the select id as a person does: the value, then
// the input and change events htmx and the page listen to.
func chooseJS(id, value string) chromedp.Action[chromedp.Void] {
	return chromedp.Evaluate[chromedp.Void](fmt.Sprintf(`(() => { const e = document.getElementById(%q); e.value = %q;
		e.dispatchEvent(new Event("input", {bubbles: true})); e.dispatchEvent(new Event("change", {bubbles: true})); })()`, id, value))
}

// clearJS empties the input id (chromedp's SetValue drops an empty value).
func clearJS(id string) chromedp.Action[chromedp.Void] {
	return chromedp.Evaluate[chromedp.Void](fmt.Sprintf(`document.getElementById(%q).value = ""`, id))
}

// TestBrowserTaskFormShowsWhatTheChoiceNeeds drives the New task form: it
// shows only the fields of the chosen type (HTTP or shell; those of the
// types beyond them come from the master, saying which workers run the
// type), schedule kind
// (cron, interval, once) and routing (the key for hash), with no script of
// its own; the date fields name the time zone they are read in, following
// what is typed; the live preview lists five fire times for a cron and the
// parse error inline for a wrong one; and saving a shell task whose only
// executor was started without --allow-shell is refused, naming it, with
// nothing stored.
func TestBrowserTaskFormShowsWhatTheChoiceNeeds(t *testing.T) {
	t.Parallel()
	chromium := findChromium(t)
	m := startMaster(t, "")
	startWorker(t, m, "fw1")
	m.waitNode("fw1", 30*time.Second, "running", func(n *nodeJSON) bool { return n.Status == 2 })

	b := newBrowserWithin(t, chromium, 120*time.Second)
	b.logIn(m, "", "dash-live")
	b.do("open the New task form", 20*time.Second, chromedp.Navigate(m.URL+"/tasks/new"), chromedp.WaitVisible(chromedp.ID("task-form")))

	// The defaults: an HTTP task on a cron schedule with weighted routing.
	want := func(when string, shown, hidden []string) {
		t.Helper()
		for _, id := range shown {
			b.wait(when+": "+id+" shown", 5*time.Second, shownJS(id), equals("shown"))
		}
		for _, id := range hidden {
			b.wait(when+": "+id+" hidden", 5*time.Second, shownJS(id), equals("hidden"))
		}
	}
	want("http and cron", []string{"http-fields", "http-url", "schedule-cron", "start-at", "end-at"},
		[]string{"shell-fields", "shell-command", "schedule-every", "schedule-at", "routing_key"})

	// A type beyond HTTP and shell: its fields come from the master as the
	// type is chosen, and the form says that no worker runs it yet.
	b.do("choose nats", 10*time.Second, chooseJS("type", "nats"))
	want("nats", []string{"nats-fields", "nats-connection", "nats-subject"}, []string{"http-fields", "shell-fields"})
	b.wait("no worker runs nats", 10*time.Second, textJS("#type-runners"), contains("--allow-types nats"))
	b.wait("a link to define a connection", 5*time.Second, attrJS("#nats-new-connection", "href"), equals("/connections/new?kind=nats"))
	b.do("choose http again", 10*time.Second, chooseJS("type", "http"))
	want("http again", []string{"http-fields"}, []string{"shell-fields"})
	b.wait("the nats fields gone", 10*time.Second, shownJS("nats-fields"), equals(absent))
	b.wait("nothing said of http's workers", 10*time.Second, textJS("#type-runners"), equals(""))

	b.do("choose shell", 10*time.Second, chooseJS("type", "shell"))
	want("shell", []string{"shell-fields", "shell-command"}, []string{"http-fields", "http-url"})
	b.do("choose interval", 10*time.Second, chooseJS("schedule-kind", "interval"))
	want("interval", []string{"schedule-every", "start-at", "end-at"}, []string{"schedule-cron", "schedule-at"})
	b.do("choose once", 10*time.Second, chooseJS("schedule-kind", "once"))
	want("once", []string{"schedule-at"}, []string{"schedule-cron", "schedule-every", "start-at", "end-at"})
	b.do("choose hash routing", 10*time.Second, chooseJS("routing", "hash"))
	want("hash routing", []string{"routing_key"}, nil)
	b.do("choose weighted routing", 10*time.Second, chooseJS("routing", "weighted"))
	want("weighted routing", nil, []string{"routing_key"})

	// Date fields say which zone they are read in, and follow the zone typed.
	label := func(id string) string {
		return fmt.Sprintf(`document.querySelector('label[for=%q]').textContent.replace(/\s+/g, " ").trim()`, id)
	}
	b.wait("At in UTC", 5*time.Second, label("schedule-at"), contains("in UTC"))
	b.do("type a zone", 10*time.Second, sendKeys(chromedp.ID("timezone"), "Europe/Berlin"))
	for _, id := range []string{"schedule-at", "start-at", "end-at", "schedule-cron"} {
		b.wait(id+" names Berlin", 10*time.Second, label(id), contains("in Europe/Berlin"))
	}

	// The live preview: five fires of a cron, five minutes apart; a wrong
	// cron gives its parse error inline, under the field, at once.
	b.do("type a cron", 10*time.Second,
		chooseJS("schedule-kind", "cron"),
		sendKeys(chromedp.ID("schedule-cron"), "*/5 * * * *"),
	)
	b.wait("five fire times", 10*time.Second, countJS("#schedule-preview .preview-fires li"), equals("5"))
	gaps := b.wait("five minutes apart", 5*time.Second, `(() => { const t = [...document.querySelectorAll("#schedule-preview time")].map(e => Date.parse(e.getAttribute("datetime")));
		return t.slice(1).map((v, i) => (v - t[i]) / 1000).join(","); })()`, equals("300,300,300,300"))
	first := b.wait("the fires in the zone", 5*time.Second, textJS("#schedule-preview li"), contains("CE"))
	t.Logf("gaps %s; first fire %s", gaps, first)
	b.do("type a wrong cron", 10*time.Second, clearJS("schedule-cron"), sendKeys(chromedp.ID("schedule-cron"), "61 * * * *"))
	perr := b.wait("the parse error inline", 10*time.Second, textJS("#schedule-preview .preview-error"), contains("Cron expression: minute 61 is outside 0-59"))
	b.wait("no fires listed", 5*time.Second, countJS("#schedule-preview .preview-fires li"), equals("0"))
	b.wait("the error right under the schedule fields", 5*time.Second, `(() => {
		const p = document.querySelector("#schedule-preview .preview-error").getBoundingClientRect(), c = document.getElementById("schedule-cron").getBoundingClientRect();
		return String(p.top > c.bottom && p.top - c.bottom < 400); })()`, equals("true"))
	t.Logf("wrong cron: %s", perr)

	// A shell task whose only executor does not run shell is refused at save.
	b.do("fill a shell task for fw1", 20*time.Second,
		clearJS("schedule-cron"),
		sendKeys(chromedp.ID("schedule-cron"), "0 3 * * *"),
		sendKeys(chromedp.ID("title"), "shell on fw1"),
		chooseJS("type", "shell"),
		sendKeys(chromedp.ID("shell-command"), "/bin/true"),
		chromedp.Click(chromedp.ID("executor-fw1")),
	)
	b.do("save", 20*time.Second, chromedp.Click(chromedp.ID("save-task")), chromedp.WaitVisible(chromedp.ID("form-errors")))
	msg := b.wait("the refusal names the executor", 5*time.Second, textJS("#error-executors"), contains("fw1"))
	if !strings.Contains(msg, "--allow-shell") {
		t.Fatalf("refusal %q does not say what is missing", msg)
	}
	t.Logf("refused: %s", msg)
	// The executors are the first bad field: a group of checkboxes, so its
	// first box takes the focus, and the summary links the group.
	b.wait("the executors marked", 5*time.Second, attrJS("#executors", "data-invalid"), equals("true"))
	b.wait("the executors described by the message", 5*time.Second, attrJS("#executors", "aria-describedby"), contains("error-executors"))
	b.wait("the first box focused", 5*time.Second, activeJS, equals("executor-fw1"))
	b.wait("the summary links the group", 5*time.Second, attrJS("#form-errors a[data-field-link]", "href"), equals("#executors"))
	if n := taskTotal(t, m); n != 0 {
		t.Fatalf("the refused shell task was stored (%d tasks)", n)
	}
	// The refused form comes back as it was chosen: shell, cron, in Berlin.
	want("after the refusal", []string{"shell-fields", "schedule-cron"}, []string{"http-fields", "schedule-every"})
	b.wait("zone kept in the labels", 10*time.Second, label("schedule-at"), contains("in Europe/Berlin"))
	b.wait("cron kept", 5*time.Second, `document.getElementById("schedule-cron").value`, equals("0 3 * * *"))
	b.wait("preview again", 10*time.Second, countJS("#schedule-preview .preview-fires li"), equals(strconv.Itoa(5)))
	b.checkConsole()
}
