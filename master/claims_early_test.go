package master_test

import (
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/schedulemaster-go/schedulemaster/master"
	"github.com/schedulemaster-go/schedulemaster/protocol"
	"github.com/schedulemaster-go/schedulemaster/store"
	"github.com/schedulemaster-go/schedulemaster/store/storetest"
)

// A claim is decided at the fire's time: a lower-ranked executor that claims
// a fire early (a fast clock, or on purpose) waits until the fire is due by
// the master's clock plus its grace, so the ranked executor claiming at the
// fire's time wins; a fire further ahead than ClaimSkew plus ClaimHold is
// refused as too early and nothing is recorded.
func TestClaimIsDecidedAtTheFiresTime(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, s storetest.NamedStore) {
		// A grace a loaded machine cannot outlast: the ranked executor's
		// claim "at the fire's time" may come a second late under -race.
		const grace = 1500 * time.Millisecond
		e := newEnv(t, s, func(c *master.Config) { c.ClaimGrace = grace })
		// x is a standby (weight 0): y ranks first at every fire.
		id := runningTask(t, e, map[string]int{"x": 0, "y": 1})

		// Far ahead: refused, with the time to come back, recording nothing.
		far := time.Now().Truncate(time.Second).Add(10 * time.Second)
		resp, err := e.m.Claim(e.ctx, e.node("x"), protocol.ClaimRequest{TaskID: id, FireAt: far, RunID: "early-x"})
		if master.KindOf(err) != master.KindTooEarly || resp.Won {
			t.Fatalf("claim 10 s ahead: %+v %v, want too early", resp, err)
		}
		if ra := master.RetryAfter(err); ra < 5*time.Second || ra > 10*time.Second {
			t.Fatalf("claim 10 s ahead: retry after %s, want about 8 s", ra)
		}
		if !strings.Contains(master.Message(err), "ahead of the master's clock") {
			t.Fatalf("too early refusal says %q", master.Message(err))
		}
		if n := e.claimsOf("x"); n != 0 {
			t.Fatalf("a refused early claim was recorded (%d claims)", n)
		}

		// Within the hold: x claims early, y at the fire's time; y wins and
		// x is told so, never before the fire is due.
		// 2-3 s ahead: past the skew allowance, within what the master holds.
		fire := time.Now().Truncate(time.Second).Add(3 * time.Second)
		var wg sync.WaitGroup
		var xResp, yResp protocol.ClaimResponse
		var xErr, yErr error
		var xAt time.Time
		wg.Add(2)
		go func() {
			defer wg.Done()
			xResp, xErr = e.m.Claim(e.ctx, e.node("x"), protocol.ClaimRequest{TaskID: id, FireAt: fire, RunID: "x-1"})
			xAt = time.Now()
		}()
		go func() {
			defer wg.Done()
			time.Sleep(time.Until(fire)) // the ranked executor claims at the fire's time
			yResp, yErr = e.m.Claim(e.ctx, e.node("y"), protocol.ClaimRequest{TaskID: id, FireAt: fire, RunID: "y-1"})
		}()
		wg.Wait()
		if xErr != nil || yErr != nil {
			t.Fatalf("claims: x %v, y %v", xErr, yErr)
		}
		if !yResp.Won || yResp.Winner != "y" || xResp.Won || xResp.Winner != "y" {
			t.Fatalf("early standby against the ranked executor at the fire's time: x %+v, y %+v; want y to win and x told so", xResp, yResp)
		}
		if xAt.Before(fire) {
			t.Fatalf("the early claim was answered %s before the fire was due", fire.Sub(xAt))
		}

		// The ranked executor is dead: the standby's early claim wins, but
		// only once the fire is due plus its grace.
		fire2 := time.Now().Truncate(time.Second).Add(3 * time.Second)
		resp, err = e.m.Claim(e.ctx, e.node("x"), protocol.ClaimRequest{TaskID: id, FireAt: fire2, RunID: "x-2"})
		if err != nil || !resp.Won {
			t.Fatalf("lone standby: %+v %v, want it to win", resp, err)
		}
		if at := time.Now(); at.Before(fire2.Add(grace)) {
			t.Fatalf("the standby won %s before the fire's time plus its grace", fire2.Add(grace).Sub(at))
		}

		// The ranked executor's own early claim (within the skew) wins at once.
		fire3 := time.Now().Truncate(time.Second).Add(2 * time.Second)
		resp, err = e.m.Claim(e.ctx, e.node("y"), protocol.ClaimRequest{TaskID: id, FireAt: fire3, RunID: "y-3"})
		if err != nil || !resp.Won {
			t.Fatalf("ranked executor within the skew: %+v %v, want a win", resp, err)
		}
	})
}

