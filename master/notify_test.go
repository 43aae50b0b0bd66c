package master_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/uptrace/bun"

	"github.com/schedulemaster-go/schedulemaster/master"
	"github.com/schedulemaster-go/schedulemaster/protocol"
	"github.com/schedulemaster-go/schedulemaster/store"
	"github.com/schedulemaster-go/schedulemaster/store/storetest"
)

// smtpSink is a minimal SMTP server on loopback that keeps what it receives.
type smtpSink struct {
	ln   net.Listener
	mu   sync.Mutex
	msgs []string
	rcpt []string
}

func newSMTPSink(t *testing.T) *smtpSink {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &smtpSink{ln: ln}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go s.serve(c)
		}
	}()
	return s
}

func (s *smtpSink) serve(c net.Conn) {
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	r := bufio.NewReader(c)
	say := func(line string) { io.WriteString(c, line+"\r\n") }
	say("220 sink ESMTP")
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			return
		}
		cmd := strings.ToUpper(strings.TrimSpace(line))
		switch {
		case strings.HasPrefix(cmd, "EHLO"), strings.HasPrefix(cmd, "HELO"):
			say("250 sink")
		case strings.HasPrefix(cmd, "MAIL FROM"):
			say("250 ok")
		case strings.HasPrefix(cmd, "RCPT TO"):
			s.mu.Lock()
			s.rcpt = append(s.rcpt, strings.TrimSpace(line[len("RCPT TO:"):]))
			s.mu.Unlock()
			say("250 ok")
		case cmd == "DATA":
			say("354 go on")
			var b strings.Builder
			for {
				l, err := r.ReadString('\n')
				if err != nil {
					return
				}
				if l == ".\r\n" {
					break
				}
				b.WriteString(l)
			}
			s.mu.Lock()
			s.msgs = append(s.msgs, b.String())
			s.mu.Unlock()
			say("250 queued")
		case cmd == "QUIT":
			say("221 bye")
			return
		default:
			say("250 ok")
		}
	}
}

func (s *smtpSink) messages() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.msgs...)
}

func TestFailedRunNotifiesKeepersAndWebhook(t *testing.T) {
	t.Parallel()
	e := newEnv(t, storetest.OpenSQLite(t))
	runningWorkers(e, "w1")
	sink := newSMTPSink(t)
	var hook atomic.Pointer[map[string]any]
	recv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body map[string]any
		_ = json.NewDecoder(r.Body).Decode(&body)
		hook.Store(&body)
	}))
	defer recv.Close()

	if err := store.CreateUser(e.ctx, e.s.Store.DB, &store.User{Username: "ops", PasswordHash: "x", Role: store.RoleAdmin, Email: "ops@example.com"}); err != nil {
		t.Fatal(err)
	}
	_, port, _ := net.SplitHostPort(sink.ln.Addr().String())
	p, _ := strconv.Atoi(port)
	s, _ := e.m.Settings()
	s.SMTPHost, s.SMTPPort, s.SMTPFrom, s.SMTPTLS = "127.0.0.1", p, "scheduler@example.com", "none"
	s.WebhookURL, s.PublicURL = recv.URL+"/hook", "http://console.example"
	if err := e.m.UpdateSettings(e.ctx, s); err != nil {
		t.Fatal(err)
	}
	in := httpInput("w1")
	in.Keepers, in.Retries = []string{"ops"}, 1
	tk, err := e.m.Tasks().Create(e.ctx, in, "admin")
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC()
	run := func(id string, attempt int) protocol.RunReport {
		return protocol.RunReport{ID: id, TaskID: tk.ID, Node: "w1", ScheduledAt: now, StartedAt: now, EndedAt: now,
			Result: "failed", Attempt: attempt, HTTPStatus: 500, Output: "boom: database unavailable"}
	}
	// The first attempt fails with a retry to come: no notification for it.
	if _, err := e.m.Runs().Ingest(e.ctx, e.node("w1"), []protocol.RunReport{run("n1", 1)}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.m.Runs().Ingest(e.ctx, e.node("w1"), []protocol.RunReport{run("n2", 2)}); err != nil {
		t.Fatal(err)
	}
	storetest.Eventually(t, 10*time.Second, func() bool { return len(sink.messages()) == 1 && hook.Load() != nil }, "e-mail and webhook after the final failed attempt")
	// Had the first attempt been notified, its message would have come first.
	msg := sink.messages()[0]
	for _, want := range []string{"(attempt 2)", "Subject: [ScheduleMaster] failed: ping on w1", "boom: database unavailable", "http://console.example/runs/n2", "To: ops@example.com"} {
		if !strings.Contains(msg, want) {
			t.Errorf("e-mail lacks %q:\n%s", want, msg)
		}
	}
	body := *hook.Load()
	if body["event"] != "run.failed" || !strings.Contains(body["output_excerpt"].(string), "boom") || body["link"] != "http://console.example/runs/n2" {
		t.Fatalf("webhook body %v", body)
	}
}

