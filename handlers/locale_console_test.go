package handlers_test

import (
	"context"
	"html"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/schedulemaster-go/schedulemaster/locale"
	"github.com/schedulemaster-go/schedulemaster/master"
	"github.com/schedulemaster-go/schedulemaster/protocol"
	"github.com/schedulemaster-go/schedulemaster/store/storetest"
)

// zhAllowed are the English words a Chinese page may show: names, code,
// protocols and values the glossary keeps in English.
var zhAllowed = map[string]bool{}

func init() {
	for _, w := range strings.Fields(`ScheduleMaster HTTP HTTPS URL API JSON ID IDs cron UTC IANA Go SMTP TLS
		LDAP OIDC Webhook webhook http https shell GET POST PUT PATCH DELETE HEAD OPTIONS Content Type
		ms s m h KiB MiB p50 p95 max exit KEY value key Name Authorization Cookie Proxy X Api Key Token
		allow skip queue weighted round robin failover least busy hash broadcast run once run_once round_robin least_busy
		interval starttls tls none default admin viewer operator editor owner application json www form urlencoded x
		UUID IP PORT NAME pool billing zone eu gpu true selector labels allow shell Asia Shanghai Europe Berlin
		env config sm lang commit built with go devel unknown dev English in xx
		nats amqp mqtt redis kafka sql grpc postgres mysql NATS RabbitMQ AMQP MQTT Redis Kafka PostgreSQL MySQL MariaDB
		SQL gRPC JetStream QoS PUBLISH XADD LPUSH CA PEM`) {
		zhAllowed[strings.ToLower(w)] = true
	}
}

var (
	reScript  = regexp.MustCompile(`(?is)<(script|style|pre|code|title|datalist)[^>]*>.*?</(script|style|pre|code|title|datalist)>`)
	reMono    = regexp.MustCompile(`(?is)<(td|span|dd|a|div|input|textarea|small|h1|h2)[^>]*class="[^"]*\b(mono|cmd|schedule-expr|output|who|event-detail)\b[^"]*"[^>]*>.*?</(td|span|dd|a|div|input|textarea|small|h1|h2)>`)
	reTag     = regexp.MustCompile(`(?s)<[^>]*>`)
	reWord    = regexp.MustCompile(`[A-Za-z][A-Za-z']+`)
	reEntity  = regexp.MustCompile(`&[a-z#0-9]+;`)
	reTitle   = regexp.MustCompile(`(?s)<title>(.*?)</title>`)
	reVisAttr = regexp.MustCompile(`\s(?:title|aria-label|hx-confirm|data-label)="([^"]*)"`)
)

// englishWords returns the English words a page shows a reader (its text
// and its readable attributes: titles, labels, confirmations; placeholders
// are examples of input, code),
// leaving out code, the names in names and the allowed tokens.
func englishWords(page string, names []string) []string {
	var attrs []string
	for _, m := range reVisAttr.FindAllStringSubmatch(page, -1) {
		attrs = append(attrs, m[1])
	}
	text := reScript.ReplaceAllString(page, " ")
	text = reMono.ReplaceAllString(text, " ")
	text = reTag.ReplaceAllString(text, " ") + " " + strings.Join(attrs, " ")
	text = reEntity.ReplaceAllString(text, " ")
	for _, n := range names {
		text = strings.ReplaceAll(text, n, " ")
	}
	var out []string
	for _, w := range reWord.FindAllString(text, -1) {
		if !zhAllowed[strings.ToLower(w)] {
			out = append(out, w)
		}
	}
	return out
}

