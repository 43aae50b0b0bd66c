package form_test

import (
	"net/url"
	"reflect"
	"testing"
	"time"

	"github.com/schedulemaster-go/schedulemaster/handlers/form"
	"github.com/schedulemaster-go/schedulemaster/master"
	"github.com/schedulemaster-go/schedulemaster/protocol"
)

// A stored task written into the form and read back is the same definition:
// the form loses nothing (times in the task's zone, pairs, lists).
func TestTaskFormRoundTrip(t *testing.T) {
	t.Parallel()
	start := time.Date(2030, 3, 31, 1, 30, 0, 0, time.UTC)
	end := start.Add(48 * time.Hour)
	stored := &master.Task{TaskDef: protocol.TaskDef{
		Title: "nightly", Description: "d", Type: protocol.TaskHTTP, Timezone: "Europe/Berlin",
		Schedule: protocol.Schedule{Kind: protocol.ScheduleCron, Cron: "0 30 2 * * *"},
		StartAt:  &start, EndAt: &end, Timeout: protocol.Duration(90 * time.Second), Retries: 2,
		Params: map[string]string{"b": "2", "a": "1"}, Overlap: "skip", Routing: "hash", RoutingKey: "a", Misfire: "run_once",
		HTTP: &protocol.HTTPSpec{Method: "POST", URL: "https://example.com/x", Body: "{}", ContentType: "application/json",
			Headers: map[string]string{"X-A": "1"}},
	}, Keepers: []string{"ops@example.com"}}
	f := form.TaskFieldsOf(stored)
	if f.StartAt != "2030-03-31T03:30" || f.Timeout != "1m30s" || f.Params != "a=1\nb=2" {
		t.Fatalf("fields %+v", f)
	}
	v := url.Values{"title": {f.Title}, "description": {f.Description}, "type": {f.Type}, "schedule_kind": {f.ScheduleKind},
		"schedule_cron": {f.Cron}, "start_at": {f.StartAt}, "end_at": {f.EndAt}, "timeout": {f.Timeout}, "retries": {f.Retries},
		"params": {f.Params}, "keepers": {f.Keepers}, "http_method": {f.HTTPMethod}, "http_url": {f.HTTPURL},
		"http_headers": {f.HTTPHeaders}, "http_body": {f.HTTPBody}, "http_content_type": {f.HTTPContentType},
		"timezone": {f.Timezone}, "overlap": {f.Overlap}, "routing": {f.Routing}, "routing_key": {f.RoutingKey},
		"misfire": {f.Misfire}, "executors": {"w1", "w2"}}
	back, in, fe := form.Task(v)
	if len(fe) != 0 {
		t.Fatalf("field errors %v", fe)
	}
	if back != f {
		t.Fatalf("typed values changed:\n%+v\n%+v", back, f)
	}
	want := stored.TaskDef
	if !in.StartAt.Equal(*want.StartAt) || !in.EndAt.Equal(*want.EndAt) {
		t.Fatalf("window %v–%v, want %v–%v", in.StartAt, in.EndAt, want.StartAt, want.EndAt)
	}
	in.StartAt, in.EndAt, want.StartAt, want.EndAt = nil, nil, nil, nil
	if !reflect.DeepEqual(in.TaskDef, want) || !reflect.DeepEqual(in.Keepers, stored.Keepers) || !reflect.DeepEqual(in.Executors, []string{"w1", "w2"}) {
		t.Fatalf("input %+v\nwant %+v", in, want)
	}
}

// Every value that does not parse is named, with the definition's own
// errors beside them, and what was typed is kept.
func TestTaskFormNamesEveryBadField(t *testing.T) {
	t.Parallel()
	v := url.Values{"title": {""}, "type": {"shell"}, "schedule_kind": {"interval"}, "schedule_every": {"soon"},
		"start_at": {"tomorrow"}, "timeout": {"0s"}, "retries": {"many"}, "params": {"novalue"}, "shell_env": {"=x"}}
	f, _, fe := form.Task(v)
	for _, field := range []string{"schedule.every", "start_at", "timeout", "retries", "params", "shell.env", "title"} {
		if fe[field] == "" {
			t.Errorf("no error for %s (errors %v)", field, fe)
		}
	}
	if f.Every != "soon" || f.Retries != "many" {
		t.Errorf("typed values lost: %+v", f)
	}
}