func TestNotificationTestReportsReadableErrors(t *testing.T) {
	t.Parallel()
	e := newEnv(t, storetest.OpenSQLite(t))
	s, _ := e.m.Settings()
	s.SMTPHost, s.SMTPPort, s.SMTPFrom, s.SMTPTLS = "127.0.0.1", 1, "a@example.com", "none"
	s.WebhookURL = "http://127.0.0.1:1/hook"
	if err := e.m.UpdateSettings(e.ctx, s); err != nil {
		t.Fatal(err)
	}
	res := e.m.TestNotifications(e.ctx, "me@example.com")
	if len(res) != 2 {
		t.Fatalf("results %+v", res)
	}
	for _, r := range res {
		if r.OK || !strings.Contains(r.Message, "127.0.0.1:1") {
			t.Errorf("%s: %+v, want a readable failure naming the address", r.Channel, r)
		}
	}
	// Bad settings are refused whole and change nothing.
	bad := s
	bad.SMTPTLS, bad.WebhookURL, bad.HealthInterval = "ssl", "not a url", time.Millisecond
	err := e.m.UpdateSettings(e.ctx, bad)
	for _, f := range []string{"smtp_tls", "webhook_url", "health_interval"} {
		if !isFieldErrors(err, f) {
			t.Errorf("want a field error on %s, got %v", f, err)
		}
	}
	if got, _ := e.m.Settings(); got.WebhookURL != s.WebhookURL {
		t.Fatal("refused settings were applied")
	}
}

func TestSettingsChangeProbeCadenceLive(t *testing.T) {
	t.Parallel()
	e := newEnv(t, storetest.OpenSQLite(t), func(c *master.Config) { c.Health.Interval = time.Hour })
	tw := startWorker(t, "cad")
	e.create(tw)
	e.connect("cad")
	var probes atomic.Int64
	router := tw.Router()
	tw.Serve(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/health" {
			probes.Add(1)
		}
		router.ServeHTTP(w, r)
	}))
	if err := e.m.Start(e.ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.m.Stop(context.Background()) })
	storetest.Eventually(t, 5*time.Second, func() bool { return probes.Load() >= 1 }, "the first sweep")
	before := probes.Load()
	s, _ := e.m.Settings()
	s.HealthInterval, s.HealthTimeout = time.Second, 500*time.Millisecond
	if err := e.m.UpdateSettings(e.ctx, s); err != nil {
		t.Fatal(err)
	}
	storetest.Eventually(t, 6*time.Second, func() bool { return probes.Load() >= before+3 }, "probes every second after the change")
	if v, err := store.GetSetting(e.ctx, e.s.Store.DB, store.SettingHealthInterval); err != nil || v != "1s" {
		t.Fatalf("stored interval %q %v", v, err)
	}
}

