package main

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// longWord is a 200-character title without a space: allowed, and the
// hardest text a page has to fit.
var longWord = strings.Repeat("Unbroken", 25)

// axeViolation is what the test keeps of one axe-core finding.
type axeViolation struct {
	ID     string `json:"id"`
	Impact string `json:"impact"`
	Help   string `json:"help"`
	Nodes  []struct {
		Target []any  `json:"target"`
		HTML   string `json:"html"`
	} `json:"nodes"`
}

// axeRunJS runs the injected axe-core on the page and gives its violations
// as JSON.
const axeRunJS = `axe.run(document, {resultTypes: ["violations"]}).then(r => JSON.stringify(r.violations.map(v => ({
	id: v.id, impact: v.impact, help: v.help, nodes: v.nodes.slice(0, 4).map(n => ({target: n.target, html: n.html.slice(0, 160)}))}))))`

// widerThanJS is "ok" when the page is no wider than w pixels (the width of
// the window; a phone's window widens to what sticks out), else the widths
// and the first elements that stick out.
func widerThanJS(w int64) string {
	return `(() => { const w = ` + strconv.FormatInt(w, 10) + `, sw = document.documentElement.scrollWidth;
	if (sw <= w) return "ok";
	const out = [...document.querySelectorAll("body *")].filter(e => e.getBoundingClientRect().right > w + 0.5)
		.slice(0, 6).map(e => e.tagName.toLowerCase() + (e.id ? "#" + e.id : "") + "." + [...e.classList].join(".") + " right=" + Math.round(e.getBoundingClientRect().right));
	return "scrollWidth " + sw + " > " + w + ": " + out.join("; "); })()`
}

