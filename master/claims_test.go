package master_test

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/schedulemaster-go/schedulemaster/master"
	"github.com/schedulemaster-go/schedulemaster/protocol"
	"github.com/schedulemaster-go/schedulemaster/store"
	"github.com/schedulemaster-go/schedulemaster/store/storetest"
)

// claimBase is a fixed first fire, so the rendezvous ranks (a pure function
// of task, fire and node) and thus these tests are the same at every run.
//
// It is yesterday's midnight (UTC): a claim must name a fire at most
// master.ClaimSkew plus master.ClaimHold ahead and master.MaxClaimAge behind the clock, and the
// ranks stay the same for a whole day.
var claimBase = time.Now().UTC().Truncate(24 * time.Hour).Add(-24 * time.Hour).Add(3*time.Hour + 4*time.Minute)

// runningTask stores running worker nodes with the given priorities and a
// running task that they all execute.
func runningTask(t *testing.T, e *env, prios map[string]int) string {
	t.Helper()
	var names []string
	for name, p := range prios {
		n := &store.Node{Name: name, Type: store.TypeWorker, Protocol: "http", Host: "127.0.0.1:1", Status: store.StatusRunning,
			DesiredStatus: store.StatusRunning, Priority: p, MaxConcurrency: 5, Mode: store.ModeAuto, Secret: protocol.NewSecret()}
		if err := store.CreateNode(e.ctx, e.s.Store.DB, n); err != nil {
			t.Fatal(err)
		}
		names = append(names, name)
	}
	tk := &store.Task{ID: "t-claims", Title: "claims", Type: "http", Status: store.TaskRunning, Keepers: "[]", Children: "[]",
		Spec:      `{"id":"t-claims","title":"claims","type":"http","schedule":{"kind":"cron","cron":"* * * * * *"},"http":{"method":"GET","url":"http://127.0.0.1:1/"},"timeout":"1s"}`,
		Executors: names}
	if err := store.CreateTask(e.ctx, e.s.Store.DB, tk); err != nil {
		t.Fatal(err)
	}
	return tk.ID
}

// fireRankedFirst returns the first fire from claimBase at which want ranks
// first among cands.
func fireRankedFirst(t *testing.T, task, want string, cands []master.Candidate) time.Time {
	t.Helper()
	for i := 0; i < 1000; i++ {
		fire := claimBase.Add(time.Duration(i) * time.Second)
		if master.RankClaimants(task, fire, cands)[0].Name == want {
			return fire
		}
	}
	t.Fatalf("%s never ranks first", want)
	return time.Time{}
}

func TestRankClaimantsIsDeterministicAndFollowsWeights(t *testing.T) {
	t.Parallel()
	cands := []master.Candidate{{Name: "a", Weight: 1}, {Name: "b", Weight: 1}, {Name: "c", Weight: 2}, {Name: "z", Weight: 0}}
	const fires = 20000
	first := map[string]int{}
	for i := 0; i < fires; i++ {
		fire := claimBase.Add(time.Duration(i) * time.Second)
		r := master.RankClaimants("t1", fire, cands)
		again := master.RankClaimants("t1", fire, []master.Candidate{cands[3], cands[2], cands[1], cands[0]})
		if fmt.Sprint(r) != fmt.Sprint(again) {
			t.Fatalf("fire %d: order depends on input order: %v vs %v", i, r, again)
		}
		if r[len(r)-1].Name != "z" {
			t.Fatalf("fire %d: weight 0 ranked before a positive weight: %v", i, r)
		}
		first[r[0].Name]++
	}
	for name, want := range map[string]float64{"a": 0.25, "b": 0.25, "c": 0.5} {
		if share := float64(first[name]) / fires; share < want-0.02 || share > want+0.02 {
			t.Errorf("%s ranked first at %.3f of fires, want %.2f±0.02", name, share, want)
		}
	}
	// All weights 0: still one order, uniform by hash.
	zero := []master.Candidate{{Name: "p"}, {Name: "q"}}
	if r := master.RankClaimants("t1", claimBase, zero); len(r) != 2 || r[0].Name == r[1].Name {
		t.Fatalf("all zero weights: %v", r)
	}
}

