package worker

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"
	_ "time/tzdata" // as the binary: the same zones on every host

	"github.com/go-co-op/gocron/v2"
	"github.com/jonboulle/clockwork"

	"github.com/schedulemaster-go/schedulemaster/protocol"
	"github.com/schedulemaster-go/schedulemaster/store/storetest/testutil"
)

// The worker's gocron job runs the schedule its protocol.Plan shows, in the
// task's time zone and with its DST rules, and names each fire by its real
// instant in UTC.
func TestRunnerCronTimezoneDST(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name, clock string
		want        []string
	}{
		{"spring-forward", "2026-03-27T12:00:00Z", []string{"2026-03-28T01:30:00Z", "2026-03-29T01:00:00Z", "2026-03-30T00:30:00Z"}},
		{"fall-back", "2026-10-23T12:00:00Z", []string{"2026-10-24T00:30:00Z", "2026-10-25T00:30:00Z", "2026-10-26T01:30:00Z"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			start, _ := time.Parse(time.RFC3339, c.clock)
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
			spec := protocol.TaskSpec{TaskDef: protocol.TaskDef{ID: "tz", Title: "t", Type: protocol.TaskHTTP,
				Schedule: protocol.Schedule{Kind: protocol.ScheduleCron, Cron: "30 2 * * *"}, Timezone: "Europe/Berlin",
				HTTP: &protocol.HTTPSpec{URL: "http://127.0.0.1:1/"}}, Executors: 1}
			if err := r.start(spec); err != nil {
				t.Fatal(err)
			}
			sched.Start()
			var job gocron.Job
			for _, j := range sched.Jobs() {
				if j.ID() == r.jobs["tz"].jobID {
					job = j
				}
			}
			if job == nil {
				t.Fatal("no gocron job for the task")
			}
			runs, err := job.NextRuns(len(c.want))
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, run := range runs {
				got = append(got, run.UTC().Format(time.RFC3339))
			}
			if strings.Join(got, " ") != strings.Join(c.want, " ") {
				t.Errorf("gocron next runs = %v, want %v", got, c.want)
			}
			// A timer firing a little late still names the fire by its instant.
			for _, w := range c.want {
				at, _ := time.Parse(time.RFC3339, w)
				if fire := r.jobs["tz"].scheduledFire(at.Add(150 * time.Millisecond)); !fire.Equal(at) || fire.Location() != time.UTC {
					t.Errorf("fire at %s named %s, want %s", at, fire, w)
				}
			}
		})
	}
}

// gocron runs the fires of the task's plan, no more and no fewer: not at a
// start_at that is no fire (gocron's own first run is at its start time), and
// at an end_at that is one (gocron runs nothing at its stop time); a cron
// @every at the multiples of its interval, as every executor names them.
func TestGocronRunsThePlan(t *testing.T) {
	t.Parallel()
	// gocron's clock is two days ahead of the wall clock the task is
	// validated and scheduled by, on a whole hour.
	base := time.Now().UTC().Truncate(time.Hour).Add(48 * time.Hour)
	ptr := func(d time.Duration) *time.Time { v := base.Add(d); return &v }
	for _, c := range []struct {
		name       string
		sch        protocol.Schedule
		tz         string
		start, end *time.Time
	}{
		{"cron, start_at between fires", protocol.Schedule{Kind: protocol.ScheduleCron, Cron: "0 * * * *"}, "", ptr(90 * time.Minute), ptr(5 * time.Hour)},
		{"cron, start_at on a fire", protocol.Schedule{Kind: protocol.ScheduleCron, Cron: "0 * * * *"}, "", ptr(2 * time.Hour), ptr(4 * time.Hour)},
		{"cron with seconds in a zone", protocol.Schedule{Kind: protocol.ScheduleCron, Cron: "*/20 30 * * * *"}, "Australia/Lord_Howe", ptr(10 * time.Minute), ptr(2*time.Hour + 30*time.Minute + 40*time.Second)},
		{"cron every", protocol.Schedule{Kind: protocol.ScheduleCron, Cron: "@every 90s"}, "Europe/Berlin", nil, ptr(12 * time.Minute)},
		{"cron without window", protocol.Schedule{Kind: protocol.ScheduleCron, Cron: "15 2 * * *"}, "America/New_York", nil, nil},
		{"interval", protocol.Schedule{Kind: protocol.ScheduleInterval, Every: protocol.Duration(time.Hour)}, "", ptr(30 * time.Minute), ptr(4 * time.Hour)},
		{"once at end_at", protocol.Schedule{Kind: protocol.ScheduleOnce, At: ptr(3 * time.Hour)}, "", nil, ptr(3 * time.Hour)},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			sched, err := gocron.NewScheduler(gocron.WithLocation(time.UTC), gocron.WithClock(clockwork.NewFakeClockAt(base)))
			if err != nil {
				t.Fatal(err)
			}
			defer sched.Shutdown()
			r := &runner{
				log: testutil.Discard(), node: func() string { return "w1" }, limit: newLimiter(1), sched: sched,
				http: http.DefaultClient, jobs: map[string]*taskJob{}, ctx: context.Background(),
				claim: func(context.Context, string, time.Time, runID) (bool, error) { return false, nil },
			}
			spec := protocol.TaskSpec{TaskDef: protocol.TaskDef{ID: "p", Title: "t", Type: protocol.TaskHTTP,
				Schedule: c.sch, Timezone: c.tz, StartAt: c.start, EndAt: c.end,
				HTTP: &protocol.HTTPSpec{URL: "http://127.0.0.1:1/"}}, Executors: 1}
			if err := r.start(spec); err != nil {
				t.Fatal(err)
			}
			sched.Start()
			var job gocron.Job
			for _, j := range sched.Jobs() {
				if j.ID() == r.jobs["p"].jobID {
					job = j
				}
			}
			if job == nil {
				t.Fatal("no gocron job for the task")
			}
			n := 8
			if c.sch.Kind == protocol.ScheduleOnce {
				n = 1 // NextRuns lists a one-time job's run, then zeros
			}
			runs, err := job.NextRuns(n)
			if err != nil {
				t.Fatal(err)
			}
			plan := r.jobs["p"].plan
			want := plan.Preview(base, n)
			var got, wantS []string
			for _, run := range runs {
				got = append(got, run.UTC().Format(time.RFC3339))
				if !plan.IsFire(run) {
					t.Errorf("gocron runs at %s, no fire of the plan", run.UTC().Format(time.RFC3339))
				}
			}
			for _, f := range want {
				wantS = append(wantS, f.Format(time.RFC3339))
			}
			if len(want) == 0 || strings.Join(got, " ") != strings.Join(wantS, " ") {
				t.Errorf("gocron next runs = %v, want the plan's %v", got, wantS)
			}
		})
	}
}
