package worker

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strconv"
	"testing"
	"time"

	"github.com/schedulemaster-go/schedulemaster/protocol"
)

// marshalReport writes the very bytes encoding/json writes, for every kind
// of string a run's output or ids may hold.
func TestMarshalReportMatchesEncodingJSON(t *testing.T) {
	t.Parallel()
	code := 3
	base := protocol.RunReport{ID: "0b7c1f4e-8a2d-4c6e-9f10-1234567890ab", TaskID: "t1", Node: "w1",
		ScheduledAt: time.Date(2026, 3, 29, 1, 0, 0, 0, time.UTC), StartedAt: time.Date(2026, 3, 29, 1, 0, 0, 1_234_567, time.UTC),
		EndedAt: time.Date(2026, 3, 29, 1, 0, 1, 500_000_000, time.FixedZone("x", 3600)), DurationMS: 1498, Result: protocol.ResultSuccess,
		Attempt: 2, HTTPStatus: 204}
	outputs := []string{"", "ok", "line1\nline2\r\n\ttab", `quote " backslash \ slash /`, "<html> & </html>", "\x01\x02\x1f\x7f\b\f",
		"U+2028 \u2028 U+2029 \u2029", "日本語 ✓ 😀", "\uFFFD replaced", "[… 12 earlier bytes truncated]\nend"}
	for i, out := range outputs {
		rep := base
		rep.Output = out
		rep.Manual = i%2 == 0
		rep.BinaryOutput = i%3 == 0
		if i%2 == 1 {
			rep.ExitCode = &code
		}
		rep.Covers, rep.TaskVersion = i%4, i%5
		check(t, &rep)
	}
	// What encoding/json must handle itself still decodes to the same report.
	odd := base
	odd.Output = "bad \xff byte"
	odd.ScheduledAt = time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)
	got, err := marshalReport(&odd)
	if err == nil {
		t.Fatalf("year 10000 encoded: %s", got)
	}
	odd.ScheduledAt = base.ScheduledAt
	check(t, &odd)
}

// TestMarshalReportWritesEveryField: a report with every field set encodes
// as encoding/json encodes it, so a field added to protocol.RunReport and
// not to marshalReport (as covers once was: catch-up runs lost their count
// on the way to the master) fails here.
func TestMarshalReportWritesEveryField(t *testing.T) {
	t.Parallel()
	var rep protocol.RunReport
	v := reflect.ValueOf(&rep).Elem()
	for i := range v.NumField() {
		f := v.Field(i)
		switch f.Kind() {
		case reflect.String:
			f.SetString("s" + strconv.Itoa(i))
		case reflect.Int, reflect.Int64:
			f.SetInt(int64(i + 1))
		case reflect.Bool:
			f.SetBool(true)
		case reflect.Pointer:
			f.Set(reflect.New(f.Type().Elem()))
			f.Elem().SetInt(int64(i + 1))
		case reflect.Struct:
			f.Set(reflect.ValueOf(time.Date(2026, 11, 29, 1, 2, 3, i, time.UTC)))
		default:
			t.Fatalf("field %s of kind %s: teach this test to set it", v.Type().Field(i).Name, f.Kind())
		}
	}
	check(t, &rep)
}

func check(t *testing.T, rep *protocol.RunReport) {
	t.Helper()
	want, err := json.Marshal(rep)
	if err != nil {
		t.Fatal(err)
	}
	got, err := marshalReport(rep)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("marshalReport:\n%s\nencoding/json:\n%s", got, want)
	}
}

func FuzzMarshalReport(f *testing.F) {
	f.Add("id", "task", "out\n\"x\"", int64(5), 200, 0)
	f.Fuzz(func(t *testing.T, id, task, out string, ms int64, status, version int) {
		rep := protocol.RunReport{ID: id, TaskID: task, Node: "w", Output: out, DurationMS: ms, HTTPStatus: status,
			StartedAt: time.Unix(0, ms).UTC(), Result: protocol.ResultFailed, Attempt: 1, TaskVersion: version, Covers: status % 7}
		want, err := json.Marshal(&rep)
		if err != nil {
			t.Skip()
		}
		got, err := marshalReport(&rep)
		if err != nil || !bytes.Equal(got, want) {
			t.Fatalf("marshalReport %s (%v), encoding/json %s", got, err, want)
		}
	})
}
