package protocol_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/schedulemaster-go/schedulemaster/protocol"
)

func validHTTP() protocol.TaskDef {
	return protocol.TaskDef{ID: "t", Title: "t", Type: protocol.TaskHTTP,
		Schedule: protocol.Schedule{Kind: protocol.ScheduleCron, Cron: "*/5 * * * * *"},
		HTTP:     &protocol.HTTPSpec{Method: "GET", URL: "http://127.0.0.1:1/x"}, Timeout: protocol.Duration(time.Second)}
}

func TestTaskDefValidate(t *testing.T) {
	t.Parallel()
	now := time.Now()
	past, future := now.Add(-time.Hour), now.Add(time.Hour)
	cases := []struct {
		name  string
		edit  func(*protocol.TaskDef)
		field string // "" = valid
	}{
		{"valid cron with seconds", func(*protocol.TaskDef) {}, ""},
		// Limits count characters, as the columns (VARCHAR(200)) and the
		// form's maxlength do, not bytes.
		{"title of 200 Chinese characters", func(d *protocol.TaskDef) { d.Title = strings.Repeat("任", protocol.MaxTitleLen) }, ""},
		{"title of 201 characters", func(d *protocol.TaskDef) { d.Title = strings.Repeat("任", protocol.MaxTitleLen+1) }, "title"},
		{"description of 4,000 characters", func(d *protocol.TaskDef) { d.Description = strings.Repeat("说", protocol.MaxDescriptionLen) }, ""},
		{"description of 4,001 characters", func(d *protocol.TaskDef) { d.Description = strings.Repeat("a", protocol.MaxDescriptionLen+1) }, "description"},
		{"valid 5-field cron", func(d *protocol.TaskDef) { d.Schedule.Cron = "0 3 * * 1-5" }, ""},
		{"valid descriptor", func(d *protocol.TaskDef) { d.Schedule.Cron = "@hourly" }, ""},
		{"cron garbage", func(d *protocol.TaskDef) { d.Schedule.Cron = "every tuesday" }, "schedule.cron"},
		{"cron out of range", func(d *protocol.TaskDef) { d.Schedule.Cron = "0 61 * * *" }, "schedule.cron"},
		{"cron empty", func(d *protocol.TaskDef) { d.Schedule.Cron = "" }, "schedule.cron"},
		{"cron with TZ", func(d *protocol.TaskDef) { d.Schedule.Cron = "TZ=Asia/Tokyo 0 * * * *" }, "schedule.cron"},
		{"interval ok", func(d *protocol.TaskDef) {
			d.Schedule = protocol.Schedule{Kind: "interval", Every: protocol.Duration(2 * time.Second)}
		}, ""},
		{"interval too short", func(d *protocol.TaskDef) {
			d.Schedule = protocol.Schedule{Kind: "interval", Every: protocol.Duration(time.Millisecond)}
		}, "schedule.every"},
		{"interval fraction", func(d *protocol.TaskDef) {
			d.Schedule = protocol.Schedule{Kind: "interval", Every: protocol.Duration(1500 * time.Millisecond)}
		}, "schedule.every"},
		{"once future", func(d *protocol.TaskDef) { d.Schedule = protocol.Schedule{Kind: "once", At: &future} }, ""},
		{"once past", func(d *protocol.TaskDef) { d.Schedule = protocol.Schedule{Kind: "once", At: &past} }, "schedule.at"},
		{"once missing", func(d *protocol.TaskDef) { d.Schedule = protocol.Schedule{Kind: "once"} }, "schedule.at"},
		{"unknown kind", func(d *protocol.TaskDef) { d.Schedule.Kind = "weekly" }, "schedule.kind"},
		{"no title", func(d *protocol.TaskDef) { d.Title = "" }, "title"},
		{"bad type", func(d *protocol.TaskDef) { d.Type = "ftp" }, "type"},
		{"bad url", func(d *protocol.TaskDef) { d.HTTP.URL = "not a url" }, "http.url"},
		{"ftp url", func(d *protocol.TaskDef) { d.HTTP.URL = "ftp://x/y" }, "http.url"},
		{"unknown method", func(d *protocol.TaskDef) { d.HTTP.Method = "FETCH" }, "http.method"},
		{"bad header", func(d *protocol.TaskDef) { d.HTTP.Headers = map[string]string{"Bad Name": "x"} }, "http.headers"},
		{"header injection", func(d *protocol.TaskDef) { d.HTTP.Headers = map[string]string{"X-A": "1\r\nX-B: 2"} }, "http.headers"},
		{"negative timeout", func(d *protocol.TaskDef) { d.Timeout = protocol.Duration(-5 * time.Second) }, "timeout"},
		{"absurd timeout", func(d *protocol.TaskDef) { d.Timeout = protocol.Duration(1000 * time.Hour) }, "timeout"},
		{"negative retries", func(d *protocol.TaskDef) { d.Retries = -1 }, "retries"},
		{"absurd retries", func(d *protocol.TaskDef) { d.Retries = 99 }, "retries"},
		{"bad param key", func(d *protocol.TaskDef) { d.Params = map[string]string{"1x": "v"} }, "params"},
		{"window reversed", func(d *protocol.TaskDef) { d.StartAt, d.EndAt = &future, &past }, "end_at"},
		{"shell without command", func(d *protocol.TaskDef) { d.Type, d.HTTP, d.Shell = "shell", nil, &protocol.ShellSpec{} }, "shell.command"},
		{"shell ok", func(d *protocol.TaskDef) {
			d.Type, d.HTTP, d.Shell = "shell", nil, &protocol.ShellSpec{Command: "true"}
		}, ""},
		{"http with shell part", func(d *protocol.TaskDef) { d.Shell = &protocol.ShellSpec{Command: "true"} }, "shell"},
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
			fe, ok := err.(protocol.FieldErrors)
			if !ok || fe[tc.field] == "" {
				t.Fatalf("want an error on %s, got %v", tc.field, err)
			}
		})
	}
	d := validHTTP()
	d.Schedule.Cron = "every tuesday"
	err := d.Validate(now)
	if err == nil || !strings.Contains(err.Error(), "a cron expression has 5 (minute hour day-of-month month day-of-week), or 6 with leading seconds") {
		t.Fatalf("cron message does not say what is expected: %v", err)
	}
}

