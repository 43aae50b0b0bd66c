package master_test

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/schedulemaster-go/schedulemaster/master"
	"github.com/schedulemaster-go/schedulemaster/protocol"
	"github.com/schedulemaster-go/schedulemaster/store"
	"github.com/schedulemaster-go/schedulemaster/store/storetest"
)

// labelledWorker stores a worker node that declares labels.
func labelledWorker(t *testing.T, e *env, name, labels, mode string, status store.NodeStatus) {
	t.Helper()
	n := &store.Node{Name: name, Type: store.TypeWorker, Protocol: "http", Host: "127.0.0.1:1", Status: status,
		DesiredStatus: status, Priority: 1, MaxConcurrency: 5, Mode: mode, Secret: protocol.NewSecret(), Labels: labels}
	if err := store.CreateNode(e.ctx, e.s.Store.DB, n); err != nil {
		t.Fatal(err)
	}
}

func selectedOf(t *testing.T, e *env, id string) []string {
	t.Helper()
	tk, err := e.m.Tasks().Get(e.ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	return tk.Selected
}

// TestSelectorMembersFollowLabels: a task's selected members are the
// approved workers whose labels match, whatever their status, and follow
// admin labels (which win) at once; only members win claims.
func TestSelectorMembersFollowLabels(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, s storetest.NamedStore) {
		e := newEnv(t, s)
		labelledWorker(t, e, "a", `{"pool":"p","zone":"eu-1"}`, store.ModeAuto, store.StatusRunning)
		labelledWorker(t, e, "b", `{"pool":"p","zone":"eu-2"}`, store.ModeAuto, store.StatusOffline)
		labelledWorker(t, e, "c", `{"pool":"q"}`, store.ModeAuto, store.StatusRunning)
		labelledWorker(t, e, "d", `{"pool":"p"}`, store.ModePending, store.StatusOffline)
		labelledWorker(t, e, "n", `{}`, store.ModeManual, store.StatusRunning)

		in := httpInput("n")
		in.Selector = " zone in (eu-2, eu-1) ,pool=p "
		tk, err := e.m.Tasks().Create(e.ctx, in, "admin")
		if err != nil {
			t.Fatal(err)
		}
		if tk.Selector != "pool=p,zone in (eu-1,eu-2)" {
			t.Errorf("selector stored as %q, want the canonical spelling", tk.Selector)
		}
		if got := tk.Selected; !slices.Equal(got, []string{"a", "b"}) {
			t.Errorf("selected = %v, want [a b] (the pending d and the other pool's c are not members)", got)
		}
		if !slices.Equal(tk.Executors, []string{"n"}) {
			t.Errorf("named executors = %v, want [n]", tk.Executors)
		}

		// An admin label moves c into the pool and a out of it.
		if _, err := e.m.Nodes().SetLabels(e.ctx, "c", protocol.Labels{"pool": "p", "zone": "eu-1"}); err != nil {
			t.Fatal(err)
		}
		if _, err := e.m.Nodes().SetLabels(e.ctx, "a", protocol.Labels{"pool": "gone"}); err != nil {
			t.Fatal(err)
		}
		if got := selectedOf(t, e, tk.ID); !slices.Equal(got, []string{"b", "c"}) {
			t.Errorf("after the admin labels: selected = %v, want [b c]", got)
		}
		if got := master.NodeLabels(e.node("a"))["pool"]; got != "gone" {
			t.Errorf("a's label in force = %q, want the admin's", got)
		}
		if got := master.DeclaredLabels(e.node("a"))["pool"]; got != "p" {
			t.Errorf("a's declared label = %q, want it kept beside the admin's", got)
		}
		if _, err := e.m.Nodes().SetLabels(e.ctx, "a", protocol.Labels{"bad key!": "x"}); !isFieldErrors(err, "labels") {
			t.Errorf("a bad label: %v, want a field error on labels", err)
		}

		// Claims: a member wins, the former member is refused.
		if err := store.SetTaskStatus(e.ctx, s.Store.DB, tk.ID, []store.TaskStatus{store.TaskStopped}, store.TaskRunning); err != nil {
			t.Fatal(err)
		}
		fire := time.Now().UTC().Truncate(time.Hour)
		resp, err := e.m.Claim(e.ctx, e.node("c"), protocol.ClaimRequest{TaskID: tk.ID, FireAt: fire})
		if err != nil {
			t.Fatalf("claim by member c: %v", err)
		}
		if !resp.Won {
			t.Errorf("claim by c, the only running selected member besides n: %+v", resp)
		}
		_, err = e.m.Claim(e.ctx, e.node("a"), protocol.ClaimRequest{TaskID: tk.ID, FireAt: fire.Add(-time.Hour)})
		if !errors.Is(err, master.ErrForbidden) {
			t.Errorf("claim by a, no longer a member: %v, want forbidden", err)
		}
	})
}

