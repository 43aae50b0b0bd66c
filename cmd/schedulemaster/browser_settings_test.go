package main

import (
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// TestBrowserSettingsHealthInterval changes the health interval on the
// settings page of a master started without health flags, and checks that
// the master probes a worker faster at once, without a restart.
func TestBrowserSettingsHealthInterval(t *testing.T) {
	t.Parallel()
	chromium := findChromium(t)

	m := startMasterAs(t, "") // no health flag: the settings page governs the health checker
	// A real manual worker behind a proxy that counts the master's probes.
	_, workerHost := startWorker(t, m, "pw1", "--autor=false", "--workerof", "master")
	probes := newProbeCounter(t, workerHost)
	if status, body := m.api("POST", "/api/v1/nodes", `{"name":"pw1","host":"`+probes.host+`"}`); status != http.StatusCreated {
		t.Fatalf("create node pw1: %d %s", status, body)
	}
	if status, body := m.api("POST", "/api/v1/nodes/pw1/connect", ""); status != http.StatusOK {
		t.Fatalf("connect pw1: %d %s", status, body)
	}
	if status, body := m.api("POST", "/api/v1/nodes/pw1/enable", ""); status != http.StatusOK {
		t.Fatalf("enable pw1: %d %s", status, body)
	}
	m.waitNode("pw1", 10*time.Second, "running", func(n *nodeJSON) bool { return n.Status == 2 })

	// At the default 10s interval a 5s window holds at most one probe.
	const window = 5 * time.Second
	before := time.Now()
	for time.Since(before) < window {
		if n := probes.since(before); n > 1 {
			t.Fatalf("%d probes within %s at the default 10s interval, want at most 1", n, time.Since(before).Round(time.Millisecond))
		}
		time.Sleep(100 * time.Millisecond)
	}
	nBefore := probes.since(before)
	t.Logf("probes in %s before the change (%s): %d", window, before.Format("15:04:05.000"), nBefore)

	b := newBrowser(t, chromium)
	b.logIn(m, "", "dash-live")
	b.do("open the settings page from the nav", 20*time.Second,
		chromedp.Click(chromedp.CSS(`nav a[href="/settings"]`)),
		chromedp.WaitVisible(chromedp.ID("settings-form")),
	)
	b.wait("settings nav entry active", 5*time.Second, textJS("nav a.active"), equals("Settings"))
	b.wait("default interval in the form", 5*time.Second, `document.getElementById("health_interval").value`, equals("10s"))
	b.wait("no pinned note without health flags", 5*time.Second, existsJS(".pinned-note"), equals("false"))

	// A bad value first: refused inline, nothing changes.
	b.do("type a bad interval and save", 20*time.Second,
		chromedp.Evaluate[chromedp.Void](`document.getElementById("health_interval").value = ""`),
		sendKeys(chromedp.ID("health_interval"), "fast"),
		chromedp.Click(chromedp.ID("save-settings")),
		chromedp.WaitVisible(chromedp.ID("error-health_interval")),
	)
	b.wait("inline interval error", 5*time.Second, textJS("#error-health_interval"), contains("Go duration"))
	b.wait("bad value kept", 5*time.Second, `document.getElementById("health_interval").value`, equals("fast"))

	// The default 3s probe timeout must be shorter than the interval: lower it too.
	b.do("set the interval to 1s, the probe timeout to 500ms, and save", 20*time.Second,
		chromedp.Evaluate[chromedp.Void](`document.getElementById("health_interval").value = ""`),
		sendKeys(chromedp.ID("health_interval"), "1s"),
		chromedp.Evaluate[chromedp.Void](`document.getElementById("health_timeout").value = ""`),
		sendKeys(chromedp.ID("health_timeout"), "500ms"),
		chromedp.Click(chromedp.ID("save-settings")),
		chromedp.WaitVisible(chromedp.CSS("#flash .flash-ok")),
	)
	saved := time.Now()
	b.wait("saved flash", 5*time.Second, textJS("#flash .flash-ok"), contains("Settings saved"))
	b.wait("location after save", 5*time.Second, `location.pathname`, equals("/settings"))
	b.wait("new interval shown", 5*time.Second, `document.getElementById("health_interval").value`, equals("1s"))
	b.wait("new probe timeout shown", 5*time.Second, `document.getElementById("health_timeout").value`, equals("500ms"))
	b.wait("no inline errors", 5*time.Second, existsJS(".field-error"), equals("false"))

	// At 1s the same 5s window holds at least three probes.
	var nAfter int
	for {
		nAfter = probes.since(saved)
		if nAfter >= 3 {
			break
		}
		if time.Since(saved) > window {
			t.Fatalf("%d probes within %s of saving a 1s interval, want at least 3 (probes: %v)", nAfter, window, probes.list())
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Logf("probes %s after the change: %d (before: %d in %s); all probes: %v", time.Since(saved).Round(time.Millisecond), nAfter, nBefore, window, probes.list())
	if n := m.node("pw1"); n == nil || n.Status != 2 {
		t.Fatalf("pw1 after the change: %+v, want running", n)
	}

	// The test button answers in place, readably, with nothing set up.
	b.do("press the test button", 20*time.Second, chromedp.Click(chromedp.ID("test-notifications")))
	b.wait("webhook test result", 20*time.Second, textJS(`#notify-results [data-channel="webhook"]`), contains("no webhook URL is set"))
	b.wait("email test result", 5*time.Second, textJS(`#notify-results [data-channel="email"]`), contains("SMTP is not set up"))
	b.wait("still on the settings page", 5*time.Second, `location.pathname`, equals("/settings"))
	if path := os.Getenv("SM_SETTINGS_SCREENSHOT"); path != "" {
		b.screenshot(path)
	}
	b.checkConsole()
}

// probeCounter is a reverse proxy in front of a worker that records the
// master's health probes (GET /health).
type probeCounter struct {
	host string
	mu   sync.Mutex
	hits []time.Time
}

func newProbeCounter(t *testing.T, workerHost string) *probeCounter {
	t.Helper()
	u, err := url.Parse("http://" + workerHost)
	if err != nil {
		t.Fatal(err)
	}
	pc := &probeCounter{}
	rp := httputil.NewSingleHostReverseProxy(u)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet && r.URL.Path == "/health" {
			pc.mu.Lock()
			pc.hits = append(pc.hits, time.Now())
			pc.mu.Unlock()
		}
		rp.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	pc.host = strings.TrimPrefix(srv.URL, "http://")
	return pc
}

// since counts the probes at or after t.
func (pc *probeCounter) since(t time.Time) int {
	pc.mu.Lock()
	defer pc.mu.Unlock()
	n := 0
	for _, h := range pc.hits {
		if !h.Before(t) {
			n++
		}
	}
	return n
}

func (pc *probeCounter) list() []string {
	pc.mu.Lock()
	defer pc.mu.Unlock()
	out := make([]string, len(pc.hits))
	for i, h := range pc.hits {
		out[i] = h.Format("15:04:05.000")
	}
	return out
}
