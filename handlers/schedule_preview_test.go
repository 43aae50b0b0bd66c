package handlers_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"
	_ "time/tzdata" // as the binary: the same zones on every host

	"github.com/schedulemaster-go/schedulemaster/store/storetest"
)

func TestAPISchedulePreview(t *testing.T) {
	t.Parallel()
	e := newEnv(t, storetest.OpenSQLite(t))
	c := e.login("admin", "admin-password-1")
	soon := time.Now().Add(time.Hour).UTC().Truncate(time.Second)
	for _, tc := range []struct {
		name, query string
		status      int
		fires       int
		want        string // in the body
	}{
		{"cron", "kind=cron&cron=0+9+*+*+*", 200, 5, "T09:00:00Z"},
		{"cron tz", "kind=cron&cron=0+9+*+*+*&tz=Asia/Tokyo", 200, 5, "T00:00:00Z"}, // 09:00 JST is 00:00 UTC
		{"cron n", "kind=cron&cron=*/10+*+*+*+*+*&n=50", 200, 50, ""},
		{"interval epoch", "kind=interval&every=1h&align=epoch&n=3", 200, 3, ":00:00Z"},
		// A spread interval or H places fires by the task's id: a task not
		// saved yet gets a note, not times it will not have.
		{"interval spread, no id", "kind=interval&every=1h&n=3", 200, 0, "picked from its id when it is saved"},
		{"interval spread", "kind=interval&every=1h&id=6f1c2e0a-0000-4000-8000-000000000001&n=3", 200, 3, ":31:52Z"},
		{"interval spread says its phase", "kind=interval&every=1h&id=6f1c2e0a-0000-4000-8000-000000000001", 200, 5, `"phase":"31m52s"`},
		{"cron H, no id", "kind=cron&cron=H+H+*+*+*", 200, 0, "H picks a stable value"},
		{"cron H", "kind=cron&cron=H+H+*+*+*&id=6f1c2e0a-0000-4000-8000-000000000001", 200, 5, `"cron":"5 23 * * *"`},
		{"cron H fires", "kind=cron&cron=H+H+*+*+*&id=6f1c2e0a-0000-4000-8000-000000000001", 200, 5, "T23:05:00Z"},
		{"bad H", "kind=cron&cron=H(0-99)+*+*+*+*", 400, 0, `minute \"H(0-99)\": H(0-99) is outside 0-59`},
		{"bad align", "kind=interval&every=1h&align=later", 400, 0, "schedule.align"},
		{"once", "kind=once&at=" + url.QueryEscape(soon.Format(time.RFC3339)), 200, 1, soon.Format(time.RFC3339)},
		{"no kind", "cron=*+*+*+*+*", 400, 0, "schedule.kind: is required"},
		{"bad kind", "kind=weekly", 400, 0, `schedule.kind: \"weekly\" is not cron`},
		{"bad cron", "kind=cron&cron=61+*+*+*+*", 400, 0, "schedule.cron"},
		{"empty cron", "kind=cron", 400, 0, "schedule.cron: is required"},
		{"tz prefix", "kind=cron&cron=" + url.QueryEscape("CRON_TZ=Europe/Berlin 0 9 * * *"), 400, 0, "timezone field"},
		{"bad tz", "kind=cron&cron=0+9+*+*+*&tz=Mars/Olympus", 400, 0, "timezone: \\\"Mars/Olympus\\\" is not an IANA time zone"},
		{"bad every", "kind=interval&every=soon", 400, 0, "schedule.every"},
		{"short every", "kind=interval&every=100ms", 400, 0, "schedule.every: is shorter than"},
		{"bad at", "kind=once&at=tomorrow", 400, 0, "schedule.at: \\\"tomorrow\\\" is not an RFC 3339 time"},
		{"past at", "kind=once&at=2001-01-01T00:00:00Z", 400, 0, "schedule.at: is in the past"},
		{"n zero", "kind=cron&cron=0+9+*+*+*&n=0", 400, 0, "n: \\\"0\\\" is not a whole number from 1 to 50"},
		{"n too big", "kind=cron&cron=0+9+*+*+*&n=51", 400, 0, "from 1 to 50"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			status, body := e.do(c, "GET", "/api/v1/schedules/preview?"+tc.query, "", nil)
			if status != tc.status || !strings.Contains(body, tc.want) {
				t.Fatalf("%s: %d %s, want %d with %q", tc.query, status, body, tc.status, tc.want)
			}
			if status != 200 {
				return
			}
			got := decode[struct {
				Fires []string `json:"fires"`
			}](t, body)
			if len(got.Fires) != tc.fires {
				t.Fatalf("%d fires, want %d: %v", len(got.Fires), tc.fires, got.Fires)
			}
			var prev time.Time
			for _, f := range got.Fires {
				ft, err := time.Parse(time.RFC3339, f)
				if err != nil || !ft.After(prev) || !ft.After(time.Now().Add(-time.Second)) {
					t.Fatalf("fires %v: %q not RFC 3339, not rising or past (%v)", got.Fires, f, err)
				}
				prev = ft
			}
		})
	}
	// Like every API, it needs a user.
	if status, _ := e.do(e.client(), "GET", "/api/v1/schedules/preview?kind=cron&cron=0+9+*+*+*", "", nil); status != http.StatusUnauthorized {
		t.Fatalf("anonymous preview: %d, want 401", status)
	}
}

