package master_test

import (
	"errors"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/uptrace/bun"

	"github.com/schedulemaster-go/schedulemaster/master"
	"github.com/schedulemaster-go/schedulemaster/protocol"
	"github.com/schedulemaster-go/schedulemaster/store"
	"github.com/schedulemaster-go/schedulemaster/store/storetest"
)

// scheduledEnv is a started master with one reporting worker and a step
// target.
func scheduledEnv(t *testing.T) (*env, *stepTarget) {
	t.Helper()
	e := newEnv(t, storetest.OpenSQLite(t))
	url := e.serveMaster()
	if err := e.m.Start(e.ctx); err != nil {
		t.Fatal(err)
	}
	reportingWorkers(e, url, "w1")
	return e, newStepTarget(t)
}

// everySecond is a one-step workflow of task fired every second.
func everySecond(title, task, overlap string) master.WorkflowInput {
	return master.WorkflowInput{WorkflowDef: master.WorkflowDef{Title: title, Overlap: overlap,
		Schedule: &protocol.Schedule{Kind: protocol.ScheduleInterval, Every: protocol.Duration(time.Second), Align: protocol.AlignEpoch},
		Steps:    []master.WorkflowStep{{Name: "only", Task: task}}}}
}

// rawParam is the t= of a request's query as sent: a time's "+01:00" is
// not a space.
func rawParam(r *http.Request) string {
	v, _ := url.PathUnescape(strings.TrimPrefix(r.URL.RawQuery, "t="))
	return v
}

