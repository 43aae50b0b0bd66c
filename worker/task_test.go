package worker_test

import (
	"strings"
	"testing"
	"time"

	"github.com/schedulemaster-go/schedulemaster/worker"
)

func validHTTP() worker.TaskDef {
	return worker.TaskDef{ID: "t", Title: "t", Type: worker.TaskHTTP,
		Schedule: worker.Schedule{Kind: worker.ScheduleCron, Cron: "*/5 * * * * *"},
		HTTP:     &worker.HTTPSpec{Method: "GET", URL: "http://127.0.0.1:1/x"}, Timeout: worker.Duration(time.Second)}
}

func TestTaskDefValidate(t *testing.T) {
	now := time.Now()
	past, future := now.Add(-time.Hour), now.Add(time.Hour)
	cases := []struct {
		name  string
		edit  func(*worker.TaskDef)
		field string // "" = valid
	}{
		{"valid cron with seconds", func(*worker.TaskDef) {}, ""},
		{"valid 5-field cron", func(d *worker.TaskDef) { d.Schedule.Cron = "0 3 * * 1-5" }, ""},
		{"valid descriptor", func(d *worker.TaskDef) { d.Schedule.Cron = "@hourly" }, ""},
		{"cron garbage", func(d *worker.TaskDef) { d.Schedule.Cron = "every tuesday" }, "schedule.cron"},
		{"cron out of range", func(d *worker.TaskDef) { d.Schedule.Cron = "0 61 * * *" }, "schedule.cron"},
		{"cron empty", func(d *worker.TaskDef) { d.Schedule.Cron = "" }, "schedule.cron"},
		{"cron with TZ", func(d *worker.TaskDef) { d.Schedule.Cron = "TZ=Asia/Tokyo 0 * * * *" }, "schedule.cron"},
		{"interval ok", func(d *worker.TaskDef) {
			d.Schedule = worker.Schedule{Kind: "interval", Every: worker.Duration(2 * time.Second)}
		}, ""},
		{"interval too short", func(d *worker.TaskDef) {
			d.Schedule = worker.Schedule{Kind: "interval", Every: worker.Duration(time.Millisecond)}
		}, "schedule.every"},
		{"interval fraction", func(d *worker.TaskDef) {
			d.Schedule = worker.Schedule{Kind: "interval", Every: worker.Duration(1500 * time.Millisecond)}
		}, "schedule.every"},
		{"once future", func(d *worker.TaskDef) { d.Schedule = worker.Schedule{Kind: "once", At: &future} }, ""},
		{"once past", func(d *worker.TaskDef) { d.Schedule = worker.Schedule{Kind: "once", At: &past} }, "schedule.at"},
		{"once missing", func(d *worker.TaskDef) { d.Schedule = worker.Schedule{Kind: "once"} }, "schedule.at"},
		{"unknown kind", func(d *worker.TaskDef) { d.Schedule.Kind = "weekly" }, "schedule.kind"},
		{"no title", func(d *worker.TaskDef) { d.Title = "" }, "title"},
		{"bad type", func(d *worker.TaskDef) { d.Type = "ftp" }, "type"},
		{"bad url", func(d *worker.TaskDef) { d.HTTP.URL = "not a url" }, "http.url"},
		{"ftp url", func(d *worker.TaskDef) { d.HTTP.URL = "ftp://x/y" }, "http.url"},
		{"unknown method", func(d *worker.TaskDef) { d.HTTP.Method = "FETCH" }, "http.method"},
		{"bad header", func(d *worker.TaskDef) { d.HTTP.Headers = map[string]string{"Bad Name": "x"} }, "http.headers"},
		{"header injection", func(d *worker.TaskDef) { d.HTTP.Headers = map[string]string{"X-A": "1\r\nX-B: 2"} }, "http.headers"},
		{"negative timeout", func(d *worker.TaskDef) { d.Timeout = worker.Duration(-5 * time.Second) }, "timeout"},
		{"absurd timeout", func(d *worker.TaskDef) { d.Timeout = worker.Duration(1000 * time.Hour) }, "timeout"},
		{"negative retries", func(d *worker.TaskDef) { d.Retries = -1 }, "retries"},
		{"absurd retries", func(d *worker.TaskDef) { d.Retries = 99 }, "retries"},
		{"bad param key", func(d *worker.TaskDef) { d.Params = map[string]string{"1x": "v"} }, "params"},
		{"window reversed", func(d *worker.TaskDef) { d.StartAt, d.EndAt = &future, &past }, "end_at"},
		{"shell without command", func(d *worker.TaskDef) { d.Type, d.HTTP, d.Shell = "shell", nil, &worker.ShellSpec{} }, "shell.command"},
		{"shell ok", func(d *worker.TaskDef) { d.Type, d.HTTP, d.Shell = "shell", nil, &worker.ShellSpec{Command: "true"} }, ""},
		{"http with shell part", func(d *worker.TaskDef) { d.Shell = &worker.ShellSpec{Command: "true"} }, "shell"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d := validHTTP()
			tc.edit(&d)
			d.Normalize()
			err := d.Validate(now)
			if tc.field == "" {
				if err != nil {
					t.Fatalf("want valid, got %v", err)
				}
				return
			}
			fe, ok := err.(worker.FieldErrors)
			if !ok || fe[tc.field] == "" {
				t.Fatalf("want an error on %s, got %v", tc.field, err)
			}
		})
	}
	d := validHTTP()
	d.Schedule.Cron = "every tuesday"
	err := d.Validate(now)
	if err == nil || !strings.Contains(err.Error(), "5 fields, or 6 with leading seconds") {
		t.Fatalf("cron message does not say what is expected: %v", err)
	}
}

func TestDurationText(t *testing.T) {
	var d worker.Duration
	if err := d.UnmarshalText([]byte("1m30s")); err != nil || time.Duration(d) != 90*time.Second {
		t.Fatalf("parse: %v %v", d, err)
	}
	if err := d.UnmarshalText([]byte("soon")); err == nil || !strings.Contains(err.Error(), "not a duration") {
		t.Fatalf("bad duration: %v", err)
	}
	if b, _ := worker.Duration(2 * time.Second).MarshalText(); string(b) != "2s" {
		t.Fatalf("marshal: %s", b)
	}
}
