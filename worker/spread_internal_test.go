package worker

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/go-co-op/gocron/v2"
	"github.com/jonboulle/clockwork"

	"github.com/schedulemaster-go/schedulemaster/protocol"
	"github.com/schedulemaster-go/schedulemaster/store/storetest/testutil"
)

// TestRunnerSpreadFiresAsThePlanSays: the worker's gocron jobs of spread
// intervals and H crons fire at the times protocol.Plan names, the plan the
// master's preview, claims and next run use; tasks with different offsets
// get their own timers, tasks with the same share one.
func TestRunnerSpreadFiresAsThePlanSays(t *testing.T) {
	t.Parallel()
	start := time.Now() // the runner reads the real clock for the first fire
	sched, err := gocron.NewScheduler(gocron.WithLocation(time.UTC), gocron.WithClock(clockwork.NewFakeClockAt(start)))
	if err != nil {
		t.Fatal(err)
	}
	defer sched.Shutdown()
	r := &runner{
		log: testutil.Discard(), node: func() string { return "w1" }, limit: newLimiter(1), sched: sched,
		http: http.DefaultClient, jobs: map[string]*taskJob{}, ctx: context.Background(),
		claim: func(context.Context, string, time.Time, runID) (bool, error) { return false, nil },
	}
	mk := func(id string, s protocol.Schedule) protocol.TaskSpec {
		return protocol.TaskSpec{TaskDef: protocol.TaskDef{ID: id, Title: id, Type: protocol.TaskHTTP, Schedule: s,
			HTTP: &protocol.HTTPSpec{URL: "http://127.0.0.1:1/"}}, Executors: 1}
	}
	hourly := protocol.Duration(time.Hour)
	specs := []protocol.TaskSpec{
		mk("spread-a", protocol.Schedule{Kind: protocol.ScheduleInterval, Every: hourly, Align: protocol.AlignSpread}),
		mk("spread-b", protocol.Schedule{Kind: protocol.ScheduleInterval, Every: hourly, Align: protocol.AlignSpread}),
		mk("epoch-a", protocol.Schedule{Kind: protocol.ScheduleInterval, Every: hourly, Align: protocol.AlignEpoch}),
		mk("epoch-b", protocol.Schedule{Kind: protocol.ScheduleInterval, Every: hourly}),
		mk("hashed-a", protocol.Schedule{Kind: protocol.ScheduleCron, Cron: "H H(8-17) * * *"}),
		mk("hashed-b", protocol.Schedule{Kind: protocol.ScheduleCron, Cron: "H H(8-17) * * *"}),
	}
	for _, s := range specs {
		if err := r.start(s); err != nil {
			t.Fatal(err)
		}
	}
	sched.Start()
	jobs := map[string]gocron.Job{}
	for _, j := range sched.Jobs() {
		jobs[j.ID().String()] = j
	}
	for _, s := range specs {
		tj := r.jobs[s.ID]
		def := s.TaskDef
		def.Normalize()
		plan, err := protocol.NewPlan(&def)
		if err != nil {
			t.Fatal(err)
		}
		want := plan.Preview(start, 3)
		got, err := jobs[tj.jobID.String()].NextRuns(3)
		if err != nil {
			t.Fatal(err)
		}
		for i := range want {
			if !got[i].Equal(want[i]) {
				t.Fatalf("%s: gocron fires %v, the plan says %v", s.ID, got, want)
			}
			if fire := tj.scheduledFire(want[i].Add(120 * time.Millisecond)); !fire.Equal(want[i]) {
				t.Fatalf("%s: a timer at %s names fire %s", s.ID, want[i], fire)
			}
		}
	}
	if r.jobs["epoch-a"].group != r.jobs["epoch-b"].group {
		t.Fatal("epoch and unset alignment are the same schedule, yet got two timers")
	}
	pa, pb := protocol.IntervalPhase("spread-a", time.Hour), protocol.IntervalPhase("spread-b", time.Hour)
	if (pa == pb) != (r.jobs["spread-a"].group == r.jobs["spread-b"].group) {
		t.Fatalf("phases %s and %s, shared timer %v", pa, pb, r.jobs["spread-a"].group == r.jobs["spread-b"].group)
	}
	ea, _ := protocol.ExpandHashed("H H(8-17) * * *", "hashed-a")
	eb, _ := protocol.ExpandHashed("H H(8-17) * * *", "hashed-b")
	if (ea == eb) != (r.jobs["hashed-a"].group == r.jobs["hashed-b"].group) {
		t.Fatalf("H crons %q and %q, shared timer %v", ea, eb, r.jobs["hashed-a"].group == r.jobs["hashed-b"].group)
	}
}