// waitRuns polls a workflow's runs until ok says they are enough.
func waitRuns(t *testing.T, e *env, id string, ok func([]master.WorkflowRun) bool) []master.WorkflowRun {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		runs, err := e.m.Workflows().Runs(e.ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if ok(runs) {
			return runs
		}
		if time.Now().After(deadline) {
			t.Fatalf("workflow %s: runs still not as wanted after 30s: %+v", id, runs)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func countStatus(runs []master.WorkflowRun, status string) int {
	n := 0
	for _, r := range runs {
		if r.Status == status {
			n++
		}
	}
	return n
}

// TestWorkflowScheduleFiresEachFireOnce: a workflow on an interval starts
// one run per fire, each with its fire as its logical time; paused, its
// schedule has no next fire due, and resumed it goes on from now.
func TestWorkflowScheduleFiresEachFireOnce(t *testing.T) {
	t.Parallel()
	e, target := scheduledEnv(t)
	w, err := e.m.Workflows().Create(e.ctx, everySecond("ticker", stepTask(t, e, target, "/tick"), ""))
	if err != nil {
		t.Fatal(err)
	}
	if w.NextFire == nil || w.Overlap != protocol.OverlapSkip {
		t.Fatalf("a scheduled workflow has its next fire and overlap skip by default: %+v", w)
	}
	runs := waitRuns(t, e, w.ID, func(r []master.WorkflowRun) bool { return countStatus(r, store.WorkflowSuccess) >= 3 })
	seen := map[time.Time]bool{}
	for _, r := range runs {
		if r.Trigger != master.TriggerSchedule {
			t.Errorf("run %s trigger %q, want schedule", r.ID, r.Trigger)
		}
		if seen[r.LogicalTime] {
			t.Errorf("fire %s started two runs", r.LogicalTime)
		}
		seen[r.LogicalTime] = true
		if !r.LogicalTime.Equal(r.LogicalTime.Truncate(time.Second)) {
			t.Errorf("logical time %s is not the fire", r.LogicalTime)
		}
	}
	if err := e.m.Workflows().Pause(e.ctx, w.ID); err != nil {
		t.Fatal(err)
	}
	if err := e.m.Workflows().Pause(e.ctx, w.ID); master.KindOf(err) != master.KindState {
		t.Errorf("pausing twice: %v, want a state error", err)
	}
	before := time.Now()
	if err := e.m.Workflows().Resume(e.ctx, w.ID); err != nil {
		t.Fatal(err)
	}
	got, err := e.m.Workflows().Get(e.ctx, w.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.Paused || got.NextFire == nil || !got.NextFire.After(before) {
		t.Errorf("resumed: paused %v, next fire %v, want one after %s", got.Paused, got.NextFire, before)
	}
}

// TestWorkflowOverlapQueueWaitsAndSkips: fires every second of a workflow
// whose run takes longer: with overlap queue one fire waits and starts when
// the run ends, the others are recorded skipped, and no two runs overlap.
func TestWorkflowOverlapQueueWaitsAndSkips(t *testing.T) {
	t.Parallel()
	e, target := scheduledEnv(t)
	target.on("/slow", func(w http.ResponseWriter, r *http.Request) { time.Sleep(2500 * time.Millisecond) })
	w, err := e.m.Workflows().Create(e.ctx, everySecond("slow", stepTask(t, e, target, "/slow"), protocol.OverlapQueue))
	if err != nil {
		t.Fatal(err)
	}
	runs := waitRuns(t, e, w.ID, func(r []master.WorkflowRun) bool {
		return countStatus(r, store.WorkflowSuccess) >= 2 && countStatus(r, store.WorkflowSkipped) >= 1
	})
	if err := e.m.Workflows().Pause(e.ctx, w.ID); err != nil {
		t.Fatal(err)
	}
	var ran []master.WorkflowRun
	for _, r := range runs {
		switch r.Status {
		case store.WorkflowSkipped:
			if !strings.Contains(r.Note, "overlap policy queue") || r.EndedAt == nil {
				t.Errorf("skipped run %+v: want a note naming the policy and an end", r)
			}
		case store.WorkflowSuccess:
			ran = append(ran, r)
		}
	}
	slices.SortFunc(ran, func(a, b master.WorkflowRun) int { return a.StartedAt.Compare(b.StartedAt) })
	for i := 1; i < len(ran); i++ {
		if ran[i].StartedAt.Before(*ran[i-1].EndedAt) {
			t.Errorf("run %s started %s, before run %s ended %s", ran[i].ID, ran[i].StartedAt, ran[i-1].ID, *ran[i-1].EndedAt)
		}
	}
	// The second run waited: it stands for a fire before the first ended.
	if !ran[1].LogicalTime.Before(*ran[0].EndedAt) {
		t.Errorf("the queued run's fire %s is not before the first run's end %s", ran[1].LogicalTime, *ran[0].EndedAt)
	}
}

// TestWorkflowMisfireRecordsMissedFires: fires missed while no master ran
// the schedule are recorded as one skipped run counting them (misfire
// skip), or run once for the first of them (run_once); the schedule goes on
// from now either way.
func TestWorkflowMisfireRecordsMissedFires(t *testing.T) {
	t.Parallel()
	for _, policy := range []string{protocol.MisfireSkip, protocol.MisfireRunOnce} {
		t.Run(policy, func(t *testing.T) {
			t.Parallel()
			e, target := scheduledEnv(t)
			in := everySecond("missed", stepTask(t, e, target, "/m"), "")
			in.Misfire = policy
			in.Schedule.Every = protocol.Duration(time.Hour)
			w, err := e.m.Workflows().Create(e.ctx, in)
			if err != nil {
				t.Fatal(err)
			}
			// The master was away for ten hours: its next fire is ten hours
			// ago.
			missed := w.NextFire.Add(-10 * time.Hour)
			if ok, err := store.MoveWorkflowFire(e.ctx, e.s.Store.DB, w.ID, *w.NextFire, &missed); err != nil || !ok {
				t.Fatalf("move fire: %v %v", ok, err)
			}
			want := store.WorkflowSkipped
			if policy == protocol.MisfireRunOnce {
				want = store.WorkflowSuccess
			}
			runs := waitRuns(t, e, w.ID, func(r []master.WorkflowRun) bool { return countStatus(r, want) == 1 })
			r := runs[0]
			if len(runs) != 1 || !r.LogicalTime.Equal(missed) || !strings.Contains(r.Note, "10 fires were missed") {
				t.Errorf("runs %+v: want one for the fire %s noting 10 missed fires", runs, missed)
			}
			got, err := e.m.Workflows().Get(e.ctx, w.ID)
			if err != nil {
				t.Fatal(err)
			}
			if got.NextFire == nil || !got.NextFire.After(time.Now()) {
				t.Errorf("next fire %v: the schedule goes on from now", got.NextFire)
			}
		})
	}
}

// TestWorkflowBackfillOf24HourlyFiresAtMost3AtOnce: a backfill of an
// hourly workflow over a day runs each of the 24 fires once, with its fire
// as WORKFLOW_TIME, never more than 3 at once, and ends done.
func TestWorkflowBackfillOf24HourlyFiresAtMost3AtOnce(t *testing.T) {
	t.Parallel()
	e, target := scheduledEnv(t)
	var mu sync.Mutex
	inFlight, most := 0, 0
	times := map[string]int{}
	target.on("/load", func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		inFlight++
		most = max(most, inFlight)
		times[rawParam(r)]++
		mu.Unlock()
		time.Sleep(150 * time.Millisecond)
		mu.Lock()
		inFlight--
		mu.Unlock()
	})
	task := stepTask(t, e, target, "/load?t={{WORKFLOW_TIME}}")
	w, err := e.m.Workflows().Create(e.ctx, master.WorkflowInput{WorkflowDef: master.WorkflowDef{Title: "hourly",
		Schedule: &protocol.Schedule{Kind: protocol.ScheduleCron, Cron: "0 * * * *"}, Timezone: "Europe/Berlin",
		Steps: []master.WorkflowStep{{Name: "load", Task: task}}}})
	if err != nil {
		t.Fatal(err)
	}
	to := time.Now().UTC().Truncate(time.Hour)
	from := to.Add(-23 * time.Hour)
	b, err := e.m.Workflows().BackfillWorkflow(e.ctx, w.ID, master.BackfillInput{From: from, To: to, MaxConcurrent: 3})
	if err != nil {
		t.Fatal(err)
	}
	if b.Total != 24 {
		t.Fatalf("backfill of %s to %s: %d runs, want 24", from, to, b.Total)
	}
	deadline := time.Now().Add(60 * time.Second)
	for b.State != store.BackfillDone {
		if time.Now().After(deadline) {
			t.Fatalf("backfill not done after 60s: %+v", b.Progress)
		}
		time.Sleep(50 * time.Millisecond)
		if b, err = e.m.Workflows().Backfill(e.ctx, b.ID); err != nil {
			t.Fatal(err)
		}
	}
	if b.Progress[store.WorkflowSuccess] != 24 || len(b.Runs) != 24 {
		t.Errorf("progress %v, %d runs listed: want 24 successes", b.Progress, len(b.Runs))
	}
	mu.Lock()
	defer mu.Unlock()
	if most > 3 {
		t.Errorf("%d runs at once, want at most 3", most)
	}
	berlin, _ := time.LoadLocation("Europe/Berlin")
	for h := from; !h.After(to); h = h.Add(time.Hour) {
		if key := h.In(berlin).Format(time.RFC3339); times[key] != 1 {
			t.Errorf("fire %s ran %d times, want 1 (WORKFLOW_TIME in the workflow's zone)", key, times[key])
		}
	}
	if len(times) != 24 {
		t.Errorf("%d distinct WORKFLOW_TIMEs, want 24: %v", len(times), times)
	}
}

// TestWorkflowBackfillOfATaskPausedAndCancelled: a plain task backfilled
// newest first runs its fires in that order one at a time; paused, it
// starts none; cancelled, its runs not started are cancelled.
func TestWorkflowBackfillOfATaskPausedAndCancelled(t *testing.T) {
	t.Parallel()
	e, target := scheduledEnv(t)
	release := make(chan struct{})
	var mu sync.Mutex
	var order []string
	target.on("/t", func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		order = append(order, rawParam(r))
		mu.Unlock()
		<-release
	})
	task := stepTask(t, e, target, "/t?t={{WORKFLOW_TIME}}")
	to := time.Now().UTC().Truncate(time.Hour)
	from := to.Add(-9 * time.Hour)
	b, err := e.m.Workflows().BackfillTask(e.ctx, task, master.BackfillInput{From: from, To: to, Order: "newest"})
	if err != nil {
		t.Fatal(err)
	}
	if b.Total != 10 || b.Order != master.BackfillNewestFirst || b.MaxConcurrent != 1 {
		t.Fatalf("backfill %+v: want 10 runs newest first, one at a time", b)
	}
	waitHits := func(n int) {
		t.Helper()
		deadline := time.Now().Add(20 * time.Second)
		for {
			mu.Lock()
			got := len(order)
			mu.Unlock()
			if got >= n {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%d of %d runs reached the target after 20s", got, n)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	waitHits(1)
	if err := e.m.Workflows().PauseBackfill(e.ctx, b.ID); err != nil {
		t.Fatal(err)
	}
	release <- struct{}{} // the first run ends; paused, the backfill starts no other
	progress := func() map[string]int {
		got, err := e.m.Workflows().Backfill(e.ctx, b.ID)
		if err != nil {
			t.Fatal(err)
		}
		return got.Progress
	}
	for deadline := time.Now().Add(20 * time.Second); progress()[store.WorkflowSuccess] != 1; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("first run not ended: %v", progress())
		}
	}
	if p := progress(); p[store.WorkflowRunning] != 0 || p[store.WorkflowQueued] != 9 {
		t.Errorf("paused backfill's progress %v: want none running, 9 queued", p)
	}
	if err := e.m.Workflows().ResumeBackfill(e.ctx, b.ID); err != nil {
		t.Fatal(err)
	}
	waitHits(2)
	release <- struct{}{}
	waitHits(3)
	if err := e.m.Workflows().CancelBackfill(e.ctx, b.ID); err != nil {
		t.Fatal(err)
	}
	close(release)
	got, err := e.m.Workflows().Backfill(e.ctx, b.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.State != store.BackfillCancelled || got.Progress[store.WorkflowCancelled] != 7 || got.Progress[store.WorkflowQueued] != 0 {
		t.Errorf("cancelled backfill %s, progress %v: want 7 runs cancelled, none queued", got.State, got.Progress)
	}
	if err := e.m.Workflows().CancelBackfill(e.ctx, b.ID); master.KindOf(err) != master.KindState {
		t.Errorf("cancelling twice: %v, want a state error", err)
	}
	mu.Lock()
	defer mu.Unlock()
	want := []string{to.Format(time.RFC3339), to.Add(-time.Hour).Format(time.RFC3339), to.Add(-2 * time.Hour).Format(time.RFC3339)}
	if !slices.Equal(order[:3], want) {
		t.Errorf("runs in order %v, want newest first %v", order, want)
	}
}

// TestWorkflowBackfillRefusesBadWindows: each bad request is refused with
// a field error and makes nothing.
func TestWorkflowBackfillRefusesBadWindows(t *testing.T) {
	t.Parallel()
	e, target := scheduledEnv(t)
	task := stepTask(t, e, target, "/x")
	manual, err := e.m.Workflows().Create(e.ctx, master.WorkflowInput{WorkflowDef: master.WorkflowDef{Title: "manual",
		Steps: []master.WorkflowStep{{Name: "x", Task: task}}}})
	if err != nil {
		t.Fatal(err)
	}
	secondly, err := e.m.Workflows().Create(e.ctx, everySecond("secondly", task, ""))
	if err != nil {
		t.Fatal(err)
	}
	if err := e.m.Workflows().Pause(e.ctx, secondly.ID); err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC()
	for _, c := range []struct {
		name, id, field string
		in              master.BackfillInput
	}{
		{"no schedule", manual.ID, "from", master.BackfillInput{From: now.Add(-time.Hour), To: now}},
		{"to before from", secondly.ID, "to", master.BackfillInput{From: now.Add(-time.Hour), To: now.Add(-2 * time.Hour)}},
		{"future", secondly.ID, "to", master.BackfillInput{From: now.Add(-time.Hour), To: now.Add(time.Hour)}},
		{"too many fires", secondly.ID, "from", master.BackfillInput{From: now.Add(-3 * time.Hour), To: now}},
		{"concurrency", secondly.ID, "max_concurrent", master.BackfillInput{From: now.Add(-time.Minute), To: now, MaxConcurrent: 101}},
		{"order", secondly.ID, "order", master.BackfillInput{From: now.Add(-time.Minute), To: now, Order: "random"}},
		{"bad param", secondly.ID, "params", master.BackfillInput{From: now.Add(-time.Minute), To: now, Params: map[string]string{"1x": "y"}}},
	} {
		_, err := e.m.Workflows().BackfillWorkflow(e.ctx, c.id, c.in)
		var fe protocol.FieldErrors
		if !errors.As(err, &fe) || fe[c.field] == "" {
			t.Errorf("%s: %v, want a field error on %s", c.name, err, c.field)
		}
	}
	// The hourly task has no fire between ten and twenty past an hour.
	base := now.Truncate(time.Hour).Add(-2 * time.Hour)
	_, err = e.m.Workflows().BackfillTask(e.ctx, task, master.BackfillInput{From: base.Add(10 * time.Minute), To: base.Add(20 * time.Minute)})
	var fe protocol.FieldErrors
	if !errors.As(err, &fe) || !strings.Contains(fe["from"], "no fire") {
		t.Errorf("hourly task over a minute with no fire: %v, want a field error naming no fire", err)
	}
	for _, id := range []string{manual.ID, secondly.ID} {
		if bs, err := e.m.Workflows().Backfills(e.ctx, id, ""); err != nil || len(bs) != 0 {
			t.Errorf("workflow %s has backfills %v (%v) after refusals", id, bs, err)
		}
	}
}

// TestWorkflowLostStepRunsAgainOnAnotherNode: a step whose worker stops
// answering mid-run is lost with it and sent again to the other executor
// (its task has a retry left); the late report of the node that lost it
// moves the step no more, and the run succeeds once.
func TestWorkflowLostStepRunsAgainOnAnotherNode(t *testing.T) {
	t.Parallel()
	e := newEnv(t, storetest.OpenSQLite(t))
	url := e.serveMaster()
	if err := e.m.Start(e.ctx); err != nil {
		t.Fatal(err)
	}
	ws := reportingWorkers(e, url, "w1", "w2")
	target := newStepTarget(t)
	release := make(chan struct{})
	var first sync.Once
	target.on("/lost", func(w http.ResponseWriter, r *http.Request) {
		held := false
		first.Do(func() { held = true })
		if held {
			<-release // the first node's run hangs until its node is gone
			http.Error(w, "too late", http.StatusInternalServerError)
		}
	})
	in := httpInput("w1", "w2")
	in.Title, in.HTTP.URL, in.Retries = "lost step", target.URL+"/lost", 1
	tk, err := e.m.Tasks().Create(e.ctx, in, "admin")
	if err != nil {
		t.Fatal(err)
	}
	w, err := e.m.Workflows().Create(e.ctx, master.WorkflowInput{WorkflowDef: master.WorkflowDef{Title: "lost",
		Steps: []master.WorkflowStep{{Name: "s", Task: tk.ID}}}})
	if err != nil {
		t.Fatal(err)
	}
	run, err := e.m.Workflows().RunNow(e.ctx, w.ID, nil)
	if err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(20 * time.Second); target.count("/lost") == 0; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the step never reached the target")
		}
	}
	r, err := e.m.Workflows().Run(e.ctx, run.ID)
	if err != nil {
		t.Fatal(err)
	}
	dying := r.Steps[0].Node
	other := map[string]string{"w1": "w2", "w2": "w1"}[dying]
	// The node stops answering the master: the health sweep takes it
	// offline and its run in progress is lost.
	ws[dying].Serve(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		http.Error(rw, `{"error":"gone"}`, http.StatusServiceUnavailable)
	}))
	r = waitWorkflowRun(t, e, run.ID)
	if r.Status != store.WorkflowSuccess || r.Steps[0].Node != other || r.Steps[0].State != store.StepSuccess {
		t.Fatalf("run %s, step %+v: want success on %s", r.Status, r.Steps[0], other)
	}
	if n := target.count("/lost"); n != 2 {
		t.Errorf("target hit %d times, want 2 (the lost run and its resend)", n)
	}
	// The lost node's late report (its run fails once released) is stored
	// and changes nothing.
	close(release)
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		n, err := e.s.Store.DB.NewSelect().Model((*store.Run)(nil)).Where("workflow_run = ?", run.ID).Where("node = ?", dying).
			Where("result NOT IN (?)", bun.In([]string{store.ResultRunning, store.ResultLost})).Count(e.ctx)
		if err != nil {
			t.Fatal(err)
		}
		if n > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s's late report never came", dying)
		}
	}
	got, err := e.m.Workflows().Run(e.ctx, run.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.Status != store.WorkflowSuccess || got.Steps[0].State != store.StepSuccess || got.Steps[0].Node != other {
		t.Fatalf("a late report of %s moved the step: %s %+v", dying, got.Status, got.Steps[0])
	}
}

