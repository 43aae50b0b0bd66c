package protocol

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
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

// FuzzDecodeRunsRequest: the streaming decoder of run batches never panics,
// and on what it accepts it agrees with DecodeStrict (the whole-body
// decoder it replaced); it is only stricter on a top level that is not an
// object, a second "runs", and batches over the bounds.
func FuzzDecodeRunsRequest(f *testing.F) {
	for _, s := range []string{
		`{"runs":[]}`, `{"runs":null}`, `{}`, `null`, ``, ` `, `[]`, `{"runs":[{}]}`, `{"RUNS":[]}`,
		`{"runs":[{"id":"r1","task_id":"t1","node":"w1","started_at":"2030-01-02T03:04:05Z","ended_at":"2030-01-02T03:04:06Z","result":"success","attempt":1,"output":"a\u0000b\ufffd","exit_code":null}]}`,
		`{"runs":[{"id":"r1","nope":1}]}`, `{"runs":[],"runs":[]}`, `{"runs":[]}{}`, `{"runs":[]} x`, `{"runs":[1,2]}`,
		`{"runs":[{"id":"a"},{"id":"b"}]`, `{"runs":{"id":"a"}}`, `{"runs":"x"}`, "{\"runs\":[{\"output\":\"\xff\"}]}",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		got, err := DecodeRunsRequest(bytes.NewReader(body))
		var want RunsRequest
		werr := DecodeStrict(body, &want)
		switch {
		case errors.Is(err, ErrBatchTooLarge):
			if len(body) <= MaxRunsBatchBytes && len(want.Runs) <= MaxRunsPerBatch && werr == nil {
				t.Fatalf("refused as too large: %d bytes, %d runs", len(body), len(want.Runs))
			}
		case err == nil && werr != nil:
			t.Fatalf("accepted what DecodeStrict refuses (%v): %q", werr, body)
		case err == nil:
			if len(got) != len(want.Runs) {
				t.Fatalf("%d runs, DecodeStrict %d", len(got), len(want.Runs))
			}
			for i := range got {
				a, _ := json.Marshal(got[i])
				b, _ := json.Marshal(want.Runs[i])
				if !bytes.Equal(a, b) {
					t.Fatalf("run %d: %s, DecodeStrict %s", i, a, b)
				}
			}
		case werr == nil:
			// Stricter only where documented.
			trimmed := bytes.TrimSpace(body)
			if !bytes.HasPrefix(trimmed, []byte("null")) && !strings.Contains(err.Error(), "twice") {
				t.Fatalf("refused (%v) what DecodeStrict accepts: %q", err, body)
			}
		}
	})
}

// FuzzParseSelector: no input panics ParseSelector; every error is a
// *SelectorError pointing inside the input (or just past it); what it
// accepts prints to a canonical form that parses back to the same selector,
// selecting the same labels.
func FuzzParseSelector(f *testing.F) {
	for _, s := range []string{
		"", "pool=billing", "zone==eu-1", "zone!=eu-1", "zone in (eu-1,us-1)", "zone notin (a, b)", "gpu", "!gpu",
		"pool=billing,zone in (eu-1),!gpu", "k=", "k!=,j", "example.com/pool=x", "in in (in,notin),notin",
		"zone in eu-1", "zone in (", "a,,b", "a=\x00", "a=\xff", "a\tb", "zone>1", "!!a", "k in (b,a,b)",
	} {
		f.Add(s)
	}
	samples := []Labels{nil, {"pool": "billing"}, {"pool": "billing", "zone": "eu-1"}, {"zone": ""}, {"k": "", "j": "a", "in": "notin"}}
	f.Fuzz(func(t *testing.T, in string) {
		s, err := ParseSelector(in)
		if err != nil {
			var se *SelectorError
			if !errors.As(err, &se) {
				t.Fatalf("%q: error %T %v is not a *SelectorError", in, err, err)
			}
			if se.Pos < 1 || se.Pos > utf8.RuneCountInString(in)+1 || se.Msg == "" {
				t.Fatalf("%q: error %v outside the input", in, err)
			}
			if !s.Empty() {
				t.Fatalf("%q: error %v with a selector %q", in, err, s.String())
			}
			return
		}
		if len(in) > MaxSelectorLen || !utf8.ValidString(in) || strings.ContainsRune(in, 0) {
			t.Fatalf("%q accepted", in)
		}
		str := s.String()
		again, err := ParseSelector(str)
		if err != nil {
			t.Fatalf("%q: canonical %q does not parse: %v", in, str, err)
		}
		if again.String() != str {
			t.Fatalf("%q: canonical %q reads back as %q", in, str, again.String())
		}
		for _, l := range samples {
			if s.Matches(l) != again.Matches(l) {
				t.Fatalf("%q and its canonical %q disagree on %v", in, str, l)
			}
		}
	})
}
