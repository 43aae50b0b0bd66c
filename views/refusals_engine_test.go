package views

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/schedulemaster-go/schedulemaster/locale"
	"github.com/schedulemaster-go/schedulemaster/protocol"
)

// TestProtocolRefusalsAreSaidInChinese feeds the protocol's own validation
// hostile input and checks that every sentence it answers with is one the
// Chinese console says in Chinese, and that the English console shows it
// unchanged.
func TestProtocolRefusalsAreSaidInChinese(t *testing.T) {
	missing := func(lang, id string) { t.Errorf("%s lacks message %s", lang, id) }
	en, zh := locale.New(locale.EN, missing), locale.New(locale.ZH, missing)
	now := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	past, later := now.Add(-time.Hour), now.Add(time.Hour)
	var msgs []string
	validate := func(d protocol.TaskDef) {
		t.Helper()
		var fe protocol.FieldErrors
		if err := d.Validate(now); !errors.As(err, &fe) {
			t.Fatalf("Validate(%+v) = %v, want field errors", d, err)
		}
		for _, m := range fe {
			msgs = append(msgs, m)
		}
	}
	validate(protocol.TaskDef{Key: "-bad", Title: strings.Repeat("x", 300), Description: strings.Repeat("d", 4001),
		Timezone: "Mars/Olympus", Type: "ftp", Overlap: "drop", Misfire: "all", AtCapacity: "drop", Routing: "random",
		Schedule: protocol.Schedule{Kind: "weekly", Align: "middle"}, Timeout: protocol.Duration(time.Millisecond),
		Retries: 99, Params: map[string]string{"1x": "v"}, StartAt: &later, EndAt: &past})
	validate(protocol.TaskDef{Type: protocol.TaskHTTP, Schedule: protocol.Schedule{Kind: protocol.ScheduleCron, Cron: "* * *"},
		HTTP:  &protocol.HTTPSpec{Method: "FETCH", URL: "example.com/x", Headers: map[string]string{"X Bad": "v"}},
		Shell: &protocol.ShellSpec{Command: "true"}, Routing: protocol.RoutingHash, Timezone: "Local"})
	validate(protocol.TaskDef{Title: "t", Type: protocol.TaskShell, Schedule: protocol.Schedule{Kind: protocol.ScheduleCron},
		Shell: &protocol.ShellSpec{Env: map[string]string{"1PATH": "x"}}, HTTP: &protocol.HTTPSpec{}})
	validate(protocol.TaskDef{Title: "t", Type: protocol.TaskHTTP, Schedule: protocol.Schedule{Kind: protocol.ScheduleOnce, At: &past},
		HTTP:   &protocol.HTTPSpec{URL: "https://example.com/{{A}}", Headers: map[string]string{"X-Id": "a\nb"}},
		Params: map[string]string{"A": "a b"}})
	validate(protocol.TaskDef{Title: "t", Type: protocol.TaskHTTP, HTTP: &protocol.HTTPSpec{URL: "https://example.com"},
		Schedule: protocol.Schedule{Kind: protocol.ScheduleInterval, Every: protocol.Duration(1500 * time.Millisecond)}})
	validate(protocol.TaskDef{Title: "t", Type: protocol.TaskHTTP, HTTP: &protocol.HTTPSpec{URL: "https://example.com"},
		Schedule: protocol.Schedule{Kind: protocol.ScheduleCron, Cron: "0 0 * * *", Align: "spread"}, StartAt: &past, EndAt: &later})
	// Cron sentences, one per way a field can be wrong.
	for _, c := range []string{"61 * * * *", "0 0 * * fooday", "x * * * *", "30-10 * * * *", "*/0 * * * *", "1-2-3 * * * *",
		"every tuesday", "@fortnightly", "0 0 0 * *", "0 0 * 13 *", "60 * * * * *",
		"H(0-99) * * * *", "H(9-3) * * * *", "H/0 * * * *", "H/100 * * * *", "H(1-5 * * * *", "Hx * * * *", "H(a-b) * * * *", "H(1) * * * *", "H H H"} {
		validate(protocol.TaskDef{Title: "t", Type: protocol.TaskShell, Shell: &protocol.ShellSpec{Command: "true"},
			Schedule: protocol.Schedule{Kind: protocol.ScheduleCron, Cron: c}})
	}
	for _, s := range []string{"pool=", "a=b,a=c", "Bad_=x", "k=-v-", "ex_ample/k=v"} {
		if _, err := protocol.ParseLabels(s); err != nil {
			msgs = append(msgs, err.Error())
		}
	}
	for _, s := range []string{"zone in (a", "zone exists", "=x", "zone in (,)", "zone=eu zone", "zone in a"} {
		if _, err := protocol.ParseSelector(s); err != nil {
			msgs = append(msgs, err.Error())
		}
	}
	for _, m := range []string{protocol.ValidateName(""), protocol.ValidateName("-w"), protocol.ValidateHost("10.0.0.5"),
		protocol.ValidateHost(":80"), protocol.ValidateHost("h:99999"), protocol.ValidateHost("bad_host!:80"),
		protocol.CheckEvery(0), protocol.CheckEvery(time.Millisecond), protocol.CheckEvery(1500 * time.Millisecond)} {
		if m != "" {
			msgs = append(msgs, m)
		}
	}
	if len(msgs) < 40 {
		t.Fatalf("only %d refusals collected: %q", len(msgs), msgs)
	}
	for _, m := range msgs {
		if got := RefusalIn(en, m); got != m {
			t.Errorf("English page changed %q into %q", m, got)
		}
		if got := refusalIn(en, m, 0); got != m {
			t.Errorf("English catalog renders %q as %q", m, got)
		}
		got := RefusalIn(zh, m)
		if got == m {
			t.Errorf("%q stays English on a Chinese page", m)
		}
		t.Logf("%s\n\t%s", m, got)
	}
}