// TestSelectorRefusalsPointAtTheCharacter: a bad selector is a field error
// that names the character, and changes nothing.
func TestSelectorRefusalsPointAtTheCharacter(t *testing.T) {
	t.Parallel()
	e := newEnv(t, storetest.OpenSQLite(t))
	labelledWorker(t, e, "a", `{"pool":"p"}`, store.ModeAuto, store.StatusRunning)
	in := httpInput()
	in.Selector = "pool in p"
	_, err := e.m.Tasks().Create(e.ctx, in, "admin")
	var fe protocol.FieldErrors
	if !errors.As(err, &fe) || !strings.Contains(fe["selector"], "at character") {
		t.Fatalf("CreateTask with a bad selector: %v, want a selector field error naming the character", err)
	}
	if _, n, _ := e.m.Tasks().List(e.ctx, store.TaskFilter{Limit: 10}); n != 0 {
		t.Errorf("%d tasks stored after a refusal", n)
	}
	if _, err := e.m.Pools().MatchSelector(e.ctx, "pool=p,\x00"); !errors.Is(err, master.ErrInvalid) {
		t.Errorf("MatchSelector with a NUL: %v, want invalid", err)
	}
	m, err := e.m.Pools().MatchSelector(e.ctx, "pool = p")
	if err != nil || !slices.Equal(m.Running, []string{"a"}) || m.Selector != "pool=p" {
		t.Errorf("MatchSelector(pool = p) = %+v, %v; want running [a], canonical pool=p", m, err)
	}
	// A selector alone needs no named executor, and no worker is picked for it.
	in = httpInput()
	in.Selector = "pool=empty"
	tk, err := e.m.Tasks().Create(e.ctx, in, "admin")
	if err != nil {
		t.Fatal(err)
	}
	if len(tk.Executors) != 0 || len(tk.Selected) != 0 {
		t.Errorf("a task selecting an empty pool got executors %v, selected %v", tk.Executors, tk.Selected)
	}
}