// Executors talking to different masters on one database: one winner per
// fire, every answer names it, and the spread follows the weights.
func TestClaimOneWinnerPerFireAcrossMasters(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, s storetest.NamedStore) {
		e := newEnv(t, s)
		m2 := newMaster(t, s, func(c *master.Config) { c.Identity = "master-b" })
		prios := map[string]int{"a": 1, "b": 1, "c": 2}
		via := map[string]*master.Master{"a": e.m, "b": m2, "c": e.m}
		id := runningTask(t, e, prios)
		const fires = 300
		wins := map[string]int{}
		firstOf := make([]string, fires)
		for f := 0; f < fires; f++ {
			fire := claimBase.Add(time.Duration(f) * time.Second)
			if f%2 == 1 {
				via["c"] = m2 // c's master changes half the time
			} else {
				via["c"] = e.m
			}
			var wg sync.WaitGroup
			var mu sync.Mutex
			named := map[string]bool{}
			winners := 0
			for name := range prios {
				wg.Add(1)
				go func() {
					defer wg.Done()
					resp, err := via[name].Claim(e.ctx, e.node(name), protocol.ClaimRequest{TaskID: id, FireAt: fire})
					if err != nil {
						t.Errorf("claim %s: %v", name, err)
						return
					}
					mu.Lock()
					defer mu.Unlock()
					named[resp.Winner] = true
					if resp.Won {
						winners++
						wins[name]++
						firstOf[f] = name
					}
				}()
			}
			wg.Wait()
			if winners != 1 || len(named) != 1 {
				t.Fatalf("fire %d: %d winners, answers named %v; want exactly 1 and one name", f, winners, named)
			}
		}
		// Each fire goes to the claimant ranked first for it, unless that one
		// was later than its grace (a loaded machine, now and then). The
		// ranking, not the 25/25/50 shares, is the exact expectation: 300
		// fires can stray from the shares by chance.
		cands := []master.Candidate{{Name: "a", Weight: 1}, {Name: "b", Weight: 1}, {Name: "c", Weight: 2}}
		offRank := 0
		for f := 0; f < fires; f++ {
			fire := claimBase.Add(time.Duration(f) * time.Second)
			if firstOf[f] != master.RankClaimants(id, fire, cands)[0].Name {
				offRank++
			}
		}
		if offRank > fires/10 {
			t.Errorf("%d of %d fires went to another claimant than the one ranked first; wins %v", offRank, fires, wins)
		}
		// A late claim of a decided fire, through the other master, gets the recorded winner.
		var recorded string
		if err := s.Store.DB.QueryRowContext(e.ctx, "SELECT node FROM locks WHERE task_id = ? AND fire_at = ?", id, claimBase).Scan(&recorded); err != nil {
			t.Fatal(err)
		}
		resp, err := m2.Claim(e.ctx, e.node("a"), protocol.ClaimRequest{TaskID: id, FireAt: claimBase})
		if err != nil {
			t.Fatal(err)
		}
		if resp.Winner != recorded || resp.Won != (recorded == "a") {
			t.Fatalf("late claim: %+v, recorded winner %s", resp, recorded)
		}
	})
}