// TestWorkflowBroadcastStepRecordsEachShard: a step of a broadcast task
// runs on every running executor, each run recorded as a shard of the
// step; its child starts once, after all shards ended; a failing shard
// fails the step and the run.
func TestWorkflowBroadcastStepRecordsEachShard(t *testing.T) {
	t.Parallel()
	e := newEnv(t, storetest.OpenSQLite(t))
	url := e.serveMaster()
	if err := e.m.Start(e.ctx); err != nil {
		t.Fatal(err)
	}
	reportingWorkers(e, url, "w1", "w2", "w3")
	target := newStepTarget(t)
	var failOne atomic.Bool
	target.on("/shard", func(w http.ResponseWriter, r *http.Request) {
		time.Sleep(100 * time.Millisecond)
		if failOne.CompareAndSwap(true, false) {
			http.Error(w, "shard failed", http.StatusInternalServerError)
		}
	})
	in := httpInput("w1", "w2", "w3")
	in.Title, in.HTTP.URL, in.Routing = "shards", target.URL+"/shard", protocol.RoutingBroadcast
	tk, err := e.m.Tasks().Create(e.ctx, in, "admin")
	if err != nil {
		t.Fatal(err)
	}
	w, err := e.m.Workflows().Create(e.ctx, master.WorkflowInput{WorkflowDef: master.WorkflowDef{Title: "broadcast", Steps: []master.WorkflowStep{
		{Name: "a", Task: stepTask(t, e, target, "/a")},
		{Name: "shards", Task: tk.ID, After: []master.StepEdge{{Step: "a"}}},
		{Name: "after", Task: stepTask(t, e, target, "/after"), After: []master.StepEdge{{Step: "shards"}}},
	}}})
	if err != nil {
		t.Fatal(err)
	}
	run, err := e.m.Workflows().RunNow(e.ctx, w.ID, nil)
	if err != nil {
		t.Fatal(err)
	}
	r := waitWorkflowRun(t, e, run.ID)
	if r.Status != store.WorkflowSuccess {
		t.Fatalf("run %s: %+v", r.Status, r.Steps)
	}
	st := r.Steps[1]
	if st.State != store.StepSuccess || len(st.Shards) != 3 || st.Node != store.BroadcastNode {
		t.Fatalf("broadcast step %+v: want success with 3 shards", st)
	}
	seen := map[string]bool{}
	for _, sh := range st.Shards {
		if sh.State != store.StepSuccess || sh.Run == "" || sh.EndedAt == nil || seen[sh.Node] {
			t.Errorf("shard %+v: want one success per node with its run", sh)
		}
		seen[sh.Node] = true
		if !r.Steps[2].StartedAt.After(*sh.EndedAt) {
			t.Errorf("the child started %s, before shard %s ended %s", r.Steps[2].StartedAt, sh.Node, sh.EndedAt)
		}
	}
	if target.count("/after") != 1 || target.count("/shard") != 3 {
		t.Errorf("after ran %d times, shards %d: want 1 and 3", target.count("/after"), target.count("/shard"))
	}
	// A shard that fails fails the step; its child is skipped.
	failOne.Store(true)
	run, err = e.m.Workflows().RunNow(e.ctx, w.ID, nil)
	if err != nil {
		t.Fatal(err)
	}
	r = waitWorkflowRun(t, e, run.ID)
	states := stepStates(r)
	if r.Status != store.WorkflowFailed || states["shards"] != store.StepFailed || states["after"] != store.StepSkipped {
		t.Fatalf("run with a failed shard: %s %v, want failed with the child skipped", r.Status, states)
	}
	failed := 0
	for _, sh := range r.Steps[1].Shards {
		if sh.State == store.StepFailed {
			failed++
		}
	}
	if failed != 1 || len(r.Steps[1].Shards) != 3 {
		t.Errorf("shards %+v: want 3 with 1 failed", r.Steps[1].Shards)
	}
}