// TestBrowserAxeEveryPage opens every console page as an admin, with
// realistic data whose titles, names, topics and keys are as long as allowed
// and unbroken (200-character titles, 64-character names), at 1280×800 and at
// 390×844, and checks each with axe-core (testdata/axe, vendored): no
// critical, serious or moderate finding (minor ones are logged), and the page
// never scrolls sideways.
func TestBrowserAxeEveryPage(t *testing.T) {
	t.Parallel()
	chromium := findChromium(t)
	axeSrc, err := os.ReadFile(filepath.Join("testdata", "axe", "axe.min.js"))
	if err != nil {
		t.Fatal(err)
	}
	m := startMaster(t, "")
	tg := newTarget(t)
	worker := strings.Repeat("longworker", 6) + "-w01"  // 64 characters, the most a name may have
	manual := strings.Repeat("manualnode", 6) + "-m01"  // an offline manual node
	poolValue := strings.Repeat("poolvalue", 6) + "-pv" // a label value without a break
	startWorker(t, m, worker, "--labels", "pool="+poolValue, "--allow-shell")
	m.waitNode(worker, 30*time.Second, "running", func(n *nodeJSON) bool { return n.Status == 2 })
	if st, body := m.api("POST", "/api/v1/nodes", `{"name":"`+manual+`","host":"127.0.0.1:9"}`); st != http.StatusCreated {
		t.Fatalf("add node: %d %s", st, body)
	}
	longPath := "/ok/" + strings.Repeat("segment", 20)
	ok := m.createTask(`{"title":"` + longWord + `","type":"http","description":"` + longWord + `",
		"schedule":{"kind":"interval","every":"2s"},"http":{"method":"POST","url":"` + tg.URL + longPath + `"},
		"executors":["` + worker + `"]}`)
	m.taskAction(ok.ID, "start")
	failing := m.createTask(`{"title":"F` + longWord[1:] + `","type":"http",
		"schedule":{"kind":"interval","every":"1s"},"http":{"method":"GET","url":"` + tg.URL + `/fail"},
		"selector":"pool=` + poolValue + `"}`)
	m.taskAction(failing.ID, "start")
	stopped := m.createTask(`{"title":"S` + longWord[1:] + `","type":"shell","schedule":{"kind":"cron","cron":"0 3 * * *"},
		"shell":{"command":"echo ` + longWord + `"},"executors":["` + worker + `"]}`)
	topic, key := strings.Repeat("topic", 24)+"-abcdefg", strings.Repeat("contentkey", 25)+"-abcd"
	var pending struct {
		ID string `json:"id"`
	}
	st, body := m.api("POST", "/api/v1/delayed", `{"source_app":"`+strings.Repeat("app", 21)+`x","topic":"`+topic+`","content_key":"`+key+`",
		"delay":"30m","notify_url":"`+tg.URL+longPath+`"}`)
	if st != http.StatusCreated || json.Unmarshal([]byte(body), &pending) != nil {
		t.Fatalf("create delayed: %d %s", st, body)
	}
	if st, body := m.api("POST", "/api/v1/delayed", `{"source_app":"shop","topic":"`+topic+`","content_key":"fails-`+key[:200]+`",
		"delay":"1s","notify_url":"`+tg.URL+`/fail","executors":["`+worker+`"]}`); st != http.StatusCreated {
		t.Fatalf("create failing delayed: %d %s", st, body)
	}
	userName := strings.Repeat("username", 8)
	if st, body := m.api("POST", "/api/v1/users", `{"username":"`+userName+`","password":"a-long-password-1","role":"viewer"}`); st != http.StatusCreated {
		t.Fatalf("create user: %d %s", st, body)
	}
	project := strings.Repeat("projectname", 5) + "-project"
	if st, body := m.api("POST", "/api/v1/projects", `{"name":"`+project+`","description":"`+longWord+`"}`); st != http.StatusCreated {
		t.Fatalf("create project: %d %s", st, body)
	}
	if st, body := m.api("POST", "/api/v1/tokens", `{"name":"`+strings.Repeat("tokenname", 7)+`"}`); st != http.StatusCreated {
		t.Logf("create a long-named token: %d %s (tried a shorter one)", st, body)
		if st, body := m.api("POST", "/api/v1/tokens", `{"name":"`+strings.Repeat("token", 12)+`"}`); st != http.StatusCreated {
			t.Fatalf("create token: %d %s", st, body)
		}
	}
	// A workflow of the longest step names, on a schedule (its backfill
	// is started in the browser below), run once.
	stepA, stepB := strings.Repeat("stepname", 8), strings.Repeat("stepname", 7)+"-second"
	var wf struct {
		ID string `json:"id"`
	}
	st, body = m.api("POST", "/api/v1/workflows", `{"title":"`+longWord+`","key":"`+strings.Repeat("wfkey", 19)+`-k","timezone":"Europe/Berlin",
		"schedule":{"kind":"cron","cron":"0 3 * * *"},"params":{"P":"`+longWord+`"},"steps":[{"name":"`+stepA+`","task":"`+ok.ID+`"},
		{"name":"`+stepB+`","task":"`+stopped.ID+`","after":[{"step":"`+stepA+`","on":"failure"}]}]}`)
	if st != http.StatusCreated || json.Unmarshal([]byte(body), &wf) != nil {
		t.Fatalf("create workflow: %d %s", st, body)
	}
	var wfRun struct {
		ID string `json:"id"`
	}
	if st, body := m.api("POST", "/api/v1/workflows/"+wf.ID+"/run", ""); st >= 300 || json.Unmarshal([]byte(body), &wfRun) != nil {
		t.Fatalf("run workflow: %d %s", st, body)
	}
	// A connection of the longest name, with every setting shown.
	var conn struct {
		ID string `json:"id"`
	}
	st, body = m.api("POST", "/api/v1/connections", `{"name":"`+strings.Repeat("connection", 9)+`-c01","kind":"postgres","address":"127.0.0.1:5432",
		"database":"`+strings.Repeat("database", 8)+`","user":"`+strings.Repeat("username", 8)+`","secret":"s3cret-value",
		"tls":{"enabled":true,"server_name":"`+strings.Repeat("servername", 6)+`.example"},"description":"`+longWord+`"}`)
	if st != http.StatusCreated || json.Unmarshal([]byte(body), &conn) != nil {
		t.Fatalf("create connection: %d %s", st, body)
	}
	m.waitRuns(failing.ID, 40*time.Second, "two failed runs", func(r []runJSON) bool { return len(r) >= 2 })
	runs := m.waitRuns(ok.ID, 40*time.Second, "a run", func(r []runJSON) bool { return len(r) >= 1 })

	pages := []string{
		"/dashboard", "/nodes", "/nodes/" + worker, "/nodes/" + manual, "/nodes/new", "/nodes/" + manual + "/edit",
		"/pools", "/pools/pool=" + poolValue,
		"/tasks", "/tasks/" + ok.ID, "/tasks/" + failing.ID, "/tasks/new", "/tasks/" + stopped.ID + "/edit", "/tasks/" + ok.ID + "/clone",
		"/runs", "/runs?task=" + failing.ID, "/runs/" + runs[0].ID,
		"/delayed", "/delayed/" + pending.ID, "/delayed/new",
		"/events", "/projects", "/projects/" + url.PathEscape(project),
		"/users", "/users/" + userName + "/edit", "/settings", "/tokens", "/account",
		"/workflows", "/workflows/new", "/workflows/" + wf.ID, "/workflows/" + wf.ID + "/edit", "/workflow-runs/" + wfRun.ID,
		"/connections", "/connections/new", "/connections/" + conn.ID, "/connections/" + conn.ID + "/edit",
	}
	b := newBrowserWithin(t, chromium, 190*time.Second)
	b.logIn(m, "", "dash-live")
	// A backfill of the last day (the form's default window), started on
	// the workflow's page: its page is walked too.
	b.do("start a backfill", 20*time.Second, chromedp.Navigate(m.URL+"/workflows/"+wf.ID), chromedp.WaitVisible(chromedp.ID("backfill-form")),
		chromedp.Click(chromedp.ID("act-backfill")), chromedp.WaitVisible(chromedp.ID("backfill-state")))
	pages = append(pages, b.wait("the backfill's page", 5*time.Second, "location.pathname", contains("/backfills/")))
	start := time.Now()
	for _, size := range []struct {
		w, h  int64
		phone bool
	}{{1280, 800, false}, {390, 844, true}} {
		if size.phone {
			b.run("phone viewport", 10*time.Second, chromedp.EmulateViewport(size.w, size.h, chromedp.EmulateMobile, chromedp.EmulateTouch))
		} else {
			b.run("desktop viewport", 10*time.Second, chromedp.EmulateViewport(size.w, size.h))
		}
		for _, p := range pages {
			where := p + " at " + strconv.FormatInt(size.w, 10)
			b.run("open "+where, 20*time.Second, chromedp.Navigate(m.URL+p))
			b.wait(where+": loaded", 10*time.Second, `String(document.readyState === "complete" && !!document.querySelector("main") && !!window.htmx)`, equals("true"))
			if sw := b.wait(where+": measured", 5*time.Second, widerThanJS(size.w), nonEmpty); sw != "ok" {
				t.Errorf("%s: scrolls sideways: %s", where, sw)
			}
			ctx, cancel := context.WithTimeout(b.ctx, 30*time.Second)
			out, err := chromedp.Run(ctx, chromedp.Steps(
				chromedp.Evaluate[chromedp.Void](string(axeSrc)),
			))
			_ = out
			if err != nil {
				cancel()
				t.Fatalf("%s: inject axe-core: %v", where, err)
			}
			res, err := chromedp.Run(ctx, chromedp.Evaluate[string](axeRunJS, chromedp.EvalAwaitPromise))
			cancel()
			if err != nil {
				t.Fatalf("%s: run axe-core: %v", where, err)
			}
			var vs []axeViolation
			if err := json.Unmarshal([]byte(res), &vs); err != nil {
				t.Fatalf("%s: axe-core answer %q: %v", where, res, err)
			}
			for _, v := range vs {
				var nodes []string
				for _, n := range v.Nodes {
					nodes = append(nodes, n.HTML)
				}
				msg := where + ": " + v.Impact + " " + v.ID + " (" + v.Help + "): " + strings.Join(nodes, " | ")
				if v.Impact == "minor" {
					t.Log("minor: " + msg)
				} else {
					t.Error(msg)
				}
			}
		}
	}
	t.Logf("checked %d pages at two widths in %s", len(pages), time.Since(start).Round(100*time.Millisecond))
	b.checkConsole()
}