func TestScheduleReadsTimesInTheZone(t *testing.T) {
	t.Parallel()
	var d protocol.TaskDef
	loc, known, fe := form.Schedule(url.Values{"schedule_kind": {"once"}, "schedule_at": {"2030-07-01T12:00"},
		"timezone": {"Asia/Kolkata"}}, &d)
	if !known || len(fe) != 0 || loc.String() != "Asia/Kolkata" {
		t.Fatalf("zone %v known %v errors %v", loc, known, fe)
	}
	if want := time.Date(2030, 7, 1, 6, 30, 0, 0, time.UTC); !d.Schedule.At.Equal(want) {
		t.Fatalf("at %v, want %v", d.Schedule.At, want)
	}
	_, known, _ = form.Schedule(url.Values{"timezone": {"Mars/Olympus"}}, &d)
	if known {
		t.Fatal("an unknown zone was taken as known")
	}
}

func TestNodeAndSettingsForms(t *testing.T) {
	t.Parallel()
	_, cfg, fe := form.Node(url.Values{"name": {" w1 "}, "protocol": {"http"}, "host": {"127.0.0.1:30001"}, "priority": {"x"}, "max_concurrency": {"5"}})
	if cfg.Name != "w1" || cfg.MaxConcurrency != 5 || fe["priority"] == "" {
		t.Fatalf("node %+v errors %v", cfg, fe)
	}
	f, st, fe := form.Settings(url.Values{"health_interval": {"10s"}, "health_timeout": {"ten"}, "max_failures": {"3"},
		"default_http_timeout": {"30s"}, "run_retention_days": {"7"}, "approve_new_nodes": {"1"}})
	if st.HealthInterval != 10*time.Second || st.SMTPPort != master.DefaultSettings().SMTPPort || !st.ApproveNewNodes ||
		fe["health_timeout"] == "" || f.HealthTimeout != "ten" {
		t.Fatalf("settings %+v errors %v", st, fe)
	}
	if got := form.SMTPPassword(url.Values{}, "stored"); got != "stored" {
		t.Fatalf("empty field: %q, want the stored password kept", got)
	}
	if got := form.SMTPPassword(url.Values{"smtp_password_clear": {"1"}}, "stored"); got != "" {
		t.Fatalf("clear ticked: %q, want none", got)
	}
}

func TestDelayedForm(t *testing.T) {
	t.Parallel()
	f, in := form.Delayed(url.Values{"source_app": {"shop"}, "at": {"2030-01-02T03:04"}, "retries": {"x"}, "keepers": {"a@x, b@x"}})
	if in.At != "2030-01-02T03:04:00Z" || in.Retries != -1 || len(in.Keepers) != 2 || f.Retries != "x" {
		t.Fatalf("delayed %+v fields %+v", in, f)
	}
}

func TestDaysAndLabelsAndSelector(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]time.Duration{"24h": 24 * time.Hour, "7d": 7 * 24 * time.Hour, "0": 0, "36h": 36 * time.Hour} {
		d, ok := master.ParseDays(in)
		if !ok || d != want {
			t.Errorf("Days(%q) = %s %v, want %s", in, d, ok, want)
		}
		if back, _ := master.ParseDays(master.FormatDays(d)); back != d {
			t.Errorf("FormatDays(%s) = %q does not read back", d, master.FormatDays(d))
		}
	}
	for _, bad := range []string{"", "x", "1.5d", "-1d", "d", "99999999999d"} {
		if _, ok := master.ParseDays(bad); ok {
			t.Errorf("Days(%q) accepted", bad)
		}
	}
	if l, msg := form.Labels(" pool=billing , zone=eu-1 "); msg != "" || l.String() != "pool=billing,zone=eu-1" {
		t.Errorf("Labels: %v %q", l, msg)
	}
	if _, msg := form.Labels("pool"); msg == "" {
		t.Error("Labels accepted an item without '='")
	}
	f, in, _ := form.Task(url.Values{"selector": {"pool=billing"}})
	if f.Selector != "pool=billing" || in.Selector != "pool=billing" {
		t.Errorf("task form selector: %q %q", f.Selector, in.Selector)
	}
	if got := form.TaskFieldsOf(&master.Task{Selector: "pool=x"}).Selector; got != "pool=x" {
		t.Errorf("TaskFieldsOf selector %q", got)
	}
	if f, in := form.Delayed(url.Values{"selector": {"pool=billing"}}); f.Selector != "pool=billing" || in.Selector != "pool=billing" {
		t.Errorf("delayed form selector: %q %q", f.Selector, in.Selector)
	}
}
