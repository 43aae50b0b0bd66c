package worker

import (
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/schedulemaster-go/schedulemaster/protocol"
	"github.com/schedulemaster-go/schedulemaster/store/storetest/testutil"
	"github.com/schedulemaster-go/schedulemaster/worker/executor/executortest"
)

// sqlSpec is a sql task with two retries on a connection to addr.
func sqlSpec(id, addr, secret string) protocol.TaskSpec {
	return protocol.TaskSpec{TaskDef: protocol.TaskDef{ID: id, Title: "t", Type: protocol.TaskSQL, Retries: 2,
		Timeout:  protocol.Duration(10 * time.Second),
		Schedule: protocol.Schedule{Kind: protocol.ScheduleInterval, Every: protocol.Duration(time.Hour)},
		SQL:      &protocol.SQLSpec{Connection: "db", Statement: "UPDATE t SET v = 1"}},
		Executors: 1,
		Connection: &protocol.ConnectionSpec{Name: "db", Kind: protocol.ConnPostgres, Address: addr, Database: "app",
			User: "app", Secret: secret}}
}

func TestExecutorSQLThroughTheRunnerRetriesADownServer(t *testing.T) {
	t.Parallel()
	log := testutil.Discard()
	execs, err := newRegistry(http.DefaultClient, false, []string{protocol.TaskSQL}, log)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = execs.Close() })
	r, sink := newLiveRunner(t, time.Hour)
	r.execs = execs
	addr := executortest.ClosedPort(t)
	const secret = "runner-sql-secret-77"
	r.runOnce(sqlSpec("sql1", addr, secret), nil)
	var reps []protocol.RunReport
	waitFor(t, "3 attempts", func() bool {
		reps = reps[:0]
		for _, rep := range sink.all() {
			if rep.TaskID == "sql1" && rep.Result != protocol.ResultRunning {
				reps = append(reps, rep)
			}
		}
		return len(reps) >= 3
	})
	time.Sleep(200 * time.Millisecond) // longer than the retries' backoff (50 ms): no fourth attempt
	for _, rep := range sink.all() {
		if rep.TaskID == "sql1" && rep.Attempt > 3 {
			t.Fatalf("attempt %d after Retries: 2", rep.Attempt)
		}
	}
	for i, rep := range reps {
		if rep.Result != protocol.ResultFailed || rep.Attempt != i+1 ||
			!strings.Contains(rep.Output, "connect to postgres "+addr) || !strings.Contains(rep.Output, "connection refused") {
			t.Fatalf("attempt %d: %s %q", rep.Attempt, rep.Result, rep.Output)
		}
		executortest.NoSecret(t, rep.Output, secret)
	}
}

func TestExecutorSQLRefusedByARunnerThatDoesNotAllowIt(t *testing.T) {
	t.Parallel()
	r, sink := newLiveRunner(t, time.Hour) // HTTP and shell only
	spec := sqlSpec("sql2", "127.0.0.1:1", "runner-sql-secret-88")
	if _, err := r.startSpec(spec); !errors.Is(err, ErrTypeRefused) || !strings.Contains(err.Error(), "--allow-types sql") {
		t.Fatalf("startSpec of a sql task: %v", err)
	}
	r.runOnce(spec, nil)
	waitFor(t, "the refused run's report", func() bool {
		for _, rep := range sink.all() {
			if rep.TaskID == "sql2" && rep.Result == protocol.ResultFailed {
				if !strings.Contains(rep.Output, "does not run sql tasks") {
					t.Fatalf("refused run's output %q", rep.Output)
				}
				return true
			}
		}
		return false
	})
}
