package master_test

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/schedulemaster-go/schedulemaster/master"
	"github.com/schedulemaster-go/schedulemaster/protocol"
	"github.com/schedulemaster-go/schedulemaster/store"
	"github.com/schedulemaster-go/schedulemaster/store/storetest"
)

func names(cs []master.Candidate) string {
	s := ""
	for _, c := range cs {
		s += c.Name
	}
	return s
}

func TestRankRoundRobinRotatesPastTheLastWinner(t *testing.T) {
	t.Parallel()
	cands := []master.Candidate{{Name: "c", Weight: 1}, {Name: "a", Weight: 5}, {Name: "b", Weight: 0}}
	for last, want := range map[string]string{"": "abc", "a": "bca", "b": "cab", "c": "abc", "bb": "cab", "zz": "abc"} {
		if got := names(master.RankRoundRobin(last, cands)); got != want {
			t.Errorf("last %q: %s, want %s", last, got, want)
		}
	}
	// Following the winners spreads fires evenly whatever the weights.
	count, last := map[string]int{}, ""
	for range 300 {
		last = master.RankRoute(master.Route{Strategy: protocol.RoutingRoundRobin, Last: last}, cands)[0].Name
		count[last]++
	}
	if count["a"] != 100 || count["b"] != 100 || count["c"] != 100 {
		t.Fatalf("spread %v, want 100 each", count)
	}
}

func TestRankFailoverByPriorityThenName(t *testing.T) {
	t.Parallel()
	cands := []master.Candidate{{Name: "d", Weight: 1}, {Name: "b", Weight: 9}, {Name: "a", Weight: 1}, {Name: "c", Weight: 9}}
	for i := range 50 {
		r := master.RankRoute(master.Route{Strategy: protocol.RoutingFailover, TaskID: "t", Fire: claimBase.Add(time.Duration(i) * time.Second)}, cands)
		if got := names(r); got != "bcad" {
			t.Fatalf("fire %d: %s, want bcad", i, got)
		}
	}
	if got := names(master.RankFailover(cands[2:])); got != "ca" { // b gone: c takes over
		t.Fatalf("without b: %s, want ca", got)
	}
}

func TestRankLeastBusyPrefersFewestRecentClaims(t *testing.T) {
	t.Parallel()
	cands := []master.Candidate{{Name: "a", Weight: 1}, {Name: "b", Weight: 1}, {Name: "c", Weight: 1}}
	busy := map[string]int{"a": 3, "b": 1, "c": 2}
	for i := range 50 {
		fire := claimBase.Add(time.Duration(i) * time.Second)
		if got := names(master.RankLeastBusy("t", fire, busy, cands)); got != "bca" {
			t.Fatalf("fire %d: %s, want bca", i, got)
		}
	}
	// Ties keep the weighted rendezvous order, so idle nodes share fires.
	first := map[string]int{}
	for i := range 3000 {
		fire := claimBase.Add(time.Duration(i) * time.Second)
		r := master.RankLeastBusy("t", fire, nil, cands)
		if names(r) != names(master.RankClaimants("t", fire, cands)) {
			t.Fatalf("fire %d: tie order %s differs from weighted", i, names(r))
		}
		first[r[0].Name]++
	}
	for n, c := range first {
		if c < 800 {
			t.Errorf("%s first in %d of 3000 idle fires", n, c)
		}
	}
}

func TestRankHashIsStickyPerKey(t *testing.T) {
	t.Parallel()
	cands := []master.Candidate{{Name: "a", Weight: 1}, {Name: "b", Weight: 1}, {Name: "c", Weight: 1}}
	first := map[string]int{}
	moved := 0
	for k := range 3000 {
		key := fmt.Sprintf("order-%d", k)
		r := master.RankHash("t", key, cands)
		again := master.RankHash("t", key, []master.Candidate{cands[2], cands[0], cands[1]})
		if names(r) != names(again) {
			t.Fatalf("key %s: order depends on input order", key)
		}
		first[r[0].Name]++
		// Removing c moves only c's keys.
		without := master.RankHash("t", key, cands[:2])
		if r[0].Name != "c" && without[0].Name != r[0].Name {
			moved++
		}
	}
	if moved != 0 {
		t.Fatalf("%d keys moved off a node that stayed", moved)
	}
	for n, c := range first {
		if c < 800 {
			t.Errorf("%s first for %d of 3000 keys: poor spread", n, c)
		}
	}
}

