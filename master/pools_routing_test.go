package master_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/schedulemaster-go/schedulemaster/master"
	"github.com/schedulemaster-go/schedulemaster/protocol"
	"github.com/schedulemaster-go/schedulemaster/store"
	"github.com/schedulemaster-go/schedulemaster/store/storetest"
)

// pooledTask creates a running task selecting pool=p with a routing, with
// params.
func pooledTask(t *testing.T, e *env, title, routing string, params map[string]string) string {
	t.Helper()
	in := httpInput()
	in.Title, in.Selector, in.Routing = title, "pool=p", routing
	in.Schedule = protocol.Schedule{Kind: protocol.ScheduleCron, Cron: "* * * * * *"}
	if len(params) > 0 {
		in.Params = params
		in.RoutingKey = "k"
	}
	tk, err := e.m.Tasks().Create(e.ctx, in, "admin")
	if err != nil {
		t.Fatal(err)
	}
	if err := store.SetTaskStatus(e.ctx, e.s.Store.DB, tk.ID, []store.TaskStatus{store.TaskStopped}, store.TaskRunning); err != nil {
		t.Fatal(err)
	}
	return tk.ID
}

// join makes a stored worker a pool member the way an admin would.
func join(t *testing.T, e *env, name string) {
	t.Helper()
	if _, err := e.m.Nodes().SetLabels(e.ctx, name, protocol.Labels{"pool": "p"}); err != nil {
		t.Fatal(err)
	}
}

func setStatus(t *testing.T, e *env, name string, st store.NodeStatus) {
	t.Helper()
	if _, err := e.s.Store.DB.ExecContext(e.ctx, "UPDATE nodes SET status = ? WHERE name = ?", st, name); err != nil {
		t.Fatal(err)
	}
}

// TestRoutingOverAChangingPool: every policy decides among the members
// running at the fire's moment while members join and leave: round_robin
// stays fair, failover moves to the next and back, a newcomer never takes
// a failover task from a senior member, and hash moves only the keys of a
// member that came or went.
func TestRoutingOverAChangingPool(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, s storetest.NamedStore) {
		// A long grace: the top-ranked claimant always wins, even on a loaded
		// machine (losers learn the winner within milliseconds anyway).
		e := newEnv(t, s, func(c *master.Config) { c.ClaimGrace = 2 * time.Second })
		for _, n := range []string{"a", "b", "c", "d"} {
			labelledWorker(t, e, n, `{"pool":"p"}`, store.ModeAuto, store.StatusRunning)
		}
		labelledWorker(t, e, "x", `{"pool":"other"}`, store.ModeAuto, store.StatusRunning)
		// d joins later: it starts in another pool.
		if _, err := e.m.Nodes().SetLabels(e.ctx, "d", protocol.Labels{"pool": "later"}); err != nil {
			t.Fatal(err)
		}
		fire := claimBase
		next := func() time.Time { fire = fire.Add(time.Second); return fire }

		t.Run("round_robin", func(t *testing.T) {
			id := pooledTask(t, e, "rr", protocol.RoutingRoundRobin, nil)
			got := ""
			for range 6 {
				got += claimAll(t, e, id, next(), "a", "b", "c")
			}
			if got != "abcabc" {
				t.Errorf("three members: winners %s, want abcabc", got)
			}
			setStatus(t, e, "b", store.StatusOffline) // b leaves (down)
			got = ""
			for range 4 {
				got += claimAll(t, e, id, next(), "a", "c")
			}
			if got != "acac" {
				t.Errorf("b down: winners %s, want acac", got)
			}
			setStatus(t, e, "b", store.StatusRunning)
		})

		t.Run("failover", func(t *testing.T) {
			id := pooledTask(t, e, "fo", protocol.RoutingFailover, nil)
			// Equal priorities: the longest-serving member (a) holds it.
			for range 3 {
				if w := claimAll(t, e, id, next(), "a", "b", "c"); w != "a" {
					t.Fatalf("failover: %s won, want a", w)
				}
			}
			setStatus(t, e, "a", store.StatusOffline)
			if w := claimAll(t, e, id, next(), "b", "c"); w != "b" {
				t.Errorf("a down: %s won, want b (next by seniority)", w)
			}
			setStatus(t, e, "a", store.StatusRunning)
			if w := claimAll(t, e, id, next(), "a", "b", "c"); w != "a" {
				t.Errorf("a back: %s won, want a", w)
			}
		})

		t.Run("hash", func(t *testing.T) {
			const keys = 24
			ids := make([]string, keys)
			before := map[string]string{}
			for k := range keys {
				ids[k] = pooledTask(t, e, fmt.Sprintf("hash-%d", k), protocol.RoutingHash, map[string]string{"k": fmt.Sprintf("key-%d", k)})
				before[ids[k]] = claimAll(t, e, ids[k], next(), "a", "b", "c")
			}
			join(t, e, "d") // d joins
			toD := 0
			for _, id := range ids {
				w := claimAll(t, e, id, next(), "a", "b", "c", "d")
				switch {
				case w == "d":
					toD++
				case w != before[id]:
					t.Errorf("task %s moved from %s to %s when d joined; only keys moving to d may move", id, before[id], w)
				}
				before[id] = w
			}
			if toD == 0 {
				t.Errorf("no key moved to the new member d out of %d", keys)
			}
			setStatus(t, e, "b", store.StatusOffline) // b goes
			for _, id := range ids {
				w := claimAll(t, e, id, next(), "a", "c", "d")
				if before[id] != "b" && w != before[id] {
					t.Errorf("task %s moved from %s to %s when b left; only b's keys may move", id, before[id], w)
				}
			}
		})

		// x, in another pool, never claimed anything it could win.
		if n, err := e.m.Claim(e.ctx, e.node("x"), protocol.ClaimRequest{TaskID: "nope", FireAt: claimBase}); err == nil {
			t.Errorf("a claim by x for an unknown task: %+v", n)
		}
	})
}
