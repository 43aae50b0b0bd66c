package worker

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/schedulemaster-go/schedulemaster/protocol"
	"github.com/schedulemaster-go/schedulemaster/store/storetest/testutil"
)

// A broadcast task runs every fire on this executor without a claim, each
// run told its shard as env and placeholders, one run report per fire.
func TestBroadcastRunsWithoutClaimAndTellsTheShard(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var queries []string
	target := httptest.NewServer(http.HandlerFunc(func(_ http.ResponseWriter, req *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		queries = append(queries, req.URL.RawQuery)
	}))
	t.Cleanup(target.Close)
	sink := &reportSink{}
	ctx, cancel := context.WithCancel(context.Background())
	rep := newReporter("", 0, testutil.Discard(), sink.post)
	go rep.run(ctx)
	var claims atomic.Int64
	r := &runner{
		log: testutil.Discard(), node: func() string { return "w1" }, limit: newLimiter(100), shell: true,
		http: http.DefaultClient, jobs: map[string]*taskJob{}, ctx: ctx, reports: rep, backoff: 100 * time.Millisecond,
		claim: func(context.Context, string, time.Time, runID) (bool, error) { claims.Add(1); return false, nil },
	}
	var err error
	if r.sched, err = newTestScheduler(); err != nil {
		t.Fatal(err)
	}
	r.sched.Start()
	t.Cleanup(func() {
		_ = r.sched.Shutdown()
		cancel()
		<-rep.done
	})
	every := protocol.Schedule{Kind: protocol.ScheduleInterval, Every: protocol.Duration(time.Hour)}
	httpSpec := protocol.TaskSpec{TaskDef: protocol.TaskDef{ID: "h", Title: "h", Type: protocol.TaskHTTP, Routing: protocol.RoutingBroadcast,
		Timeout: protocol.Duration(10 * time.Second), Schedule: every,
		HTTP: &protocol.HTTPSpec{URL: target.URL + "/?shard={{SHARD_INDEX}}&of={{SHARD_TOTAL}}"}}, Executors: 3, ShardIndex: 1, ShardTotal: 3}
	shellSpec := protocol.TaskSpec{TaskDef: protocol.TaskDef{ID: "s", Title: "s", Type: protocol.TaskShell, Routing: protocol.RoutingBroadcast,
		Timeout: protocol.Duration(10 * time.Second), Schedule: every,
		Shell: &protocol.ShellSpec{Command: `echo "env=$SM_SHARD_INDEX/$SM_SHARD_TOTAL arg={{SHARD_INDEX}}/{{SHARD_TOTAL}}"`}}, Executors: 3, ShardIndex: 2, ShardTotal: 3}
	for _, s := range []protocol.TaskSpec{httpSpec, shellSpec} {
		if err := r.start(s); err != nil {
			t.Fatal(err)
		}
	}
	r.fire(r.job("h"))
	r.fire(r.job("s"))
	waitFor(t, "two runs", func() bool { return len(sink.all()) == 2 })
	// The fleet changed: the master pushes the same definition with a new shard.
	httpSpec.ShardIndex, httpSpec.ShardTotal = 0, 2
	if err := r.start(httpSpec); err != nil {
		t.Fatal(err)
	}
	r.fire(r.job("h"))
	waitFor(t, "three runs", func() bool { return len(sink.all()) == 3 })
	if n := claims.Load(); n != 0 {
		t.Fatalf("broadcast fires claimed %d times, want none", n)
	}
	for _, run := range sink.all() {
		if run.Result != protocol.ResultSuccess {
			t.Fatalf("run %+v: want success", run)
		}
		if run.TaskID == "s" && !strings.Contains(run.Output, "env=2/3 arg=2/3") {
			t.Fatalf("shell output %q: want env=2/3 arg=2/3", run.Output)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if strings.Join(queries, " ") != "shard=1&of=3 shard=0&of=2" {
		t.Fatalf("http queries %q, want shard=1&of=3 then shard=0&of=2", queries)
	}
	// The scheduled definition is untouched by a run's shard values.
	if _, ok := r.job("h").spec.Params["SHARD_INDEX"]; ok {
		t.Fatal("sharding leaked into the scheduled spec")
	}
}