func TestTaskFormSchedulePreviewFragment(t *testing.T) {
	t.Parallel()
	e := newEnv(t, storetest.OpenSQLite(t))
	c := e.login("admin", "admin-password-1")

	// The form wires every schedule input to the preview.
	_, page := e.do(c, "GET", "/tasks/new", "", nil)
	for _, id := range []string{"timezone", "schedule-kind", "schedule-cron", "schedule-every", "schedule-align", "schedule-at", "start-at", "end-at"} {
		i := strings.Index(page, `id="`+id+`"`)
		tag := page[i:]
		tag = tag[:strings.Index(tag, ">")]
		if i < 0 || !strings.Contains(tag, `hx-get="/schedules/preview"`) || !strings.Contains(tag, `hx-trigger="input changed delay:300ms"`) ||
			!strings.Contains(tag, `hx-target="#schedule-preview"`) {
			t.Errorf("input %s is not wired to the preview: %s", id, tag)
		}
	}
	if !strings.Contains(page, `id="schedule-preview"`) {
		t.Fatal("no preview in the form")
	}

	// Five fires, shown in the zone and in UTC.
	q := url.Values{"schedule_kind": {"cron"}, "schedule_cron": {"30 2 * * *"}, "timezone": {"Europe/Berlin"},
		"schedule_every": {""}, "schedule_at": {""}, "start_at": {"2030-03-29T00:00"}, "end_at": {""}}
	status, frag := e.do(c, "GET", "/schedules/preview?"+q.Encode(), "", nil)
	if status != 200 || strings.Count(frag, "<li>") != 5 || strings.Contains(frag, "<html") {
		t.Fatalf("fragment: %d %s", status, frag)
	}
	// 2030-03-31 is the spring-forward day in Berlin: 02:30 does not exist,
	// the job fires at 03:00 CEST (01:00 UTC), and at 02:30 CEST after.
	for _, want := range []string{`id="schedule-preview"`, "Fri 2030-03-29 02:30:00 CET", `datetime="2030-03-29T01:30:00Z"`,
		"Sun 2030-03-31 03:00:00 CEST", "2030-03-31T01:00:00Z", "Mon 2030-04-01 02:30:00 CEST", "2030-04-01T00:30:00Z"} {
		if !strings.Contains(frag, want) {
			t.Errorf("fragment lacks %q: %s", want, frag)
		}
	}

	// The parse error inline, no fires.
	status, frag = e.do(c, "GET", "/schedules/preview?"+with(q, "schedule_cron", "99 * * * *").Encode(), "", nil)
	if status != 200 || !strings.Contains(frag, `class="field-error preview-error"`) || !strings.Contains(frag, "Cron expression: minute 99 is outside 0-59") ||
		strings.Contains(frag, "<li>") {
		t.Fatalf("bad cron fragment: %d %s", status, frag)
	}
	_, frag = e.do(c, "GET", "/schedules/preview?"+with(q, "timezone", "Nowhere/City").Encode(), "", nil)
	if !strings.Contains(frag, "Time zone: &#34;Nowhere/City&#34; is not an IANA time zone") {
		t.Fatalf("bad zone fragment: %s", frag)
	}

	// A spread interval: a new task is told its offset comes with its id;
	// the edit form (which sends the task's id) shows the offset and times.
	iv := url.Values{"schedule_kind": {"interval"}, "schedule_every": {"1h"}, "schedule_align": {"spread"}}
	_, frag = e.do(c, "GET", "/schedules/preview?"+iv.Encode(), "", nil)
	if !strings.Contains(frag, `id="preview-note"`) || !strings.Contains(frag, "picked from its id when it is saved") || strings.Contains(frag, "<li>") {
		t.Fatalf("spread preview of a new task: %s", frag)
	}
	_, frag = e.do(c, "GET", "/schedules/preview?"+with(iv, "id", "6f1c2e0a-0000-4000-8000-000000000001").Encode(), "", nil)
	if !strings.Contains(frag, "Spread: at +31m52s past each multiple of 1h") || strings.Count(frag, "<li>") != 5 || !strings.Contains(frag, ":31:52Z") {
		t.Fatalf("spread preview of a saved task: %s", frag)
	}
	_, frag = e.do(c, "GET", "/schedules/preview?"+with(iv, "schedule_align", "epoch").Encode(), "", nil)
	if strings.Contains(frag, "preview-note") || strings.Count(frag, ":00:00Z") != 5 {
		t.Fatalf("epoch preview: %s", frag)
	}
}

