package worker

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/schedulemaster-go/schedulemaster/protocol"
	"github.com/schedulemaster-go/schedulemaster/store/storetest/testutil"
)

// fanOutRunner is a real runner (gocron scheduler, not started: the tests
// fire groups themselves) whose claims are counted and won.
type fanOutRunner struct {
	*runner
	sink *reportSink

	mu     sync.Mutex
	claims []string // task@fire
}

func newFanOutRunner(t *testing.T) *fanOutRunner {
	t.Helper()
	f := &fanOutRunner{sink: &reportSink{}}
	ctx, cancel := context.WithCancel(context.Background())
	rep := newReporter("", 0, testutil.Discard(), f.sink.post)
	go rep.run(ctx)
	f.runner = &runner{
		log: testutil.Discard(), node: func() string { return "w1" }, limit: newLimiter(100),
		http: http.DefaultClient, jobs: map[string]*taskJob{}, ctx: ctx, reports: rep, backoff: 100 * time.Millisecond,
		claim: func(_ context.Context, id string, fire time.Time, _ runID) (bool, error) {
			f.mu.Lock()
			defer f.mu.Unlock()
			f.claims = append(f.claims, id+"@"+fire.Format(time.RFC3339))
			return true, nil
		},
	}
	var err error
	if f.sched, err = newTestScheduler(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = f.sched.Shutdown()
		cancel()
		<-rep.done
	})
	return f
}

func (f *fanOutRunner) claimed() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.claims...)
}

func httpSpec(id, url string, sch protocol.Schedule) protocol.TaskSpec {
	return protocol.TaskSpec{TaskDef: protocol.TaskDef{ID: id, Title: id, Type: protocol.TaskHTTP, Schedule: sch,
		Timeout: protocol.Duration(10 * time.Second), HTTP: &protocol.HTTPSpec{URL: url + "/" + id}}, Executors: 1}
}

// Tasks with the same schedule (kind, expression, time zone, window) share
// one gocron job; a task joins and leaves groups as it is started, edited
// and stopped, and a group's job goes with its last task.
func TestFanOutOneGocronJobPerSchedule(t *testing.T) {
	t.Parallel()
	f := newFanOutRunner(t)
	cron5 := protocol.Schedule{Kind: protocol.ScheduleCron, Cron: "*/5 * * * * *"}
	every5 := protocol.Schedule{Kind: protocol.ScheduleInterval, Every: protocol.Duration(5 * time.Second)}
	later := time.Now().Add(time.Hour).UTC()
	specs := map[string]protocol.TaskSpec{
		"a": httpSpec("a", "http://127.0.0.1:1", cron5),
		"b": httpSpec("b", "http://127.0.0.1:1", cron5),
		"c": httpSpec("c", "http://127.0.0.1:1", cron5),
		"d": httpSpec("d", "http://127.0.0.1:1", every5),
		"e": httpSpec("e", "http://127.0.0.1:1", every5),
		"f": httpSpec("f", "http://127.0.0.1:1", every5),
	}
	c := specs["c"]
	c.Timezone = "Europe/Berlin" // other wall clock: other fire times
	specs["c"] = c
	e := specs["e"]
	e.StartAt = &later // other window: other fire times
	specs["e"] = e
	earlier := time.Now().Add(-time.Hour).UTC()
	ff := specs["f"]
	ff.StartAt = &earlier // passed: the same fire times as d
	specs["f"] = ff
	for _, id := range []string{"a", "b", "c", "d", "e", "f"} {
		if err := f.start(specs[id]); err != nil {
			t.Fatal(err)
		}
	}
	jobs := func() int { return len(f.sched.Jobs()) }
	if n := jobs(); n != 4 {
		t.Fatalf("%d gocron jobs for 6 tasks on 4 schedules, want 4", n)
	}
	if f.job("a").jobID != f.job("b").jobID || f.job("a").jobID == f.job("c").jobID || f.job("d").jobID == f.job("e").jobID ||
		f.job("d").jobID != f.job("f").jobID {
		t.Fatal("tasks grouped by something else than their fire times")
	}
	// b's schedule is edited to d's: it moves to d's group.
	b := specs["b"]
	b.Schedule = every5
	if err := f.start(b); err != nil {
		t.Fatal(err)
	}
	if n := jobs(); n != 4 || f.job("b").jobID != f.job("d").jobID {
		t.Fatalf("after moving b: %d jobs, b in d's group %v", n, f.job("b").jobID == f.job("d").jobID)
	}
	f.stop("a") // a's group is empty now
	if n := jobs(); n != 3 {
		t.Fatalf("%d jobs after stopping a, want 3", n)
	}
	f.stop("b")
	f.stop("d")
	if n := jobs(); n != 3 {
		t.Fatalf("%d jobs after stopping b and d (f still on their schedule), want 3", n)
	}
	f.clear(false)
	if n := jobs(); n != 0 || len(f.groups) != 0 {
		t.Fatalf("%d jobs and %d groups after clear, want none", n, len(f.groups))
	}
}

