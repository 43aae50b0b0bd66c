package worker

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/schedulemaster-go/schedulemaster/protocol"
	"github.com/schedulemaster-go/schedulemaster/store/storetest/testutil"
)

// BenchmarkScheduledFire measures naming the fire a cron run belongs to, done
// once per run before the task starts (part of the trigger lag, SPEC 9).
func BenchmarkScheduledFire(b *testing.B) {
	for _, expr := range []string{"* * * * * *", "*/5 * * * * *", "0 * * * * *", "0 0 * * *"} {
		b.Run(expr, func(b *testing.B) {
			sch, err := protocol.ParseCron(expr)
			if err != nil {
				b.Fatal(err)
			}
			tj := &taskJob{spec: protocol.TaskSpec{TaskDef: protocol.TaskDef{Schedule: protocol.Schedule{Kind: protocol.ScheduleCron, Cron: expr}}}, cron: sch}
			now := time.Date(2026, 11, 22, 10, 0, 0, 1_500_000, time.UTC)
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				_ = tj.scheduledFire(now)
			}
		})
	}
}

// BenchmarkFireHTTP measures one fire of a single-executor HTTP task end to
// end: the fire named, the run admitted, the GET to a loopback target on a
// kept-alive connection, and the run report queued (SPEC 9: no per-fire waste).
func BenchmarkFireHTTP(b *testing.B) {
	target := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, _ *http.Request) { rw.WriteHeader(http.StatusNoContent) }))
	defer target.Close()
	ctx, cancel := context.WithCancel(context.Background())
	rep := newReporter("", 0, testutil.Discard(), func(_ context.Context, runs []protocol.RunReport) (protocol.RunsResponse, error) {
		return protocol.RunsResponse{Accepted: len(runs)}, nil
	})
	go rep.run(ctx)
	defer func() { cancel(); <-rep.done }()
	tr := http.DefaultTransport.(*http.Transport).Clone()
	defer tr.CloseIdleConnections()
	r := &runner{
		log: testutil.Discard(), node: func() string { return "w1" }, limit: newLimiter(100),
		http: &http.Client{Transport: tr}, jobs: map[string]*taskJob{}, ctx: ctx, reports: rep, backoff: time.Second,
		claim: func(context.Context, string, time.Time) (bool, error) { return true, nil },
	}
	var err error
	if r.sched, err = newTestScheduler(); err != nil {
		b.Fatal(err)
	}
	defer r.sched.Shutdown()
	spec := protocol.TaskSpec{TaskDef: protocol.TaskDef{ID: "t1", Title: "t", Type: protocol.TaskHTTP,
		Schedule: protocol.Schedule{Kind: protocol.ScheduleCron, Cron: "* * * * * *"},
		HTTP:     &protocol.HTTPSpec{URL: target.URL + "/t/t1"}}, Executors: 1}
	if err := r.start(spec); err != nil {
		b.Fatal(err)
	}
	tj := r.job("t1")
	r.fire(tj) // the connection is dialled once, outside the measurement
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		r.fire(tj)
	}
}