func TestDurationText(t *testing.T) {
	t.Parallel()
	var d protocol.Duration
	if err := d.UnmarshalText([]byte("1m30s")); err != nil || time.Duration(d) != 90*time.Second {
		t.Fatalf("parse: %v %v", d, err)
	}
	if err := d.UnmarshalText([]byte("soon")); err == nil || !strings.Contains(err.Error(), "not a duration") {
		t.Fatalf("bad duration: %v", err)
	}
	if b, _ := protocol.Duration(2 * time.Second).MarshalText(); string(b) != "2s" {
		t.Fatalf("marshal: %s", b)
	}
}

func TestScheduleRefusals(t *testing.T) {
	t.Parallel()
	now := time.Now()
	soon, later := now.Add(time.Minute), now.Add(2*time.Hour)
	cases := []struct {
		name  string
		edit  func(*protocol.TaskDef)
		field string
	}{
		{"@every 1ms", func(d *protocol.TaskDef) { d.Schedule.Cron = "@every 1ms" }, "schedule.cron"},
		{"@every 0s", func(d *protocol.TaskDef) { d.Schedule.Cron = "@every 0s" }, "schedule.cron"},
		{"@every -1s", func(d *protocol.TaskDef) { d.Schedule.Cron = "@every -1s" }, "schedule.cron"},
		{"@every 1500ms", func(d *protocol.TaskDef) { d.Schedule.Cron = "@every 1500ms" }, "schedule.cron"},
		{"@every 2s is fine", func(d *protocol.TaskDef) { d.Schedule.Cron = "@every 2s" }, ""},
		{"30 February", func(d *protocol.TaskDef) { d.Schedule.Cron = "0 0 30 2 *" }, "schedule.cron"},
		{"31 April", func(d *protocol.TaskDef) { d.Schedule.Cron = "0 0 31 4 *" }, "schedule.cron"},
		{"29 February is fine", func(d *protocol.TaskDef) { d.Schedule.Cron = "0 0 29 2 *" }, ""},
		{"interval 0", func(d *protocol.TaskDef) { d.Schedule = protocol.Schedule{Kind: "interval"} }, "schedule.every"},
		{"interval negative", func(d *protocol.TaskDef) {
			d.Schedule = protocol.Schedule{Kind: "interval", Every: protocol.Duration(-time.Second)}
		}, "schedule.every"},
		{"interval past the window", func(d *protocol.TaskDef) {
			// A 30-minute window starting just after an hour: an hourly
			// interval (counted from the epoch) has no fire in it, whatever
			// the time the test runs at.
			start := now.Truncate(time.Hour).Add(3*time.Hour + time.Second)
			end := start.Add(30 * time.Minute)
			d.Schedule = protocol.Schedule{Kind: "interval", Every: protocol.Duration(time.Hour)}
			d.StartAt, d.EndAt = &start, &end
		}, "schedule.every"},
		{"cron past the window", func(d *protocol.TaskDef) {
			d.Schedule.Cron = "0 0 1 1 *"
			d.EndAt = &later
		}, "schedule.cron"},
		{"once after the end", func(d *protocol.TaskDef) {
			at := later.Add(time.Hour)
			d.Schedule = protocol.Schedule{Kind: "once", At: &at}
			d.EndAt = &later
		}, "schedule.at"},
		{"once before the start", func(d *protocol.TaskDef) {
			d.Schedule = protocol.Schedule{Kind: "once", At: &soon}
			d.StartAt = &later
		}, "schedule.at"},
		{"once inside the window", func(d *protocol.TaskDef) {
			at := soon.Add(time.Minute)
			d.Schedule = protocol.Schedule{Kind: "once", At: &at}
			d.StartAt, d.EndAt = &soon, &later
		}, ""},
		{"header multi-line after substitution", func(d *protocol.TaskDef) {
			d.HTTP.Headers = map[string]string{"X-Token": "{{TOKEN}}"}
			d.Params = map[string]string{"TOKEN": "abc\r\nX-Evil: 1"}
		}, "http.headers"},
		{"header NUL after substitution", func(d *protocol.TaskDef) {
			d.HTTP.Headers = map[string]string{"X-Token": "a{{TOKEN}}"}
			d.Params = map[string]string{"TOKEN": "x\x00y"}
		}, "http.headers"},
		{"header NUL", func(d *protocol.TaskDef) { d.HTTP.Headers = map[string]string{"X-A": "a\x00"} }, "http.headers"},
		{"multi-line param used in a header-free task is fine", func(d *protocol.TaskDef) {
			d.Params = map[string]string{"SCRIPT": "line1\nline2"}
		}, ""},
		{"URL multi-line after substitution", func(d *protocol.TaskDef) {
			d.HTTP.URL = "http://127.0.0.1:1/{{P}}"
			d.Params = map[string]string{"P": "x\r\nHost: evil"}
		}, "http.url"},
		{"content type NUL", func(d *protocol.TaskDef) { d.HTTP.ContentType = "text/plain\x00" }, "http.content_type"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			d := validHTTP()
			c.edit(&d)
			d.Normalize()
			err := d.Validate(now)
			var fe protocol.FieldErrors
			switch {
			case c.field == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case c.field == "":
			case !errors.As(err, &fe):
				t.Fatalf("Validate = %v, want a field error on %s", err, c.field)
			case fe[c.field] == "":
				t.Fatalf("Validate = %v, want a field error on %s", err, c.field)
			}
		})
	}
	if _, err := protocol.ParseCron("0 0 30 2 *"); err == nil || !strings.Contains(err.Error(), "five years") && !strings.Contains(err.Error(), "5 years") {
		t.Errorf("ParseCron(30 Feb) = %v, want 'never fires in the next 5 years'", err)
	}
}