// A reader who chose Chinese (the switch's cookie) reads every page of the
// console, and the fragments they poll, without an English sentence: only
// names, code and the allowed tokens stay. English stays the default.
func TestConsolePagesSpeakChineseWhenChosen(t *testing.T) {
	e := newEnv(t, storetest.OpenSQLite(t))
	admin := e.login("admin", "admin-password-1")
	u, _ := url.Parse(e.srv.URL)
	admin.Jar.SetCookies(u, []*http.Cookie{{Name: locale.CookieName, Value: locale.ZH, Path: "/"}})

	if st, body := e.do(admin, "POST", "/api/v1/nodes", `{"name":"w1","host":"127.0.0.1:1","protocol":"http"}`, nil); st != http.StatusCreated {
		t.Fatalf("node: %d %s", st, body)
	}
	st, body := e.do(admin, "POST", "/api/v1/tasks", `{"title":"nightly-backup","type":"http","schedule":{"kind":"cron","cron":"0 * * * *"},"http":{"method":"GET","url":"http://127.0.0.1:1/"},"executors":["w1"]}`, nil)
	if st != http.StatusCreated {
		t.Fatalf("task: %d %s", st, body)
	}
	taskID := decode[struct {
		ID string `json:"id"`
	}](t, body).ID
	st, body = e.do(admin, "POST", "/api/v1/delayed", `{"source_app":"shop","topic":"order-timeout","content_key":"k42","delay":"30m","notify_url":"http://127.0.0.1:1/cb"}`, nil)
	if st != http.StatusCreated && st != http.StatusOK {
		t.Fatalf("delayed: %d %s", st, body)
	}
	delayedID := decode[struct {
		ID string `json:"id"`
	}](t, body).ID
	if st, body := e.do(admin, "POST", "/api/v1/tokens", `{"name":"ci-token"}`, nil); st != http.StatusCreated {
		t.Fatalf("token: %d %s", st, body)
	}

	st, body = e.do(admin, "POST", "/api/v1/workflows", `{"title":"nightly-etl","schedule":{"kind":"cron","cron":"0 3 * * *"},"timezone":"Europe/Berlin","steps":[{"name":"backup","task":"`+taskID+`"}]}`, nil)
	if st != http.StatusCreated {
		t.Fatalf("workflow: %d %s", st, body)
	}
	workflowID := decode[struct {
		ID string `json:"id"`
	}](t, body).ID
	st, body = e.do(admin, "POST", "/api/v1/workflows/"+workflowID+"/run", "", nil)
	if st >= 300 {
		t.Fatalf("workflow run: %d %s", st, body)
	}
	workflowRunID := decode[struct {
		ID string `json:"id"`
	}](t, body).ID
	b, err := e.m.Workflows().BackfillWorkflow(context.Background(), workflowID, master.BackfillInput{From: time.Now().Add(-72 * time.Hour), To: time.Now().Add(-time.Minute)})
	if err != nil {
		t.Fatal(err)
	}

	st, body = e.do(admin, "POST", "/api/v1/connections", `{"name":"bus","kind":"nats","address":"127.0.0.1:4222","user":"svc","secret":"s3cret-value","tls":{"enabled":true}}`, nil)
	if st != http.StatusCreated {
		t.Fatalf("connection: %d %s", st, body)
	}
	connID := decode[struct {
		ID string `json:"id"`
	}](t, body).ID
	st, body = e.do(admin, "POST", "/api/v1/tasks", `{"title":"publish-orders","type":"nats","schedule":{"kind":"cron","cron":"0 * * * *"},"nats":{"connection":"bus","subject":"orders.created","payload":"{}","headers":{"X-Id":"1"}},"executors":["w1"]}`, nil)
	if st != http.StatusCreated {
		t.Fatalf("nats task: %d %s", st, body)
	}
	natsID := decode[struct {
		ID string `json:"id"`
	}](t, body).ID

	// What the engine does for itself is done by "system", "scheduler" and
	// "workflow <id>" (the actors of its events).
	names := []string{"/no-such-page", "nightly-etl", "workflow " + workflowID, workflowID, workflowRunID, b.ID, "system", "scheduler", "health-checker", "Everything created before projects, and what names no project.", "nightly-backup", "w1", "master", "admin", "shop", "order-timeout", "k42", "ci-token", taskID, delayedID, "default", "backup", "publish-orders", "bus", natsID, connID}
	pages := []string{"/dashboard", "/dashboard/live", "/nodes", "/nodes/rows", "/nodes/new", "/nodes/w1", "/nodes/w1/live", "/nodes/w1/edit",
		"/pools", "/pools/pool=billing", "/tasks", "/tasks/rows", "/tasks/new", "/tasks/" + taskID, "/tasks/" + taskID + "/edit",
		"/tasks/" + taskID + "/clone", "/tasks/" + taskID + "/runs", "/runs", "/runs/live", "/delayed", "/delayed/rows", "/delayed/new",
		"/delayed/" + delayedID, "/delayed/" + delayedID + "/live", "/events", "/projects", "/projects/default", "/users",
		"/users/admin/edit", "/account", "/settings", "/tokens", "/schedules/preview?schedule_kind=cron&schedule_cron=0+*+*+*+*",
		"/selectors/preview?selector=pool%3Dbilling", "/no-such-page", "/workflows", "/workflows/new", "/workflows/" + workflowID,
		"/workflows/" + workflowID + "/edit", "/workflow-runs/" + workflowRunID, "/workflow-runs/" + workflowRunID + "/live",
		"/backfills/" + b.ID, "/backfills/" + b.ID + "/live",
		"/connections", "/connections/new", "/connections/" + connID, "/connections/" + connID + "/edit",
		"/tasks/" + natsID, "/tasks/" + natsID + "/edit", "/tasks/type-runners?type=nats", "/tasks/type-runners?type=shell"}
	for _, typ := range protocol.GatedTypes() {
		pages = append(pages, "/tasks/type-fields?type="+typ)
	}
	for _, p := range pages {
		st, page := e.do(admin, "GET", p, "", map[string]string{"HX-Request": hxFor(p)})
		if st >= 500 {
			t.Errorf("GET %s: %d", p, st)
			continue
		}
		if bad := englishWords(page, names); len(bad) > 0 {
			t.Errorf("GET %s in zh-CN shows English: %q", p, uniq(bad))
		}
		// The page's title is left out above with the code; it is read too
		// (the tab, the history, a screen reader's first words).
		if m := reTitle.FindStringSubmatch(page); m != nil {
			if bad := englishWords(html.UnescapeString(m[1]), names); len(bad) > 0 {
				t.Errorf("GET %s in zh-CN has an English title %q: %q", p, m[1], uniq(bad))
			}
		}
		if strings.Contains(page, "<html") && !strings.Contains(page, `<html lang="zh-CN">`) {
			t.Errorf("GET %s: <html lang> is not zh-CN", p)
		}
	}

	// The login page, for a stranger whose browser asks for Chinese.
	_, page := e.do(e.client(), "GET", "/login", "", map[string]string{"Accept-Language": "zh-CN,zh;q=0.9,en;q=0.5"})
	if bad := englishWords(page, nil); len(bad) > 0 || !strings.Contains(page, `<html lang="zh-CN">`) {
		t.Errorf("login page in zh-CN: lang %v, English %q", strings.Contains(page, `lang="zh-CN"`), bad)
	}
	// Without a choice the console speaks English.
	_, page = e.do(e.client(), "GET", "/login", "", nil)
	if !strings.Contains(page, `<html lang="en">`) || !strings.Contains(page, ">Log in</h1>") {
		t.Error("the default login page is not English")
	}
}