func TestClaimDeadExecutorDoesNotHoldTheFire(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, s storetest.NamedStore) {
		const grace = 120 * time.Millisecond
		e := newEnv(t, s, func(c *master.Config) { c.ClaimGrace = grace })
		id := runningTask(t, e, map[string]int{"x": 1, "y": 1})
		cands := []master.Candidate{{Name: "x", Weight: 1}, {Name: "y", Weight: 1}}
		// y ranks first but is dead and not yet detected: x claims after one grace.
		fire := fireRankedFirst(t, id, "y", cands)
		start := time.Now()
		resp, err := e.m.Claim(e.ctx, e.node("x"), protocol.ClaimRequest{TaskID: id, FireAt: fire})
		if err != nil {
			t.Fatal(err)
		}
		if !resp.Won || resp.Winner != "x" {
			t.Fatalf("second-ranked lone claimant: %+v, want it to win", resp)
		}
		if took := time.Since(start); took < grace {
			t.Fatalf("decided after %s: the better-ranked executor gets its grace (%s) first", took, grace)
		}
		// y's late claim loses to the recorded winner.
		if resp, err := e.m.Claim(e.ctx, e.node("y"), protocol.ClaimRequest{TaskID: id, FireAt: fire}); err != nil || resp.Won || resp.Winner != "x" {
			t.Fatalf("late claim of the top-ranked: %+v %v", resp, err)
		}
		// Once y is known dead (offline) it is not ranked: x is alone and first.
		// An executor that is not running never wins, even when it claims first.
		if _, err := s.Store.DB.ExecContext(e.ctx, "UPDATE nodes SET status = ? WHERE name = ?", store.StatusOffline, "y"); err != nil {
			t.Fatal(err)
		}
		fire2 := fireRankedFirst(t, id, "y", cands).Add(-10 * time.Hour) // a fresh fire
		resp, err = e.m.Claim(e.ctx, e.node("y"), protocol.ClaimRequest{TaskID: id, FireAt: fire2})
		if err != nil || resp.Won {
			t.Fatalf("offline executor's claim: %+v %v, want a loss", resp, err)
		}
		resp, err = e.m.Claim(e.ctx, e.node("x"), protocol.ClaimRequest{TaskID: id, FireAt: fire2})
		if err != nil || !resp.Won {
			t.Fatalf("only running executor: %+v %v, want a win", resp, err)
		}
		// A node that is not an executor never wins.
		other := &store.Node{Name: "z", Type: store.TypeWorker, Protocol: "http", Host: "127.0.0.1:1", Status: store.StatusRunning, Priority: 9, MaxConcurrency: 1, Mode: store.ModeAuto}
		if err := store.CreateNode(e.ctx, s.Store.DB, other); err != nil {
			t.Fatal(err)
		}
		resp, err = e.m.Claim(e.ctx, e.node("z"), protocol.ClaimRequest{TaskID: id, FireAt: claimBase.Add(time.Hour)})
		if !errors.Is(err, master.ErrForbidden) || resp.Won {
			t.Fatalf("non-executor claim: %+v %v, want ErrForbidden", resp, err)
		}
	})
}

// A claim keeps the run id the winner's report will carry (the latest the
// winner named): a winner that goes offline before it reports (killed
// during a short run) leaves that run recorded lost, not missing. A run id
// that is not one is refused.
func TestClaimedFireUnreportedAtOfflineIsLost(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, s storetest.NamedStore) {
		e := newEnv(t, s)
		id := runningTask(t, e, map[string]int{"x": 1, "y": 1})
		cands := []master.Candidate{{Name: "x", Weight: 1}, {Name: "y", Weight: 1}}
		fire := fireRankedFirst(t, id, "x", cands)
		for _, bad := range []string{"run id", "r\x00n", strings.Repeat("r", 65), "run/1"} {
			resp, err := e.m.Claim(e.ctx, e.node("x"), protocol.ClaimRequest{TaskID: id, FireAt: fire, RunID: bad})
			if !errors.Is(err, master.ErrInvalid) || resp.Won {
				t.Fatalf("claim with run_id %q: %+v %v, want ErrInvalid", bad, resp, err)
			}
		}
		if e.claimsOf("x") != 0 {
			t.Fatal("a refused claim was recorded")
		}
		resp, err := e.m.Claim(e.ctx, e.node("x"), protocol.ClaimRequest{TaskID: id, FireAt: fire, RunID: "run-of-x-1"})
		if err != nil || !resp.Won {
			t.Fatalf("claim: %+v %v", resp, err)
		}
		// The loser's claim names nothing; the winner's claim again under
		// another id (it never heard it won, and records the fire now as a
		// misfire) names that one.
		if resp, err := e.m.Claim(e.ctx, e.node("y"), protocol.ClaimRequest{TaskID: id, FireAt: fire, RunID: "run-of-y"}); err != nil || resp.Won {
			t.Fatalf("y's late claim: %+v %v", resp, err)
		}
		if resp, err := e.m.Claim(e.ctx, e.node("x"), protocol.ClaimRequest{TaskID: id, FireAt: fire, RunID: "run-of-x-2"}); err != nil || !resp.Won {
			t.Fatalf("x's claim again: %+v %v", resp, err)
		}
		// x stops before it reported the run (it would have, had it drained).
		if err := e.m.Offline(e.ctx, "x", e.node("x").Secret); err != nil {
			t.Fatal(err)
		}
		r, err := e.m.Runs().Get(e.ctx, "run-of-x-2")
		if err != nil {
			t.Fatalf("the claimed fire's run after x went offline: %v", err)
		}
		if r.Result != store.ResultLost || r.Node != "x" || r.TaskID != id || !r.ScheduledAt.Equal(fire) || !strings.Contains(r.Output, "offline") {
			t.Fatalf("the claimed fire's run: %+v, want lost on x at %s saying why", r, fire)
		}
		for _, other := range []string{"run-of-x-1", "run-of-y"} {
			if _, err := e.m.Runs().Get(e.ctx, other); !errors.Is(err, master.ErrNotFound) {
				t.Errorf("run %s: %v, want none: the claim names one run", other, err)
			}
		}
	})
}