// The form's zone is stored with the task, its times are read in that zone,
// and the edit form shows them back in it.
func TestTaskFormTimezoneRoundTrip(t *testing.T) {
	t.Parallel()
	e := newEnv(t, storetest.OpenSQLite(t))
	c := e.login("admin", "admin-password-1")
	e.addOfflineNode("w1")
	v := with(taskForm("berlin", "http://127.0.0.1:1/x", "w1"), "schedule_kind", "cron", "schedule_cron", "30 2 * * *",
		"timezone", "Europe/Berlin", "start_at", "2030-07-01T08:00")
	if resp := e.postForm(c, "/tasks", v); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("create: %d %s", resp.StatusCode, body(t, resp))
	}
	task := e.tasks()[0]
	if task.Timezone != "Europe/Berlin" || task.StartAt == nil || !task.StartAt.Equal(time.Date(2030, 7, 1, 6, 0, 0, 0, time.UTC)) {
		t.Fatalf("stored timezone %q start_at %v, want Europe/Berlin and 06:00 UTC", task.Timezone, task.StartAt)
	}
	_, page := e.do(c, "GET", "/tasks/"+task.ID+"/edit", "", nil)
	if !strings.Contains(page, `value="Europe/Berlin"`) || !strings.Contains(page, `value="2030-07-01T08:00"`) {
		t.Fatalf("edit form does not show the zone and the local start time")
	}
	_, show := e.do(c, "GET", "/tasks/"+task.ID, "", nil)
	if !strings.Contains(show, `<span class="mono schedule-expr">cron 30 2 * * *</span> <span class="muted schedule-zone">(Europe/Berlin)</span>`) {
		t.Fatalf("task page does not name the zone")
	}
	// A zone that does not exist is refused next to its field.
	resp := e.postForm(c, "/tasks", with(v, "timezone", "Europe/Nowhere"))
	if b := body(t, resp); resp.StatusCode != http.StatusUnprocessableEntity || !strings.Contains(b, `id="error-timezone"`) {
		t.Fatalf("bad zone: %d", resp.StatusCode)
	}
}