// TestPoolsGroupWorkersAndApprovalsLetMembersJoin: the Pools view groups
// workers by a label's value with the tasks that select them; an approved
// pool lets a new worker with its label skip the per-node approval, and the
// approval of a pool approves the members already waiting.
func TestPoolsGroupWorkersAndApprovalsLetMembersJoin(t *testing.T) {
	t.Parallel()
	e := newEnv(t, storetest.OpenSQLite(t))
	labelledWorker(t, e, "a", `{"pool":"p"}`, store.ModeAuto, store.StatusRunning)
	labelledWorker(t, e, "b", `{"pool":"p"}`, store.ModeAuto, store.StatusOffline)
	labelledWorker(t, e, "c", `{"pool":"q"}`, store.ModeAuto, store.StatusRunning)
	labelledWorker(t, e, "w", `{"pool":"p"}`, store.ModePending, store.StatusOffline)
	in := httpInput()
	in.Selector = "pool=p"
	tk, err := e.m.Tasks().Create(e.ctx, in, "admin")
	if err != nil {
		t.Fatal(err)
	}
	pools, err := e.m.Pools().List(e.ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	if len(pools) != 2 || pools[0].Label != "pool=p" || pools[1].Label != "pool=q" {
		t.Fatalf("pools = %+v, want pool=p and pool=q", pools)
	}
	p := pools[0]
	if len(p.Members) != 2 || p.Running != 1 || len(p.Tasks) != 1 || p.Tasks[0].ID != tk.ID || p.Tasks[0].Title != "ping" {
		t.Errorf("pool=p = %+v, want members a and b (pending w left out), one running, the task", p)
	}
	if len(pools[1].Tasks) != 0 {
		t.Errorf("pool=q has tasks %+v; none selects it", pools[1].Tasks)
	}
	if _, err := e.m.Pools().Get(e.ctx, "pool=none"); !errors.Is(err, master.ErrNotFound) {
		t.Errorf("GetPool of an empty pool: %v, want not found", err)
	}
	if err := e.m.Pools().Approve(e.ctx, "pool=p,zone=x", "admin"); !errors.Is(err, master.ErrInvalid) {
		t.Errorf("approving two labels at once: %v, want invalid", err)
	}
	if err := e.m.Pools().Approve(e.ctx, "pool=p", "admin"); err != nil {
		t.Fatal(err)
	}
	if mode := e.node("w").Mode; mode != store.ModeAuto {
		t.Errorf("pending member w after its pool's approval: mode %s, want auto", mode)
	}
	if p, err := e.m.Pools().Get(e.ctx, "pool=p"); err != nil || !p.Approved {
		t.Errorf("GetPool(pool=p) after approval = %+v, %v", p, err)
	}
	if err := e.m.Pools().Revoke(e.ctx, "pool=p"); err != nil {
		t.Fatal(err)
	}
	if err := e.m.Pools().Revoke(e.ctx, "pool=p"); !errors.Is(err, master.ErrNotFound) {
		t.Errorf("revoking twice: %v, want not found", err)
	}
}

// TestOfflineWorkersArePrunedAfterTheSetting: auto workers offline for
// longer than prune_offline_after are deleted with their memberships;
// manual ones and recent ones stay.
func TestOfflineWorkersArePrunedAfterTheSetting(t *testing.T) {
	t.Parallel()
	s := storetest.OpenSQLite(t)
	e := newEnv(t, s)
	labelledWorker(t, e, "old", `{"pool":"p"}`, store.ModeAuto, store.StatusOffline)
	labelledWorker(t, e, "recent", `{"pool":"p"}`, store.ModeAuto, store.StatusOffline)
	labelledWorker(t, e, "pet", `{"pool":"p"}`, store.ModeManual, store.StatusOffline)
	in := httpInput()
	in.Selector = "pool=p"
	tk, err := e.m.Tasks().Create(e.ctx, in, "admin")
	if err != nil {
		t.Fatal(err)
	}
	long := time.Now().UTC().Add(-25 * time.Hour)
	for _, name := range []string{"old", "pet"} {
		if _, err := s.Store.DB.ExecContext(e.ctx, "UPDATE nodes SET updated_at = ?, last_seen = ? WHERE name = ?", long, long, name); err != nil {
			t.Fatal(err)
		}
	}
	pruned, err := store.PruneOfflineWorkers(e.ctx, s.Store.DB, time.Now().Add(-master.DefaultPruneOfflineAfter), 10)
	if err != nil || !slices.Equal(pruned, []string{"old"}) {
		t.Fatalf("pruned %v, %v; want [old]", pruned, err)
	}
	if got := selectedOf(t, e, tk.ID); !slices.Equal(got, []string{"pet", "recent"}) {
		t.Errorf("selected after the prune = %v, want [pet recent]", got)
	}
}
