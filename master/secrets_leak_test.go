package master_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/schedulemaster-go/schedulemaster/master"
	"github.com/schedulemaster-go/schedulemaster/protocol"
	"github.com/schedulemaster-go/schedulemaster/store"
	"github.com/schedulemaster-go/schedulemaster/store/storetest"
)

// TestIngestScrubsSecretValuesOfTheTask: a worker that does not mask (an
// older or hostile one) reports a run quoting its task's secrets, raw and
// URL-escaped: the master stores the mask, on SQLite and MariaDB.
func TestIngestScrubsSecretValuesOfTheTask(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, s storetest.NamedStore) {
		e := newEnv(t, s)
		w1 := e.fakeNode("w1")
		spec, _ := json.Marshal(protocol.TaskDef{ID: "sec", Title: "sec", Type: protocol.TaskHTTP,
			Schedule: protocol.Schedule{Kind: protocol.ScheduleInterval, Every: protocol.Duration(time.Hour)},
			Params:   map[string]string{"TOKEN": "param secret/1", "PLAIN": "plain-value"}, SecretParams: []string{"TOKEN"},
			HTTP: &protocol.HTTPSpec{Method: "GET", URL: "http://bob:url-pw-2@127.0.0.1:1/",
				Headers: map[string]string{"X-Api-Key": "key-value-3", "X-Mine": "mine-value-4"}, SecretHeaders: []string{"X-Mine"}},
			Timeout: protocol.Duration(time.Second)})
		tk := &store.Task{ID: "sec", Title: "sec", Type: "http", Status: store.TaskRunning, Keepers: "[]", Children: "[]",
			Spec: string(spec), Executors: []string{"w1"}}
		if err := store.CreateTask(e.ctx, e.s.Store.DB, tk); err != nil {
			t.Fatal(err)
		}
		r := report("leaky", "sec", "w1", time.Now().UTC())
		r.Result, r.HTTPStatus = protocol.ResultFailed, 500
		r.Output = "echo: param secret/1 " + url.QueryEscape("param secret/1") + " url-pw-2 key-value-3 mine-value-4 plain-value"
		if resp, err := e.m.Runs().Ingest(e.ctx, w1, []protocol.RunReport{r}); err != nil || resp.Accepted != 1 {
			t.Fatalf("ingest: %+v %v", resp, err)
		}
		got := e.stored("leaky").Output
		for _, secret := range []string{"param secret/1", "param+secret%2F1", "url-pw-2", "key-value-3", "mine-value-4"} {
			if strings.Contains(got, secret) {
				t.Fatalf("stored output %q holds %q", got, secret)
			}
		}
		if want := "echo: " + strings.Repeat(protocol.SecretMask+" ", 5) + "plain-value"; got != want {
			t.Fatalf("stored output %q, want %q", got, want)
		}
	})
}

// TestMasterClientsFollowNoRedirect: a worker that answers a probe with a
// redirect to another address does not make the master call it; the probe
// fails with a sentence saying why. The webhook is not followed either.
func TestMasterClientsFollowNoRedirect(t *testing.T) {
	t.Parallel()
	var calledOther atomic.Int64
	other := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, req *http.Request) {
		calledOther.Add(1)
		_, _ = rw.Write([]byte(`{"status":"ok"}`))
	}))
	defer other.Close()
	redirecting := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, req *http.Request) {
		http.Redirect(rw, req, other.URL+req.URL.Path, http.StatusTemporaryRedirect)
	}))
	defer redirecting.Close()
	n := &store.Node{Name: "w1", Type: store.TypeWorker, Protocol: "http", Host: strings.TrimPrefix(redirecting.URL, "http://"), Secret: "s"}
	c := master.NewClient(2 * time.Second)
	if _, err := c.Health(t.Context(), n, 2*time.Second); err == nil || !strings.Contains(master.Message(err), "not followed") {
		t.Fatalf("probe of a redirecting worker: %v, want a refusal saying the redirect is not followed", err)
	}
	if err := c.TaskStart(t.Context(), n, protocol.TaskSpec{}); err == nil {
		t.Fatal("a push to a redirecting worker succeeded")
	}
	if calledOther.Load() != 0 {
		t.Fatalf("the master called the redirect's target %d times", calledOther.Load())
	}

	e := newEnv(t, storetest.OpenSQLite(t))
	s, _ := e.m.Settings()
	s.WebhookURL = strings.Replace(redirecting.URL, "http://", "http://ops:hook-pw-5@", 1) + "/hook"
	if err := e.m.UpdateSettings(e.ctx, s); err != nil {
		t.Fatal(err)
	}
	for _, r := range e.m.TestNotifications(e.ctx, "") {
		if r.Channel != "webhook" {
			continue
		}
		if r.OK || !strings.Contains(r.Message, "not followed") || strings.Contains(r.Message+r.Target, "hook-pw-5") {
			t.Fatalf("webhook answered by a redirect: %+v", r)
		}
	}
	if calledOther.Load() != 0 {
		t.Fatalf("the webhook followed the redirect")
	}
}
