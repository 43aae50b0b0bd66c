package main

import (
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// TestBrowserChinese switches the console to Chinese on the login page (the
// page stays), signs in and opens the main pages in zh-CN at 1280 and 390
// pixels wide: <html lang> is zh-CN, nothing scrolls sideways, and the
// language switch is on the screen. Switching back to English keeps the page
// and its query.
//
// With SM_SCREENSHOT_ZH_DIR=/some/dir it writes a screenshot of each page
// at each width there.
func TestBrowserChinese(t *testing.T) {
	t.Parallel()
	chromium := findChromium(t)
	m := startMaster(t, "")
	if status, body := m.api("POST", "/api/v1/nodes", `{"name":"zh-manual-node","host":"127.0.0.1:9"}`); status != 201 {
		t.Fatalf("add node: %d %s", status, body)
	}
	task := m.createTask(`{"title":"每日报表 nightly report","type":"http","timezone":"Asia/Shanghai",
		"schedule":{"kind":"cron","cron":"0 30 2 * * *"},"http":{"method":"POST","url":"http://127.0.0.1:9/a/rather/long/path/for/the/nightly/report"},
		"executors":["zh-manual-node"]}`)
	if status, body := m.api("POST", "/api/v1/delayed", `{"source_app":"shop","topic":"order-timeout","content_key":"k42","delay":"30m","notify_url":"http://127.0.0.1:9/cb"}`); status != 201 && status != 200 {
		t.Fatalf("delayed: %d %s", status, body)
	}

	b := newBrowserWithin(t, chromium, 170*time.Second)
	b.do("open the login page", 20*time.Second, chromedp.Navigate(m.URL+"/login?next=%2Ftasks"), chromedp.WaitVisible(chromedp.ID("lang-zh-CN")))
	b.wait("English by default", 5*time.Second, `document.documentElement.lang`, equals("en"))
	b.do("switch to Chinese", 10*time.Second, chromedp.Click(chromedp.ID("lang-zh-CN")))
	b.wait("the login page in Chinese", 10*time.Second, `document.documentElement.lang + " " + document.querySelector("h1").textContent`, equals("zh-CN 登录"))
	b.wait("still the login page, next kept", 5*time.Second, `location.pathname + location.search`, equals("/login?next=%2Ftasks"))
	b.submitLogin("admin", adminPassword, "tasks-table")
	b.wait("the tasks page in Chinese", 10*time.Second, `document.querySelector("h1").textContent`, equals("任务"))

	shots := os.Getenv("SM_SCREENSHOT_ZH_DIR")
	pages := []struct{ name, path, ready string }{
		{"dashboard", "/dashboard", "dash-live"},
		{"nodes", "/nodes", "nodes-table"},
		{"node", "/nodes/zh-manual-node", "node-live"},
		{"tasks", "/tasks", "tasks-table"},
		{"task", "/tasks/" + task.ID, "task-live"},
		{"task-form", "/tasks/new", "task-form"},
		{"runs", "/runs", "run-list-table"},
		{"delayed", "/delayed", "delayed-table"},
		{"delayed-form", "/delayed/new", "delayed-form"},
		{"pools", "/pools", "pool-key-form"},
		{"events", "/events", "events-table"},
		{"projects", "/projects", "projects-table"},
		{"users", "/users", "users-table"},
		{"settings", "/settings", "settings-form"},
		{"tokens", "/tokens", "tokens-table"},
		{"account", "/account", "account-locale-form"},
	}
	for _, w := range []int64{1280, 390} {
		if w == 390 {
			b.run("phone viewport", 10*time.Second, chromedp.EmulateViewport(390, 844, chromedp.EmulateMobile, chromedp.EmulateTouch))
		} else {
			b.run("desktop viewport", 10*time.Second, chromedp.EmulateViewport(1280, 900))
		}
		width := strconv.FormatInt(w, 10)
		for _, pg := range pages {
			b.do("open "+pg.path+" at "+width, 20*time.Second, chromedp.Navigate(m.URL+pg.path), chromedp.WaitVisible(chromedp.ID(pg.ready)))
			b.wait(pg.path+" at "+width+": zh-CN", 5*time.Second, `document.documentElement.lang`, equals("zh-CN"))
			b.wait(pg.path+" at "+width+": no sideways scroll", 5*time.Second, noSidewaysJS, equals("ok"))
			b.wait(pg.path+" at "+width+": the language switch on the screen", 5*time.Second, inViewJS("#lang-switch button"), equals("ok"))
			if shots != "" {
				writeScreenshot(b, filepath.Join(shots, "zh-"+width+"-"+pg.name+".png"), "zh "+width+" "+pg.name)
			}
		}
	}
	// Back to English from a filtered list: the same page, the same query.
	b.do("open the filtered list", 20*time.Second, chromedp.Navigate(m.URL+"/tasks?status=0"), chromedp.WaitVisible(chromedp.ID("tasks-table")))
	b.do("switch to English", 10*time.Second, chromedp.Click(chromedp.ID("lang-en")))
	b.wait("English again", 10*time.Second, `document.documentElement.lang + " " + document.querySelector("h1").textContent`, equals("en Tasks"))
	b.wait("the same page and filter", 5*time.Second, `location.pathname + location.search`, equals("/tasks?status=0"))
	b.checkConsole()
}
