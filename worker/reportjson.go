package worker

import (
	"encoding/json"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/schedulemaster-go/schedulemaster/protocol"
)

// marshalReport encodes a run report as encoding/json does (same keys, same
// values once decoded) with one allocation, plus room for the journal's
// newline: every run is journaled, and reflection-based encoding was a good
// part of a fire's garbage. Reports it cannot encode exactly (invalid UTF-8,
// a year outside 0-9999) go through encoding/json.
func marshalReport(rep *protocol.RunReport) ([]byte, error) {
	if !utf8.ValidString(rep.ID) || !utf8.ValidString(rep.TaskID) || !utf8.ValidString(rep.Node) ||
		!utf8.ValidString(string(rep.Result)) || !utf8.ValidString(rep.Output) ||
		!utf8.ValidString(rep.WorkflowRun) || !utf8.ValidString(rep.WorkflowStep) ||
		!jsonTime(rep.ScheduledAt) || !jsonTime(rep.StartedAt) || !jsonTime(rep.EndedAt) {
		c := *rep // only this copy escapes, not the caller's report
		return json.Marshal(&c)
	}
	b := make([]byte, 0, 320+len(rep.ID)+len(rep.TaskID)+len(rep.Node)+len(rep.Output)+len(rep.Output)/8)
	b = append(b, `{"id":`...)
	b = appendJSONString(b, rep.ID)
	b = append(b, `,"task_id":`...)
	b = appendJSONString(b, rep.TaskID)
	b = append(b, `,"node":`...)
	b = appendJSONString(b, rep.Node)
	b = append(b, `,"scheduled_at":`...)
	b = appendJSONTime(b, rep.ScheduledAt)
	b = append(b, `,"started_at":`...)
	b = appendJSONTime(b, rep.StartedAt)
	b = append(b, `,"ended_at":`...)
	b = appendJSONTime(b, rep.EndedAt)
	b = append(b, `,"duration_ms":`...)
	b = strconv.AppendInt(b, rep.DurationMS, 10)
	b = append(b, `,"result":`...)
	b = appendJSONString(b, string(rep.Result))
	b = append(b, `,"attempt":`...)
	b = strconv.AppendInt(b, int64(rep.Attempt), 10)
	b = append(b, `,"http_status":`...)
	b = strconv.AppendInt(b, int64(rep.HTTPStatus), 10)
	b = append(b, `,"exit_code":`...)
	if rep.ExitCode == nil {
		b = append(b, "null"...)
	} else {
		b = strconv.AppendInt(b, int64(*rep.ExitCode), 10)
	}
	b = append(b, `,"output":`...)
	b = appendJSONString(b, rep.Output)
	b = append(b, `,"manual":`...)
	b = strconv.AppendBool(b, rep.Manual)
	if rep.BinaryOutput {
		b = append(b, `,"binary_output":true`...)
	}
	if rep.Covers != 0 {
		b = append(b, `,"covers":`...)
		b = strconv.AppendInt(b, int64(rep.Covers), 10)
	}
	if rep.TaskVersion != 0 {
		b = append(b, `,"task_version":`...)
		b = strconv.AppendInt(b, int64(rep.TaskVersion), 10)
	}
	if rep.WorkflowRun != "" {
		b = append(b, `,"workflow_run":`...)
		b = appendJSONString(b, rep.WorkflowRun)
	}
	if rep.WorkflowStep != "" {
		b = append(b, `,"workflow_step":`...)
		b = appendJSONString(b, rep.WorkflowStep)
	}
	return append(b, '}'), nil
}

// jsonTime reports whether time.Time.MarshalJSON accepts t.
func jsonTime(t time.Time) bool { y := t.Year(); return y >= 0 && y <= 9999 }

func appendJSONTime(b []byte, t time.Time) []byte {
	b = append(b, '"')
	b = t.AppendFormat(b, time.RFC3339Nano)
	return append(b, '"')
}

const hexDigits = "0123456789abcdef"

// appendJSONString appends s, valid UTF-8, as a JSON string. Like
// encoding/json it escapes <, > and & and U+2028/U+2029 too, so the bytes are
// the same.
func appendJSONString(b []byte, s string) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' && c != '<' && c != '>' && c != '&' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			case '\b':
				b = append(b, '\\', 'b')
			case '\f':
				b = append(b, '\\', 'f')
			default:
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xF])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == '\u2028' || r == '\u2029' {
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hexDigits[r&0xF])
			i += size
			start = i
			continue
		}
		i += size
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}
