package main

import (
	"bytes"
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/schedulemaster-go/schedulemaster/store/storetest"
)

// TestMain lets the test binary play smbench's child roles (the lag peer).
func TestMain(m *testing.M) {
	if runRole() {
		return
	}
	os.Exit(m.Run())
}

// tlog writes progress lines through t.Log.
type tlog struct{ t *testing.T }

func (w tlog) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// TestShortModeRunsEveryScenario runs smbench -short end to end: every
// scenario must complete and print its rows. Speed is not judged here
// (benchmarks are never timed assertions); -short turns every verdict into
// INFO. MySQL rows run when SM_TEST_MYSQL_DSN is set (required with
// SM_TEST_REQUIRE_ALL=1).
func TestShortModeRunsEveryScenario(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	var out bytes.Buffer
	o := options{Short: true, MySQL: os.Getenv(storetest.EnvMySQLDSN), Progress: tlog{t}}
	rows, err := run(ctx, o, &out)
	t.Log("\n" + out.String())
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]int{}
	for _, r := range rows {
		seen[r.Group]++
		if !strings.Contains(out.String(), r.Scenario) || !strings.Contains(out.String(), r.Figure) {
			t.Errorf("row %q is not in the printed table", r.Scenario)
		}
		switch r.Verdict {
		case Info:
		case Skip:
			if strings.Contains(r.Scenario, "MySQL") && storetest.RequireAll() {
				t.Errorf("%s: skipped although %s=1: %s", r.Scenario, storetest.EnvRequireAll, r.Figure)
			}
		default:
			t.Errorf("%s: verdict %s in -short mode: %s", r.Scenario, r.Verdict, r.Figure)
		}
	}
	for _, s := range scenarios() {
		if seen[s.name] == 0 {
			t.Errorf("scenario %s printed no row", s.name)
		}
	}
	if !strings.Contains(out.String(), "verdict") {
		t.Error("no table header printed")
	}
}