// hxFor marks the live fragments as htmx requests, as the console sends them.
func hxFor(p string) string {
	for _, s := range []string{"/rows", "/live", "/runs?", "/preview"} {
		if strings.Contains(p, s) || strings.HasSuffix(p, "/runs") && strings.HasPrefix(p, "/tasks/") {
			return "true"
		}
	}
	return ""
}

func uniq(ws []string) []string {
	seen := map[string]bool{}
	var out []string
	for _, w := range ws {
		if !seen[w] {
			seen[w] = true
			out = append(out, w)
		}
	}
	return out
}

// The user's choice on the account page wins over the switch's cookie and
// the browser; the switch returns to the page it was pressed on, and keeps
// a signed-in user's choice in step; a choice outside en and zh-CN is a
// field error that changes nothing.
func TestLanguageChoiceOrderAndSwitch(t *testing.T) {
	e := newEnv(t, storetest.OpenSQLite(t))
	admin := e.login("admin", "admin-password-1")
	zhBrowser := map[string]string{"Accept-Language": "zh-CN"}
	if _, page := e.do(admin, "GET", "/nodes", "", zhBrowser); !strings.Contains(page, `<html lang="zh-CN">`) {
		t.Fatal("Accept-Language zh-CN does not give a Chinese page")
	}
	// The switch: back to the page, cookie set.
	resp := e.postForm(admin, "/language", url.Values{"lang": {"en"}, "back": {"/nodes?offset=0"}})
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/nodes?offset=0" {
		t.Fatalf("switch: %d to %q", resp.StatusCode, resp.Header.Get("Location"))
	}
	if _, page := e.do(admin, "GET", "/nodes", "", zhBrowser); !strings.Contains(page, `<html lang="en">`) {
		t.Fatal("the switch's cookie does not win over Accept-Language")
	}
	// A foreign back address goes to the dashboard.
	resp = e.postForm(admin, "/language", url.Values{"lang": {"zh-CN"}, "back": {"//evil.example/x"}})
	if resp.Header.Get("Location") != "/dashboard" {
		t.Fatalf("switch to a foreign page: %q", resp.Header.Get("Location"))
	}
	// The account's choice wins over the cookie (now zh-CN).
	resp = e.postForm(admin, "/account/locale", url.Values{"locale": {"en"}})
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("save locale: %d", resp.StatusCode)
	}
	if _, page := e.do(admin, "GET", "/account", "", zhBrowser); !strings.Contains(page, `<html lang="en">`) || !strings.Contains(page, `<option value="en" lang="en" selected>`) {
		t.Fatal("the account's language does not win over the cookie and the browser")
	}
	// Pressing the switch keeps the account's choice in step.
	e.postForm(admin, "/language", url.Values{"lang": {"zh-CN"}, "back": {"/account"}})
	if _, page := e.do(admin, "GET", "/account", "", nil); !strings.Contains(page, `<html lang="zh-CN">`) {
		t.Fatal("the switch does not change the language of a user who chose one")
	}
	// Hostile input: refused, nothing changes.
	resp = e.postForm(admin, "/account/locale", url.Values{"locale": {"fr"}})
	if resp.StatusCode != http.StatusUnprocessableEntity {
		t.Fatalf("locale fr: %d", resp.StatusCode)
	}
	if u, err := e.m.Accounts().GetUser(t.Context(), "admin"); err != nil || u.Locale != locale.ZH {
		t.Fatalf("after a refused choice the user's locale is %q (%v)", u.Locale, err)
	}
}