// One fire of a group runs each of its tasks once, named by the same
// scheduled time, with each task's own policy: a paused task is skipped, a
// task with several executors claims the fire, a single-executor one does
// not, a broadcast task runs its shard.
func TestFanOutFireKeepsEachTasksSemantics(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var paths []string
	target := httptest.NewServer(http.HandlerFunc(func(_ http.ResponseWriter, req *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		paths = append(paths, req.URL.Path+"?"+req.URL.RawQuery)
	}))
	t.Cleanup(target.Close)
	seen := func() string {
		mu.Lock()
		defer mu.Unlock()
		s := append([]string(nil), paths...)
		sort.Strings(s)
		paths = nil
		return strings.Join(s, " ")
	}
	f := newFanOutRunner(t)
	hourly := protocol.Schedule{Kind: protocol.ScheduleInterval, Every: protocol.Duration(time.Hour)}
	single := httpSpec("single", target.URL, hourly)
	paused := httpSpec("paused", target.URL, hourly)
	paused.Paused = true
	multi := httpSpec("multi", target.URL, hourly)
	multi.Executors = 2
	bcast := httpSpec("bcast", target.URL, hourly)
	bcast.Routing, bcast.Executors, bcast.ShardIndex, bcast.ShardTotal = protocol.RoutingBroadcast, 3, 1, 3
	bcast.HTTP.URL += "?shard={{SHARD_INDEX}}"
	for _, s := range []protocol.TaskSpec{single, paused, multi, bcast} {
		if err := f.start(s); err != nil {
			t.Fatal(err)
		}
	}
	g := f.job("single").group
	if f.job("multi").group != g || f.job("bcast").group != g || f.job("paused").group != g {
		t.Fatal("tasks of one schedule are not in one group")
	}
	fire := time.Now().Add(time.Hour).Truncate(time.Hour).UTC()
	f.fireGroupAt(g, fire) // returns when every run ended
	if got := seen(); got != "/bcast?shard=1 /multi? /single?" {
		t.Fatalf("target saw %q, want the runs of bcast (shard 1), multi and single", got)
	}
	if c := f.claimed(); len(c) != 1 || c[0] != "multi@"+fire.Format(time.RFC3339) {
		t.Fatalf("claims %v, want only multi's, for the fire", c)
	}
	waitFor(t, "three reports", func() bool { return len(f.sink.all()) == 3 })
	for _, run := range f.sink.all() {
		if !run.ScheduledAt.Equal(fire) || run.Result != protocol.ResultSuccess {
			t.Fatalf("run %+v: want success scheduled at %s", run, fire)
		}
	}
	for _, id := range []string{"single", "paused", "multi", "bcast"} {
		if got := f.job(id).lastFire.Load(); got != fire.UnixNano() {
			t.Fatalf("%s: last fire %d, want the fire (paused fires count as handled)", id, got)
		}
	}
	// Resume one, stop another: the next fire follows.
	if err := f.setPaused("paused", false); err != nil {
		t.Fatal(err)
	}
	f.stop("single")
	f.fireGroupAt(g, fire.Add(time.Hour))
	if got := seen(); got != "/bcast?shard=1 /multi? /paused?" {
		t.Fatalf("target saw %q after resume and stop", got)
	}
	// A task that joins while a fire is being named does not run that fire:
	// a job of its own would not have fired before it existed.
	named := time.Now().UTC()
	late := httpSpec("late", target.URL, hourly)
	if err := f.start(late); err != nil {
		t.Fatal(err)
	}
	f.fireGroupAt(g, named)
	if got := seen(); strings.Contains(got, "/late") || !strings.Contains(got, "/paused") {
		t.Fatalf("target saw %q for a fire before late joined: want paused's run, not late's", got)
	}
}