// A paused task's fires are run by nobody.
func TestClaimOfPausedTaskHasNoWinner(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, s storetest.NamedStore) {
		e := newEnv(t, s)
		id := runningTask(t, e, map[string]int{"x": 1})
		if _, err := s.Store.DB.ExecContext(e.ctx, "UPDATE tasks SET status = ? WHERE id = ?", store.TaskPaused, id); err != nil {
			t.Fatal(err)
		}
		resp, err := e.m.Claim(e.ctx, e.node("x"), protocol.ClaimRequest{TaskID: id, FireAt: claimBase})
		if err != nil || resp.Won || resp.Winner != "" {
			t.Fatalf("claim of a paused task: %+v %v", resp, err)
		}
	})
}

// A worker hedging its claim sends the same claim to two masters at once,
// each with its own connection pool on the database: per fire there is still
// one winner, and both answers a node gets agree with each other and with
// the recorded winner, so the worker may take either.
func TestClaimSentToTwoMastersAtOnceAgrees(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, s storetest.NamedStore) {
		e := newEnv(t, s)
		second, err := store.Open(e.ctx, s.DSN, storetest.Discard())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { second.Close() }) // after the masters stop
		m2 := newMaster(t, storetest.NamedStore{Name: s.Name, Store: second, DSN: s.DSN}, func(c *master.Config) { c.Identity = "master-b" })
		prios := map[string]int{"a": 1, "b": 1, "c": 2}
		id := runningTask(t, e, prios)
		const fires = 60
		for f := range fires {
			fire := claimBase.Add(time.Duration(f) * time.Second)
			var wg sync.WaitGroup
			var mu sync.Mutex
			answers := map[string][]protocol.ClaimResponse{}
			for name := range prios {
				for _, m := range []*master.Master{e.m, m2} {
					wg.Add(1)
					go func() {
						defer wg.Done()
						resp, err := m.Claim(e.ctx, e.node(name), protocol.ClaimRequest{TaskID: id, FireAt: fire})
						if err != nil {
							t.Errorf("claim %s: %v", name, err)
							return
						}
						mu.Lock()
						answers[name] = append(answers[name], resp)
						mu.Unlock()
					}()
				}
			}
			wg.Wait()
			var recorded string
			if err := s.Store.DB.QueryRowContext(e.ctx, "SELECT node FROM locks WHERE task_id = ? AND fire_at = ?", id, fire).Scan(&recorded); err != nil {
				t.Fatalf("fire %d: recorded winner: %v", f, err)
			}
			winners := 0
			for name, got := range answers {
				if len(got) != 2 || got[0] != got[1] {
					t.Fatalf("fire %d: node %s got %+v from the two masters; want two equal answers", f, name, got)
				}
				if got[0].Winner != recorded || got[0].Won != (name == recorded) {
					t.Fatalf("fire %d: node %s told %+v, recorded winner %s", f, name, got[0], recorded)
				}
				if got[0].Won {
					winners++
				}
			}
			if winners != 1 {
				t.Fatalf("fire %d: %d nodes told they won", f, winners)
			}
		}
	})
}
