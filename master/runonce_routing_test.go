package master_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/schedulemaster-go/schedulemaster/master"
	"github.com/schedulemaster-go/schedulemaster/protocol"
	"github.com/schedulemaster-go/schedulemaster/store/storetest"
)

// runOnceSpy records the run once requests a worker receives, then hands
// them to the real worker router.
type runOnceSpy struct {
	mu   sync.Mutex
	got  map[string][]protocol.TaskSpec // node -> specs sent with run once
	seen []string                       // nodes, in order of arrival
}

func (s *runOnceSpy) wrap(name string, next http.Handler) http.Handler {
	return http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		if r.URL.Path == protocol.PathTaskRunOnce {
			body, _ := io.ReadAll(r.Body)
			var req protocol.RunOnceRequest
			if json.Unmarshal(body, &req) == nil && req.Task != nil {
				s.mu.Lock()
				s.got[name] = append(s.got[name], *req.Task)
				s.seen = append(s.seen, name)
				s.mu.Unlock()
			}
			r.Body = io.NopCloser(bytes.NewReader(body))
		}
		next.ServeHTTP(rw, r)
	})
}

// routedWorkers starts real workers a, b, c, running, with the given
// priorities, each spied on.
func routedWorkers(e *env, prios map[string]int) *runOnceSpy {
	spy := &runOnceSpy{got: map[string][]protocol.TaskSpec{}}
	for _, name := range slices.Sorted(func(yield func(string) bool) {
		for n := range prios {
			if !yield(n) {
				return
			}
		}
	}) {
		tw := startWorker(e.t, name)
		tw.Serve(spy.wrap(name, tw.Router()))
		e.create(tw)
		e.exec("UPDATE nodes SET priority = ? WHERE name = ?", prios[name], name)
		e.connect(name)
		e.enable(name)
	}
	return spy
}

// routedRunTask creates and starts a task all of prios' nodes execute, with
// the given routing; it never fires during a test (hourly).
func routedRunTask(e *env, routing string, edit ...func(*master.TaskInput)) string {
	e.t.Helper()
	in := httpInput("a", "b", "c")
	in.Routing = routing
	for _, f := range edit {
		f(&in)
	}
	tk, err := e.m.Tasks().Create(e.ctx, in, "admin")
	if err != nil {
		e.t.Fatal(err)
	}
	if _, err := e.m.Tasks().Start(e.ctx, tk.ID); err != nil {
		e.t.Fatal(err)
	}
	return tk.ID
}

func (e *env) runOnce(id string) string {
	e.t.Helper()
	_, node, err := e.m.Tasks().Run(e.ctx, id)
	if err != nil {
		e.t.Fatalf("RunTask: %v", err)
	}
	return node
}