// A task's prepared request (no placeholders) sends the same method, body
// and headers at every fire, each fire with a body of its own; a task with
// placeholders is built at each fire with its params; redirects are followed.
func TestHTTPRequestsAreTheSameAtEveryFire(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var got []string
	target := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, req *http.Request) {
		if req.URL.Path == "/moved" {
			http.Redirect(rw, req, "/plain", http.StatusFound)
			return
		}
		body, _ := io.ReadAll(req.Body)
		mu.Lock()
		defer mu.Unlock()
		got = append(got, fmt.Sprintf("%s %s %s ct=%s x=%s ua=%s", req.Method, req.URL.RequestURI(), body,
			req.Header.Get("Content-Type"), req.Header.Get("X-Key"), req.Header.Get("User-Agent")))
	}))
	t.Cleanup(target.Close)
	f := newFanOutRunner(t)
	hourly := protocol.Schedule{Kind: protocol.ScheduleInterval, Every: protocol.Duration(time.Hour)}
	post := httpSpec("post", target.URL, hourly)
	post.HTTP = &protocol.HTTPSpec{Method: "POST", URL: target.URL + "/plain", Body: `{"a":1}`, ContentType: "application/json",
		Headers: map[string]string{"X-Key": "k1"}}
	post.Params = map[string]string{"unused": "v"}
	param := httpSpec("param", target.URL, hourly)
	param.HTTP = &protocol.HTTPSpec{Method: "PUT", URL: target.URL + "/p/{{id}}", Body: "id={{id}}", Headers: map[string]string{"X-Key": "{{id}}"}}
	param.Params = map[string]string{"id": "42"}
	moved := httpSpec("moved", target.URL, hourly)
	moved.HTTP = &protocol.HTTPSpec{URL: target.URL + "/moved"}
	for _, s := range []protocol.TaskSpec{post, param, moved} {
		if err := f.start(s); err != nil {
			t.Fatal(err)
		}
	}
	if f.job("post").httpReq == nil || f.job("param").httpReq != nil {
		t.Fatal("prepared request: want one for post (no placeholder), none for param")
	}
	fire := time.Now().Add(time.Hour).Truncate(time.Hour).UTC()
	for i := range 2 {
		f.fireGroupAt(f.job("post").group, fire.Add(time.Duration(i)*time.Hour))
	}
	mu.Lock()
	sort.Strings(got)
	all := strings.Join(got, "\n")
	mu.Unlock()
	want := strings.Join([]string{
		"GET /plain  ct= x= ua=ScheduleMaster-Go",
		"GET /plain  ct= x= ua=ScheduleMaster-Go",
		`POST /plain {"a":1} ct=application/json x=k1 ua=ScheduleMaster-Go`,
		`POST /plain {"a":1} ct=application/json x=k1 ua=ScheduleMaster-Go`,
		"PUT /p/42 id=42 ct= x=42 ua=ScheduleMaster-Go",
		"PUT /p/42 id=42 ct= x=42 ua=ScheduleMaster-Go",
	}, "\n")
	if all != want {
		t.Fatalf("target got:\n%s\nwant:\n%s", all, want)
	}
}