// A fire whose claim's winner reports no run within the task's timeout plus
// the margin is recorded as a misfire naming the node, under the run id the
// claim named; a fire reported in time is not; a report that comes late
// replaces the record.
func TestUnrunClaimBecomesAMisfire(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, s storetest.NamedStore) {
		const margin = 200 * time.Millisecond
		e := newEnv(t, s, func(c *master.Config) { c.UnrunClaimMargin = margin })
		id := runningTask(t, e, map[string]int{"x": 1}) // timeout 1s
		now := time.Now().Truncate(time.Second)
		claim := func(fire time.Time, run string) {
			t.Helper()
			resp, err := e.m.Claim(e.ctx, e.node("x"), protocol.ClaimRequest{TaskID: id, FireAt: fire, RunID: run})
			if err != nil || !resp.Won {
				t.Fatalf("claim of %s: %+v %v", fire, resp, err)
			}
		}
		claim(now.Add(-10*time.Second), "unrun-1")
		claim(now.Add(-9*time.Second), "reported-1")
		claim(now.Add(-time.Second), "unrun-2") // due about a second from now
		if _, err := store.InsertRuns(e.ctx, s.Store.DB, []store.Run{{ID: "reported-1", TaskID: id, Node: "x",
			ScheduledAt: now.Add(-9 * time.Second), StartedAt: now.Add(-9 * time.Second), EndedAt: now.Add(-8 * time.Second),
			Result: store.ResultSuccess, Attempt: 1}}); err != nil {
			t.Fatal(err)
		}
		waitRun := func(runID string) *store.Run {
			t.Helper()
			deadline := time.Now().Add(30 * time.Second)
			for {
				e.m.RecordUnrunClaims(e.ctx)
				r, err := e.m.Runs().Get(e.ctx, runID)
				if err == nil {
					return r
				}
				if !errors.Is(err, master.ErrNotFound) || time.Now().After(deadline) {
					t.Fatalf("run %s of an unrun claim: %v", runID, err)
				}
				time.Sleep(50 * time.Millisecond)
			}
		}
		for _, runID := range []string{"unrun-1", "unrun-2"} {
			r := waitRun(runID)
			if r.Result != store.ResultSkipped || r.Node != "x" || r.TaskID != id ||
				!strings.HasPrefix(r.Output, "misfire: node x won the claim") {
				t.Fatalf("unrun claim's record: %+v", r)
			}
			if runID == "unrun-2" && time.Since(r.ScheduledAt) < time.Second+margin {
				t.Fatalf("recorded %s after its fire, before the timeout plus the margin", r.EndedAt.Sub(r.ScheduledAt))
			}
		}
		r, err := e.m.Runs().Get(e.ctx, "reported-1")
		if err != nil || r.Result != store.ResultSuccess {
			t.Fatalf("the reported run: %+v %v, want it untouched", r, err)
		}
		// The winner's report comes after all: it replaces the record.
		late := store.Run{ID: "unrun-1", TaskID: id, Node: "x", ScheduledAt: now.Add(-10 * time.Second),
			StartedAt: now.Add(-10 * time.Second), EndedAt: now.Add(-9 * time.Second), Result: store.ResultSuccess, Attempt: 1}
		if _, err := store.InsertRuns(e.ctx, s.Store.DB, []store.Run{late}); err != nil {
			t.Fatal(err)
		}
		if r, err := e.m.Runs().Get(e.ctx, "unrun-1"); err != nil || r.Result != store.ResultSuccess {
			t.Fatalf("after the late report: %+v %v, want its success", r, err)
		}
		// Another node's report of that id does not replace it.
		if r, err := e.m.Runs().Get(e.ctx, "unrun-2"); err != nil || r.Result != store.ResultSkipped {
			t.Fatalf("unrun-2: %+v %v", r, err)
		}
		forged := store.Run{ID: "unrun-2", TaskID: id, Node: "y", ScheduledAt: now.Add(-time.Second),
			StartedAt: now, EndedAt: now, Result: store.ResultSuccess, Attempt: 1}
		if _, err := store.InsertRuns(e.ctx, s.Store.DB, []store.Run{forged}); err != nil {
			t.Fatal(err)
		}
		if r, err := e.m.Runs().Get(e.ctx, "unrun-2"); err != nil || r.Result != store.ResultSkipped || r.Node != "x" {
			t.Fatalf("unrun-2 after another node's report: %+v %v, want the record kept", r, err)
		}
	})
}
