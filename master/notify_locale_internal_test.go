package master

import (
	"strings"
	"testing"
	"time"

	"github.com/schedulemaster-go/schedulemaster/locale"
	"github.com/schedulemaster-go/schedulemaster/protocol"
	"github.com/schedulemaster-go/schedulemaster/store"
)

// A failure mail reads in the keeper's language: English as before, or
// Chinese, every field filled in.
func TestFailureMailInTheKeepersLanguage(t *testing.T) {
	at := time.Date(2026, 11, 26, 2, 30, 0, 0, time.UTC)
	code := 3
	tk := &Task{TaskDef: protocol.TaskDef{ID: "t-1", Title: "nightly"}}
	r := store.Run{Node: "w1", Result: "failed", Attempt: 2, ScheduledAt: at, StartedAt: at, DurationMS: 1500, ExitCode: &code, Output: "boom"}
	subject, body := failureMail(locale.New(locale.EN, nil), tk, r, "https://sm.example/runs/r1")
	if subject != "[ScheduleMaster] failed: nightly on w1" {
		t.Errorf("English subject %q", subject)
	}
	for _, want := range []string{"Task:      nightly (t-1)\n", "Result:    failed (attempt 2)\n", "Exit code: 3\n", "Run:       https://sm.example/runs/r1\n", "\nOutput (end):\nboom\n"} {
		if !strings.Contains(body, want) {
			t.Errorf("English body lacks %q:\n%s", want, body)
		}
	}
	subject, body = failureMail(locale.New(locale.ZH, nil), tk, r, "")
	if subject != "[ScheduleMaster] 失败：nightly（节点 w1）" {
		t.Errorf("Chinese subject %q", subject)
	}
	for _, want := range []string{"任务：    nightly（t-1）\n", "结果：    失败（第 2 次尝试）\n", "退出码：  3\n", "输出（末尾）：\nboom\n"} {
		if !strings.Contains(body, want) {
			t.Errorf("Chinese body lacks %q:\n%s", want, body)
		}
	}
	if strings.Contains(body, "{{") || strings.Contains(body, "<no value>") {
		t.Errorf("unfilled placeholder:\n%s", body)
	}
}