func TestPurgeRunsInBatches(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, s storetest.NamedStore) {
		e := newEnv(t, s)
		old, recent := time.Now().AddDate(0, 0, -40).UTC(), time.Now().UTC()
		var rows []store.Run
		for i := 0; i < 2500; i++ {
			at := old
			if i%10 == 0 {
				at = recent
			}
			rows = append(rows, store.Run{ID: "r" + strconv.Itoa(i), TaskID: "t", Node: "w", ScheduledAt: at, StartedAt: at, EndedAt: at, Result: "success", Attempt: 1})
		}
		err := e.s.Store.DB.RunInTx(e.ctx, nil, func(ctx context.Context, tx bun.Tx) error {
			for i := 0; i < len(rows); i += 500 {
				if _, err := store.InsertRuns(ctx, tx, rows[i:i+500]); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		n, err := e.m.Runs().Purge(e.ctx, time.Now().AddDate(0, 0, -30))
		if err != nil || n != 2250 {
			t.Fatalf("purged %d (%v), want 2250", n, err)
		}
		if _, total, _ := store.ListRuns(e.ctx, e.s.Store.DB, "t", 1, 0); total != 250 {
			t.Fatalf("%d runs left, want the 250 recent ones", total)
		}
	})
}

// TestProjectWebhookHearsItsFailures: a project's own webhook receives the
// failures of its tasks (named with the project), besides the cluster's;
// another project's failure does not reach it.
func TestProjectWebhookHearsItsFailures(t *testing.T) {
	t.Parallel()
	e := newEnv(t, storetest.OpenSQLite(t))
	runningWorkers(e, "w1")
	got := make(chan map[string]any, 4)
	recv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body map[string]any
		_ = json.NewDecoder(r.Body).Decode(&body)
		got <- body
	}))
	defer recv.Close()
	// A project's webhook may not reach loopback (the receiver here) until
	// a cluster admin allows the host.
	if _, err := e.m.Projects().Create(e.ctx, master.ProjectInput{Name: "billing", Pools: []string{"*"}, WebhookURL: recv.URL + "/billing"}); !isFieldErrors(err, "webhook_url") {
		t.Fatalf("a project webhook on loopback: %v, want refused", err)
	}
	for _, inside := range []string{"http://localhost:9/x", "http://169.254.169.254/latest/meta-data", "http://[::1]:9/", "http://0.0.0.0:9/", "http://[fe80::1]/"} {
		if _, err := e.m.Projects().Create(e.ctx, master.ProjectInput{Name: "inside", WebhookURL: inside}); !isFieldErrors(err, "webhook_url") {
			t.Fatalf("a project webhook %s: %v, want refused", inside, err)
		}
	}
	set, _ := e.m.Settings()
	set.WebhookAllowHosts = "127.0.0.1"
	if err := e.m.UpdateSettings(e.ctx, set); err != nil {
		t.Fatal(err)
	}
	if _, err := e.m.Projects().Create(e.ctx, master.ProjectInput{Name: "billing", Pools: []string{"*"}, WebhookURL: recv.URL + "/billing"}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.m.Projects().Create(e.ctx, master.ProjectInput{Name: "bad", WebhookURL: "ftp://x"}); !isFieldErrors(err, "webhook_url") {
		t.Fatalf("a project webhook that is not http(s): %v", err)
	}
	if _, err := e.m.Projects().Create(e.ctx, master.ProjectInput{Name: "bad", WebhookURL: "http://x/" + strings.Repeat("a", 3000)}); !isFieldErrors(err, "webhook_url") {
		t.Fatalf("a 3,000-byte project webhook: %v, want a field error (the column holds 2,048)", err)
	}
	var pools []string
	for i := range 30 {
		var vs []string
		for j := range 5 {
			vs = append(vs, fmt.Sprintf("%s-%02d-%d", strings.Repeat("p", 55), i, j))
		}
		pools = append(pools, "pool in ("+strings.Join(vs, ",")+")")
	}
	if _, err := e.m.Projects().Create(e.ctx, master.ProjectInput{Name: "bad", Pools: pools}); !isFieldErrors(err, "pools") {
		t.Fatalf("pools longer than their column: %v, want a field error", err)
	}
	now := time.Now().UTC()
	fail := func(project, id string) {
		in := httpInput("w1")
		in.Project = project
		tk, err := e.m.Tasks().Create(e.ctx, in, "admin")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := e.m.Runs().Ingest(e.ctx, e.node("w1"), []protocol.RunReport{{ID: id, TaskID: tk.ID, Node: "w1", ScheduledAt: now, StartedAt: now, EndedAt: now,
			Result: "failed", Attempt: 1, HTTPStatus: 500, Output: "boom"}}); err != nil {
			t.Fatal(err)
		}
	}
	fail("", "run-default")
	fail("billing", "run-billing")
	select {
	case body := <-got:
		task, _ := body["task"].(map[string]any)
		run, _ := body["run"].(map[string]any)
		if task["project"] != "billing" || run["id"] != "run-billing" {
			t.Fatalf("project webhook got %v", body)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the project's webhook heard nothing of its failed run")
	}
	select {
	case body := <-got:
		t.Fatalf("the project's webhook heard another project's failure too: %v", body)
	case <-time.After(500 * time.Millisecond): // the default project's failure went nowhere
	}
}

// TestHardening3ProjectWebhooksAreGuardedAndFair: a project's webhook that
// was allowed at save time is still refused at send time once the host is
// no longer allowed (checked after DNS, on the connection); and a project
// whose webhook hangs delays no other project's notice: the other's arrives
// while every call to the hung one is still waiting, none timed out.
func TestHardening3ProjectWebhooksAreGuardedAndFair(t *testing.T) {
	t.Parallel()
	e := newEnv(t, storetest.OpenSQLite(t))
	runningWorkers(e, "w1")
	set, _ := e.m.Settings()
	set.WebhookAllowHosts = "127.0.0.1"
	if err := e.m.UpdateSettings(e.ctx, set); err != nil {
		t.Fatal(err)
	}
	release := make(chan struct{})
	var hungCalls, hungGaveUp atomic.Int64
	hung := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hungCalls.Add(1)
		select {
		case <-release:
		case <-r.Context().Done():
			hungGaveUp.Add(1)
		}
	}))
	defer hung.Close()
	defer close(release)
	got := make(chan string, 16)
	fine := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body map[string]any
		_ = json.NewDecoder(r.Body).Decode(&body)
		run, _ := body["run"].(map[string]any)
		id, _ := run["id"].(string)
		got <- id
	}))
	defer fine.Close()
	for name, url := range map[string]string{"hung": hung.URL, "fine": fine.URL} {
		if _, err := e.m.Projects().Create(e.ctx, master.ProjectInput{Name: name, Pools: []string{"*"}, WebhookURL: url}); err != nil {
			t.Fatal(err)
		}
	}
	now := time.Now().UTC()
	fail := func(project, id string) {
		in := httpInput("w1")
		in.Project, in.Title = project, id
		tk, err := e.m.Tasks().Create(e.ctx, in, "admin")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := e.m.Runs().Ingest(e.ctx, e.node("w1"), []protocol.RunReport{{ID: id, TaskID: tk.ID, Node: "w1", ScheduledAt: now, StartedAt: now, EndedAt: now,
			Result: "failed", Attempt: 1, HTTPStatus: 500, Output: "boom"}}); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 12 {
		fail("hung", fmt.Sprintf("run-hung-%02d", i))
	}
	storetest.Eventually(t, 30*time.Second, func() bool { return hungCalls.Load() >= 1 }, "the hung webhook was never called")
	fail("fine", "run-fine-1")
	select {
	case id := <-got:
		if id != "run-fine-1" || hungGaveUp.Load() != 0 {
			t.Fatalf("the fine project heard %q after %d hung calls gave up; want its own run while all still wait", id, hungGaveUp.Load())
		}
	case <-time.After(60 * time.Second):
		t.Fatal("the fine project's notice never came")
	}
	// The allow list is withdrawn: the stored URL is refused on connect.
	set.WebhookAllowHosts = ""
	if err := e.m.UpdateSettings(e.ctx, set); err != nil {
		t.Fatal(err)
	}
	fail("fine", "run-fine-2")
	storetest.Eventually(t, 30*time.Second, func() bool { return e.m.NotificationsRefused() >= 1 }, "the send to a loopback webhook was never refused")
	select {
	case id := <-got:
		t.Fatalf("a loopback webhook no longer allowed received %q", id)
	default:
	}
}
