package protocol

import (
	"encoding/json"
	"testing"
	"time"
)

// FuzzParseSchedule: no input panics, and nothing accepted lacks a next fire
// or fires more often than once a second.
func FuzzParseSchedule(f *testing.F) {
	for _, s := range []string{"*/5 * * * * *", "0 3 * * 1-5", "@hourly", "@every 2s", "@every 1ms", "@every 0s",
		"@every -1s", "@every 1500ms", "0 0 30 2 *", "0 0 29 2 *", "* * * * * *", "TZ=UTC 0 * * * *", "@every 8784h1s"} {
		f.Add(s, int64(time.Second))
	}
	f.Add("", int64(1500*time.Millisecond))
	f.Add("@yearly", int64(-1))
	f.Fuzz(func(t *testing.T, expr string, every int64) {
		now := time.Now()
		if s, err := ParseCron(expr); err == nil {
			next := s.Next(now)
			if next.IsZero() || next.After(now.AddDate(cronHorizon, 0, 1)) {
				t.Fatalf("%q accepted with no fire in %d years", expr, cronHorizon)
			}
			if after := s.Next(next); !after.IsZero() && after.Sub(next) < time.Second {
				t.Fatalf("%q accepted firing %s apart", expr, after.Sub(next))
			}
		}
		if d := time.Duration(every); CheckEvery(d) == "" && (d < time.Second || d%time.Second != 0 || d > MaxInterval) {
			t.Fatalf("interval %s accepted", d)
		}
	})
}

// FuzzTaskDefValidate: arbitrary JSON never panics Normalize or Validate, and
// what Validate accepts survives a JSON round trip still valid.
func FuzzTaskDefValidate(f *testing.F) {
	seeds := []string{
		`{"id":"t","title":"ping","type":"http","schedule":{"kind":"cron","cron":"*/5 * * * * *"},"http":{"method":"GET","url":"http://127.0.0.1:1/x","headers":{"X-A":"{{K}}"}},"params":{"K":"v"},"timeout":"30s"}`,
		`{"id":"s","title":"sh","type":"shell","schedule":{"kind":"interval","every":"2s"},"shell":{"command":"echo hi","args":["a"],"env":{"A":"b"}},"timeout":"1s","retries":2}`,
		`{"id":"o","title":"once","type":"http","schedule":{"kind":"once","at":"2099-01-01T00:00:00Z"},"http":{"url":"https://example.com/"},"end_at":"2099-06-01T00:00:00Z"}`,
		`{"title":"bad","type":"http","schedule":{"kind":"cron","cron":"@every 1ms"},"http":{"url":"http://x/{{P}}"},"params":{"P":"\r\n"}}`,
		`{"title":"\u0000","type":"ftp"}`,
		`[]`, `null`, `{"timeout":"-5s"}`,
	}
	for _, s := range seeds {
		f.Add([]byte(s))
	}
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	f.Fuzz(func(t *testing.T, data []byte) {
		var d TaskDef
		if json.Unmarshal(data, &d) != nil {
			return
		}
		d.Normalize()
		if d.Validate(now) != nil {
			return
		}
		again, err := json.Marshal(&d)
		if err != nil {
			t.Fatalf("valid task does not encode: %v", err)
		}
		var d2 TaskDef
		if err := json.Unmarshal(again, &d2); err != nil {
			t.Fatalf("valid task does not decode again: %v\n%s", err, again)
		}
		d2.Normalize()
		if err := d2.Validate(now); err != nil {
			t.Fatalf("valid task invalid after a round trip: %v\n%s", err, again)
		}
	})
}