// TestWorkflowRerunTwiceAtOnceMakesOneRun: operators pressing Rerun failed
// at once on one failed run make one rerun; the others are told which.
func TestWorkflowRerunTwiceAtOnceMakesOneRun(t *testing.T) {
	t.Parallel()
	e, target := scheduledEnv(t)
	var calls atomic.Int32
	hold := make(chan struct{})
	t.Cleanup(func() { close(hold) })
	target.on("/flaky", func(w http.ResponseWriter, r *http.Request) {
		if calls.Add(1) == 1 {
			http.Error(w, "first run fails", http.StatusInternalServerError)
			return
		}
		select { // the rerun stays in progress while the others try
		case <-hold:
		case <-r.Context().Done():
		}
	})
	w, err := e.m.Workflows().Create(e.ctx, master.WorkflowInput{WorkflowDef: master.WorkflowDef{Title: "rerun once",
		Steps: []master.WorkflowStep{{Name: "flaky", Task: stepTask(t, e, target, "/flaky")}}}})
	if err != nil {
		t.Fatal(err)
	}
	started, err := e.m.Workflows().RunNow(e.ctx, w.ID, nil)
	if err != nil {
		t.Fatal(err)
	}
	if r := waitWorkflowRun(t, e, started.ID); r.Status != store.WorkflowFailed {
		t.Fatalf("first run %s, want failed", r.Status)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var made []string
	refused := 0
	for range 6 {
		wg.Go(func() {
			r, err := e.m.Workflows().RerunFailed(e.ctx, started.ID)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				made = append(made, r.ID)
			case master.KindOf(err) == master.KindState && strings.Contains(err.Error(), "being run again already"):
				refused++
			default:
				t.Errorf("rerun: %v", err)
			}
		})
	}
	wg.Wait()
	if len(made) != 1 || refused != 5 {
		t.Fatalf("6 reruns at once made %v and refused %d, want one made", made, refused)
	}
	if err := e.m.Workflows().Cancel(e.ctx, made[0]); err != nil {
		t.Fatal(err)
	}
}