// Run once follows the task's routing, as a fire would: failover to the
// highest priority (the next when it is disabled), round_robin in turns,
// hash by the key's value, least_busy to the fewest recent claims.
func TestRunOnceFollowsTheRouting(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, s storetest.NamedStore) {
		e := newEnv(t, s)
		routedWorkers(e, map[string]int{"a": 1, "b": 9, "c": 5})

		failover := routedRunTask(e, protocol.RoutingFailover)
		for i := range 4 {
			if n := e.runOnce(failover); n != "b" {
				t.Fatalf("failover run %d went to %s, want b (priority 9)", i, n)
			}
		}
		if _, err := e.m.Nodes().Disable(e.ctx, "b"); err != nil {
			t.Fatal(err)
		}
		if n := e.runOnce(failover); n != "c" {
			t.Fatalf("failover with b disabled went to %s, want c (priority 5)", n)
		}
		e.enable("b")

		rr := routedRunTask(e, protocol.RoutingRoundRobin)
		got := ""
		for range 6 {
			got += e.runOnce(rr)
		}
		if got != "abcabc" {
			t.Fatalf("round_robin runs went to %s, want abcabc", got)
		}

		keyed := func(v string) func(*master.TaskInput) {
			return func(in *master.TaskInput) { in.Params, in.RoutingKey = map[string]string{"customer": v}, "customer" }
		}
		spread := map[string]bool{}
		for k := range 12 {
			id := routedRunTask(e, protocol.RoutingHash, keyed(fmt.Sprintf("customer-%d", k)))
			first := e.runOnce(id)
			for range 2 {
				if n := e.runOnce(id); n != first {
					t.Fatalf("hash key %d went to %s then %s", k, first, n)
				}
			}
			want := master.RankHash(id, fmt.Sprintf("customer-%d", k), []master.Candidate{{Name: "a"}, {Name: "b"}, {Name: "c"}})[0].Name
			if first != want {
				t.Fatalf("hash key %d went to %s, want %s (the fires' node)", k, first, want)
			}
			spread[first] = true
		}
		if len(spread) < 2 {
			t.Fatalf("12 keys all went to %v", spread)
		}

		lb := routedRunTask(e, protocol.RoutingLeastBusy)
		for node, n := range map[string]int{"a": 3, "b": 2} { // c has claimed nothing lately
			for i := range n {
				e.insertClaim(fmt.Sprintf("other-%s-%d", node, i), node)
			}
		}
		if n := e.runOnce(lb); n != "c" {
			t.Fatalf("least_busy went to %s, want c (no recent claim)", n)
		}
	})
}

// Broadcast run once goes to every running executor, each told its shard
// among the running ones: a disabled executor shrinks the total.
func TestRunOnceBroadcastsWithShards(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, s storetest.NamedStore) {
		e := newEnv(t, s)
		spy := routedWorkers(e, map[string]int{"a": 1, "b": 1, "c": 1})
		id := routedRunTask(e, protocol.RoutingBroadcast)
		if n := e.runOnce(id); n != "a, b, c" {
			t.Fatalf("broadcast run once went to %q, want a, b, c", n)
		}
		if _, err := e.m.Nodes().Disable(e.ctx, "b"); err != nil {
			t.Fatal(err)
		}
		if n := e.runOnce(id); n != "a, c" {
			t.Fatalf("broadcast with b disabled went to %q, want a, c", n)
		}
		spy.mu.Lock()
		defer spy.mu.Unlock()
		shard := func(node string, i int) string {
			sp := spy.got[node]
			if len(sp) <= i {
				return "none"
			}
			return fmt.Sprintf("%d/%d", sp[i].ShardIndex, sp[i].ShardTotal)
		}
		got := []string{shard("a", 0), shard("b", 0), shard("c", 0), shard("a", 1), shard("b", 1), shard("c", 1)}
		if want := []string{"0/3", "1/3", "2/3", "0/2", "none", "1/2"}; !slices.Equal(got, want) {
			t.Fatalf("shards sent %v, want %v", got, want)
		}
	})
}

// shardTarget records the shard ("i/n") each broadcast fire was told.
type shardTarget struct {
	*httptest.Server
	mu   sync.Mutex
	hits []string
}

func newShardTarget(t *testing.T) *shardTarget {
	st := &shardTarget{}
	st.Server = httptest.NewServer(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		st.mu.Lock()
		st.hits = append(st.hits, q.Get("i")+"/"+q.Get("n"))
		st.mu.Unlock()
	}))
	t.Cleanup(st.Close)
	return st
}

// since returns the hits from index from on.
func (st *shardTarget) since(from int) []string {
	st.mu.Lock()
	defer st.mu.Unlock()
	return slices.Clone(st.hits[min(from, len(st.hits)):])
}

func (st *shardTarget) count() int {
	st.mu.Lock()
	defer st.mu.Unlock()
	return len(st.hits)
}

// waitShards polls until every shard of want has fired after the hit index
// from, and returns the index reached then.
func (st *shardTarget) waitShards(t *testing.T, from int, want ...string) int {
	t.Helper()
	var got []string
	storetest.Eventually(t, 30*time.Second, func() bool {
		got = st.since(from)
		for _, sh := range want {
			if !slices.Contains(got, sh) {
				return false
			}
		}
		return true
	}, "shards %v not all seen", want)
	return from + len(got)
}

