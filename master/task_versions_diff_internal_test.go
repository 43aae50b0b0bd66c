package master

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/schedulemaster-go/schedulemaster/protocol"
)

// TestTaskVersionDiffEveryFieldType: a diff names each changed field of
// every kind (text, schedule, URL, headers, body, shell command, args and
// environment, params, numbers, lists) with both values, and a secret
// (secret param, secret header, URL password) only as changed.
func TestTaskVersionDiffEveryFieldType(t *testing.T) {
	t.Parallel()
	const secrets = "secret-value-a secret-value-b hdr-secret-a hdr-secret-b pw-a pw-b"
	a := &VersionDef{TaskDef: protocol.TaskDef{Title: "ping", Type: protocol.TaskHTTP,
		Schedule: protocol.Schedule{Kind: protocol.ScheduleInterval, Every: protocol.Duration(time.Minute)},
		HTTP: &protocol.HTTPSpec{Method: "GET", URL: "https://ops:pw-a@billing.example/v1", Body: "{}",
			Headers: map[string]string{"X-Plain": "one", "Authorization": "Bearer hdr-secret-a"}},
		Params: map[string]string{"region": "eu", "token": "secret-value-a"}, SecretParams: []string{"token"},
		Timeout: protocol.Duration(30 * time.Second), Retries: 1},
		Executors: []string{"w1"}, Selector: "pool=a"}
	b := &VersionDef{TaskDef: protocol.TaskDef{Title: "ping billing", Type: protocol.TaskHTTP,
		Schedule: protocol.Schedule{Kind: protocol.ScheduleCron, Cron: "*/5 * * * *"},
		HTTP: &protocol.HTTPSpec{Method: "POST", URL: "https://ops:pw-b@billing.example/v2", Body: `{"a":1}`,
			Headers: map[string]string{"X-Plain": "two", "Authorization": "Bearer hdr-secret-b"}},
		Params: map[string]string{"region": "us", "token": "secret-value-b"}, SecretParams: []string{"token"},
		Timeout: protocol.Duration(time.Minute), Retries: 3},
		Executors: []string{"w1", "w2"}, Selector: "pool=b"}
	changes, err := diffDefs(a, b)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]FieldChange{}
	for _, c := range changes {
		got[c.Field] = c
	}
	for field, want := range map[string][2]string{
		"title": {"ping", "ping billing"}, "schedule.kind": {"interval", "cron"}, "schedule.cron": {"", "*/5 * * * *"},
		"http.method": {"GET", "POST"}, "http.url": {"https://ops:" + protocol.SecretMask + "@billing.example/v1", "https://ops:" + protocol.SecretMask + "@billing.example/v2"},
		"http.body": {"{}", `{"a":1}`}, "http.headers.X-Plain": {"one", "two"}, "params.region": {"eu", "us"},
		"retries": {"1", "3"}, "executors": {`["w1"]`, `["w1","w2"]`}, "selector": {"pool=a", "pool=b"},
	} {
		c, ok := got[field]
		if !ok || c.Secret || c.From != want[0] || c.To != want[1] {
			t.Errorf("%s: %+v, want %q → %q", field, c, want[0], want[1])
		}
	}
	for _, field := range []string{"params.token", "http.headers.Authorization"} {
		if c := got[field]; !c.Secret || c.From != "" || c.To != "" {
			t.Errorf("%s: %+v, want a secret shown as changed", field, c)
		}
	}
	if _, ok := got["timeout"]; !ok {
		t.Error("the timeout's change is not named")
	}
	// A password alone changing is a secret change of the URL.
	a2, b2 := *a, *a
	h1, h2 := *a.HTTP, *a.HTTP
	h2.URL = strings.Replace(h1.URL, "pw-a", "pw-b", 1)
	a2.HTTP, b2.HTTP = &h1, &h2
	only, _ := diffDefs(&a2, &b2)
	if len(only) != 1 || only[0].Field != "http.url password" || !only[0].Secret {
		t.Errorf("a URL password change: %+v", only)
	}
	// A shell task: command, args and environment.
	s1 := &VersionDef{TaskDef: protocol.TaskDef{Title: "sh", Type: protocol.TaskShell,
		Shell: &protocol.ShellSpec{Command: "backup", Args: []string{"-a"}, Env: map[string]string{"MODE": "full"}}}}
	s2 := &VersionDef{TaskDef: protocol.TaskDef{Title: "sh", Type: protocol.TaskShell,
		Shell: &protocol.ShellSpec{Command: "backup2", Args: []string{"-a", "-b"}, Env: map[string]string{"MODE": "fast"}}}}
	sh, _ := diffDefs(s1, s2)
	var names []string
	for _, c := range sh {
		names = append(names, c.Field)
	}
	if strings.Join(names, " ") != "shell.args shell.command shell.env.MODE" {
		t.Errorf("shell diff fields: %v", names)
	}
	all, _ := json.Marshal(append(changes, only...))
	for _, s := range strings.Fields(secrets) {
		if strings.Contains(string(all), s) {
			t.Fatalf("a diff shows the secret %q: %s", s, all)
		}
	}
}