// TestWorkflowVersionsKeepHistoryAndRestore: every save is a version (who,
// from where, what changed); a restore brings an old definition back as a
// new version; an unknown version is not found.
func TestWorkflowVersionsKeepHistoryAndRestore(t *testing.T) {
	t.Parallel()
	e, target := scheduledEnv(t)
	a, b := stepTask(t, e, target, "/a"), stepTask(t, e, target, "/b")
	w, err := e.m.Workflows().Create(e.ctx, master.WorkflowInput{WorkflowDef: master.WorkflowDef{Title: "v1",
		Steps: []master.WorkflowStep{{Name: "a", Task: a}}}})
	if err != nil {
		t.Fatal(err)
	}
	in := master.WorkflowInput{Version: 1, Note: "add b ✓", WorkflowDef: master.WorkflowDef{Title: "v2", Overlap: protocol.OverlapQueue,
		Steps: []master.WorkflowStep{{Name: "a", Task: a, Params: map[string]string{"x": "1"}}, {Name: "b", Task: b, After: []master.StepEdge{{Step: "a"}}}}}}
	if _, err := e.m.Workflows().Update(e.ctx, w.ID, in); err != nil {
		t.Fatal(err)
	}
	in.Note, in.Version = strings.Repeat("n", 1001), 2
	var fe protocol.FieldErrors
	if _, err := e.m.Workflows().Update(e.ctx, w.ID, in); !errors.As(err, &fe) || fe["note"] == "" {
		t.Fatalf("a note too long: %v", err)
	}
	vs, err := e.m.Workflows().Versions(e.ctx, w.ID)
	if err != nil {
		t.Fatal(err)
	}
	if len(vs) != 2 || vs[0].Version != 2 || !vs[0].Current || vs[0].Note != "add b ✓" || vs[1].Current || vs[1].CreatedBy != "system" {
		t.Fatalf("versions %+v: want 2 (current) with its note, and 1", vs)
	}
	v2, err := e.m.Workflows().Version(e.ctx, w.ID, 2)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"title", "overlap", "step a changed", "step b added"}; !slices.Equal(v2.Changes, want) {
		t.Errorf("changes of version 2 %v, want %v", v2.Changes, want)
	}
	restored, err := e.m.Workflows().Restore(e.ctx, w.ID, 1, "")
	if err != nil {
		t.Fatal(err)
	}
	if restored.Version != 3 || restored.Title != "v1" || len(restored.Steps) != 1 {
		t.Fatalf("restored %+v: want version 3 with version 1's definition", restored)
	}
	v3, err := e.m.Workflows().Version(e.ctx, w.ID, 3)
	if err != nil {
		t.Fatal(err)
	}
	if v3.Via != master.ViaRestore || v3.Note != "restored version 1" ||
		!slices.Equal(v3.Changes, []string{"title", "overlap", "step a changed", "step b removed"}) {
		t.Errorf("version 3 %+v", v3)
	}
	if _, err := e.m.Workflows().Version(e.ctx, w.ID, 9); master.KindOf(err) != master.KindNotFound {
		t.Errorf("version 9: %v, want not found", err)
	}
}