// routedTask stores worker nodes a, b, c with the given priorities and a
// running task with the given routing that they all execute.
func routedTask(t *testing.T, e *env, routing string, prios map[string]int) string {
	t.Helper()
	var ns []string
	for name, p := range prios {
		n := &store.Node{Name: name, Type: store.TypeWorker, Protocol: "http", Host: "127.0.0.1:1", Status: store.StatusRunning,
			DesiredStatus: store.StatusRunning, Priority: p, MaxConcurrency: 5, Mode: store.ModeAuto, Secret: protocol.NewSecret()}
		if err := store.CreateNode(e.ctx, e.s.Store.DB, n); err != nil {
			t.Fatal(err)
		}
		ns = append(ns, name)
	}
	tk := &store.Task{ID: "t-route", Title: "route", Type: "http", Status: store.TaskRunning, Keepers: "[]", Children: "[]",
		Spec:      `{"id":"t-route","title":"route","type":"http","schedule":{"kind":"cron","cron":"* * * * * *"},"http":{"method":"GET","url":"http://127.0.0.1:1/"},"timeout":"1s","routing":"` + routing + `"}`,
		Executors: ns}
	if err := store.CreateTask(e.ctx, e.s.Store.DB, tk); err != nil {
		t.Fatal(err)
	}
	return tk.ID
}

// claimAll has every named executor claim one fire at once and returns the winner.
func claimAll(t *testing.T, e *env, id string, fire time.Time, execs ...string) string {
	t.Helper()
	var wg sync.WaitGroup
	var mu sync.Mutex
	winners := map[string]bool{}
	for _, name := range execs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			resp, err := e.m.Claim(e.ctx, e.node(name), protocol.ClaimRequest{TaskID: id, FireAt: fire})
			if err != nil {
				t.Errorf("claim %s: %v", name, err)
				return
			}
			mu.Lock()
			defer mu.Unlock()
			winners[resp.Winner] = true
		}()
	}
	wg.Wait()
	if len(winners) != 1 {
		t.Fatalf("fire %s: answers named %v, want one winner", fire, winners)
	}
	for w := range winners {
		return w
	}
	return ""
}

func TestClaimRoundRobinTakesTurns(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, s storetest.NamedStore) {
		e := newEnv(t, s, func(c *master.Config) { c.ClaimGrace = time.Second })
		id := routedTask(t, e, protocol.RoutingRoundRobin, map[string]int{"a": 1, "b": 5, "c": 1})
		got := ""
		for f := range 6 {
			got += claimAll(t, e, id, claimBase.Add(time.Duration(f)*time.Second), "a", "b", "c")
		}
		if got != "abcabc" {
			t.Fatalf("winners %s, want abcabc", got)
		}
	})
}

func TestClaimFailoverSticksToTheTopPriorityUntilItIsDown(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, s storetest.NamedStore) {
		e := newEnv(t, s, func(c *master.Config) { c.ClaimGrace = time.Second })
		id := routedTask(t, e, protocol.RoutingFailover, map[string]int{"a": 1, "b": 9, "c": 5})
		for f := range 5 {
			if w := claimAll(t, e, id, claimBase.Add(time.Duration(f)*time.Second), "a", "b", "c"); w != "b" {
				t.Fatalf("fire %d: %s won, want b (highest priority)", f, w)
			}
		}
		if _, err := s.Store.DB.ExecContext(e.ctx, "UPDATE nodes SET status = ? WHERE name = ?", store.StatusOffline, "b"); err != nil {
			t.Fatal(err)
		}
		for f := 5; f < 8; f++ {
			if w := claimAll(t, e, id, claimBase.Add(time.Duration(f)*time.Second), "a", "c"); w != "c" {
				t.Fatalf("fire %d with b down: %s won, want c", f, w)
			}
		}
	})
}