// The shard total of a broadcast task counts the running executors: when
// one is disabled the others are pushed their new shards at once (0/2, 1/2),
// and when it runs again everyone is back to thirds.
func TestBroadcastShardsFollowTheRunningExecutors(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, s storetest.NamedStore) {
		e := newEnv(t, s)
		routedWorkers(e, map[string]int{"a": 1, "b": 1, "c": 1})
		tg := newShardTarget(t)
		routedRunTask(e, protocol.RoutingBroadcast, func(in *master.TaskInput) {
			in.Schedule = protocol.Schedule{Kind: protocol.ScheduleCron, Cron: "* * * * * *"}
			in.HTTP.URL = tg.URL + "/?i={{SHARD_INDEX}}&n={{SHARD_TOTAL}}"
		})
		at := tg.waitShards(t, 0, "0/3", "1/3", "2/3")
		if _, err := e.m.Nodes().Disable(e.ctx, "b"); err != nil {
			t.Fatal(err)
		}
		tg.waitShards(t, at, "0/2", "1/2")
		// Both are pushed: from the next fires on, no third any more.
		settled := tg.count()
		at = tg.waitShards(t, settled, "0/2", "1/2")
		for _, h := range tg.since(settled) {
			if strings.HasSuffix(h, "/3") {
				t.Fatalf("fires after the reshard still had thirds: %v", tg.since(settled))
			}
		}
		e.enable("b")
		tg.waitShards(t, at, "0/3", "1/3", "2/3")
	})
}

// A broadcast task that selects a pool shards its work among the members
// running at the fire's moment: a member that joins (an admin label) makes
// thirds at once, one that leaves (its label removed) halves again, and the
// worker outside the pool never gets a shard.
func TestBroadcastShardsFollowThePoolsMembers(t *testing.T) {
	t.Parallel()
	e := newEnv(t, storetest.OpenSQLite(t))
	routedWorkers(e, map[string]int{"a": 1, "b": 1, "c": 1, "x": 1})
	for _, n := range []string{"a", "b"} {
		if _, err := e.m.Nodes().SetLabels(e.ctx, n, protocol.Labels{"pool": "p"}); err != nil {
			t.Fatal(err)
		}
	}
	tg := newShardTarget(t)
	routedRunTask(e, protocol.RoutingBroadcast, func(in *master.TaskInput) {
		in.Executors, in.Selector = nil, "pool=p"
		in.Schedule = protocol.Schedule{Kind: protocol.ScheduleCron, Cron: "* * * * * *"}
		in.HTTP.URL = tg.URL + "/?i={{SHARD_INDEX}}&n={{SHARD_TOTAL}}"
	})
	at := tg.waitShards(t, 0, "0/2", "1/2")
	if _, err := e.m.Nodes().SetLabels(e.ctx, "c", protocol.Labels{"pool": "p"}); err != nil {
		t.Fatal(err)
	}
	at = tg.waitShards(t, at, "0/3", "1/3", "2/3")
	if _, err := e.m.Nodes().SetLabels(e.ctx, "a", protocol.Labels{}); err != nil {
		t.Fatal(err)
	}
	settled := tg.waitShards(t, at, "0/2", "1/2")
	settled = tg.waitShards(t, settled, "0/2", "1/2")
	for _, h := range tg.since(settled) {
		if strings.HasSuffix(h, "/3") {
			t.Fatalf("fires after a left still had thirds: %v", tg.since(settled))
		}
	}
	// x, outside the pool, would have made a share of its own: every fire
	// since is halves only.
	for _, h := range tg.since(settled) {
		if !strings.HasSuffix(h, "/2") {
			t.Fatalf("a fire of a non-member or a stale shard: %v", tg.since(settled))
		}
	}
}
