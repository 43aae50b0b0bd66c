package master_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/schedulemaster-go/schedulemaster/master"
	"github.com/schedulemaster-go/schedulemaster/store"
	"github.com/schedulemaster-go/schedulemaster/store/storetest"
)

// projectsSetup is a master with projects billing (pools pool=billing) and
// reports (pool=reports), workers wb (pool=billing) and wr (pool=reports),
// and users with roles in them.
type projectsSetup struct {
	*env
}

func setupProjects(t *testing.T, s storetest.NamedStore) projectsSetup {
	t.Helper()
	e := newEnv(t, s)
	for name, pool := range map[string]string{"wb": "billing", "wr": "reports"} {
		if err := store.CreateNode(e.ctx, s.Store.DB, &store.Node{Name: name, Type: store.TypeWorker, Host: "127.0.0.1:1", Protocol: "http",
			Priority: 1, Labels: `{"pool":"` + pool + `"}`}); err != nil {
			t.Fatal(err)
		}
	}
	for _, p := range []master.ProjectInput{{Name: "billing", Pools: []string{"pool=billing"}}, {Name: "reports", Pools: []string{"pool=reports"}}} {
		if _, err := e.m.Projects().Create(e.ctx, p); err != nil {
			t.Fatal(err)
		}
	}
	for _, u := range []struct {
		name, project string
		role          master.ProjectRole
	}{{"bea", "billing", master.ProjectEditor}, {"oli", "billing", master.ProjectOperator}, {"rita", "reports", master.ProjectOwner}} {
		if err := store.CreateUser(e.ctx, s.Store.DB, &store.User{Username: u.name, PasswordHash: "x", Role: store.RoleNone}); err != nil {
			t.Fatal(err)
		}
		if err := e.m.Projects().SetMember(e.ctx, u.project, u.name, u.role); err != nil {
			t.Fatal(err)
		}
	}
	return projectsSetup{e}
}

// as is the context of a request by user now: its memberships read afresh.
func (p projectsSetup) as(name string) *master.Principal {
	p.t.Helper()
	u, err := store.GetUser(p.ctx, p.s.Store.DB, name)
	if err != nil {
		p.t.Fatal(err)
	}
	ms, err := store.MembershipsOf(p.ctx, p.s.Store.DB, name)
	if err != nil {
		p.t.Fatal(err)
	}
	pr := &master.Principal{Name: name, Role: u.Role, Memberships: map[int64]master.ProjectRole{}}
	for id, r := range ms {
		pr.Memberships[id] = master.ProjectRole(r)
	}
	return pr
}

func inProject(project string, executors ...string) master.TaskInput {
	in := httpInput(executors...)
	in.Project = project
	return in
}

// TestProjectsIsolateRolesAndPools: a task of billing is missing for the
// owner of reports (read, act, runs, lists, counts), an operator starts but
// cannot edit, an editor edits; a task outside the project's pools is
// refused naming the pool; keys are unique per project.
func TestProjectsIsolateRolesAndPools(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, s storetest.NamedStore) {
		t.Parallel()
		p := setupProjects(t, s)
		bea := master.WithPrincipal(p.ctx, p.as("bea"))
		oli := master.WithPrincipal(p.ctx, p.as("oli"))
		rita := master.WithPrincipal(p.ctx, p.as("rita"))

		// Pools: billing may run on pool=billing only.
		if _, err := p.m.Tasks().Create(bea, inProject("billing", "wr"), "bea"); !isFieldErrors(err, "executors") || !strings.Contains(master.Message(err), "pool=billing") {
			t.Fatalf("a billing task on a reports worker: %v, want refused naming pool=billing", err)
		}
		sel := inProject("billing")
		sel.Selector = "zone=eu"
		if _, err := p.m.Tasks().Create(bea, sel, "bea"); !isFieldErrors(err, "selector") || !strings.Contains(master.Message(err), "pool=billing") {
			t.Fatalf("a billing task selecting outside its pool: %v", err)
		}
		sel.Selector = "pool=billing,zone=eu"
		if _, err := p.m.Tasks().Create(bea, sel, "bea"); err != nil {
			t.Fatalf("a selector within the pool: %v", err)
		}
		tk, err := p.m.Tasks().Create(bea, inProject("billing", "wb"), "bea")
		if err != nil {
			t.Fatal(err)
		}
		if tk.Project != "billing" {
			t.Fatalf("task project %q", tk.Project)
		}
		// An editor of billing creates nothing in reports, which it may not
		// see: the project is missing for it.
		if _, err := p.m.Tasks().Create(bea, inProject("reports", "wr"), "bea"); master.KindOf(err) != master.KindNotFound {
			t.Fatalf("billing's editor creating in reports: %v, want not found", err)
		}

		// Isolation: the owner of reports sees nothing of billing.
		if _, err := p.m.Tasks().Get(rita, tk.ID); master.KindOf(err) != master.KindNotFound {
			t.Fatalf("reports' owner reads billing's task: %v", err)
		}
		if _, err := p.m.Tasks().Start(rita, tk.ID); master.KindOf(err) != master.KindNotFound {
			t.Fatalf("reports' owner starts billing's task: %v", err)
		}
		if err := p.m.Tasks().Delete(rita, tk.ID); master.KindOf(err) != master.KindNotFound {
			t.Fatalf("reports' owner deletes billing's task: %v", err)
		}
		if _, n, err := p.m.Tasks().List(rita, master.TaskFilter{}); err != nil || n != 0 {
			t.Fatalf("reports' owner lists %d tasks (%v)", n, err)
		}
		if _, _, err := p.m.Runs().List(rita, tk.ID, 10, 0); master.KindOf(err) != master.KindNotFound {
			t.Fatalf("reports' owner lists billing's runs: %v", err)
		}
		d, err := p.m.Reads().ReadDashboard(rita, time.Now(), master.FailureQuery{Window: time.Hour, Scan: 10, Limit: 5}, nil)
		if err != nil || d.Tasks[store.TaskStopped] != 0 {
			t.Fatalf("reports' owner counts billing's tasks: %+v %v", d.Tasks, err)
		}
		if _, n, err := p.m.Tasks().List(bea, master.TaskFilter{}); err != nil || n != 2 {
			t.Fatalf("billing's editor lists %d tasks (%v), want 2", n, err)
		}
		// Pool pages list only the selecting tasks one may read.
		byPool := inProject("billing")
		byPool.Selector = "pool=billing"
		if _, err := p.m.Tasks().Create(bea, byPool, "bea"); err != nil {
			t.Fatal(err)
		}
		poolTasks := func(ctx context.Context) int {
			pools, err := p.m.Pools().List(ctx, "pool")
			if err != nil {
				t.Fatal(err)
			}
			n := 0
			for _, pl := range pools {
				n += len(pl.Tasks)
			}
			return n
		}
		if got := poolTasks(rita); got != 0 {
			t.Fatalf("reports' owner sees %d of billing's tasks on the pools page", got)
		}
		if got := poolTasks(bea); got != 1 {
			t.Fatalf("billing's editor sees %d selecting tasks on the pools page, want 1", got)
		}

		// Roles: the operator may not edit or delete, and its refusal says why.
		upd := inProject("", "wb")
		upd.Title = "renamed"
		if _, err := p.m.Tasks().Update(oli, tk.ID, upd); master.KindOf(err) != master.KindForbidden || !strings.Contains(master.Message(err), "operator") {
			t.Fatalf("operator edits: %v, want forbidden naming its role", err)
		}
		if err := p.m.Tasks().Delete(oli, tk.ID); master.KindOf(err) != master.KindForbidden {
			t.Fatalf("operator deletes: %v", err)
		}
		if _, err := p.m.Tasks().Update(bea, tk.ID, upd); err != nil {
			t.Fatalf("editor edits: %v", err)
		}

		// Membership changes take effect on the next call: demoted, bea
		// may no longer edit; removed, it no longer sees the task.
		if err := p.m.Projects().SetMember(p.ctx, "billing", "bea", master.ProjectViewer); err != nil {
			t.Fatal(err)
		}
		if _, err := p.m.Tasks().Update(master.WithPrincipal(p.ctx, p.as("bea")), tk.ID, upd); master.KindOf(err) != master.KindForbidden {
			t.Fatalf("demoted editor edits: %v", err)
		}
		if err := p.m.Projects().RemoveMember(p.ctx, "billing", "bea"); err != nil {
			t.Fatal(err)
		}
		if _, err := p.m.Tasks().Get(master.WithPrincipal(p.ctx, p.as("bea")), tk.ID); master.KindOf(err) != master.KindNotFound {
			t.Fatalf("removed member reads: %v", err)
		}

		// Keys are unique per project, not across projects.
		keyed := inProject("reports", "wr")
		keyed.Key = "nightly"
		if _, err := p.m.Tasks().Create(rita, keyed, "rita"); err != nil {
			t.Fatal(err)
		}
		keyed2 := inProject("billing", "wb")
		keyed2.Key = "nightly"
		if _, err := p.m.Tasks().Create(p.ctx, keyed2, "admin"); err != nil {
			t.Fatalf("the same key in another project: %v", err)
		}
		if _, err := p.m.Tasks().Create(rita, keyed, "rita"); !isFieldErrors(err, "key") {
			t.Fatalf("the same key twice in one project: %v", err)
		}
	})
}

// TestScopedTokensFollowTheirOwnerNow: a token acts in its one project with
// at most its role and its owner's current role there; it cannot be given
// more than its owner has, nor create a token wider than itself.
func TestScopedTokensFollowTheirOwnerNow(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, s storetest.NamedStore) {
		t.Parallel()
		p := setupProjects(t, s)
		acc := p.m.Accounts()
		if _, _, err := acc.CreateToken(master.WithPrincipal(p.ctx, p.as("oli")), "oli", master.NewToken{Name: "more", Project: "billing", Role: master.ProjectEditor}); !isFieldErrors(err, "role") {
			t.Fatalf("an operator's token as editor: %v, want refused", err)
		}
		if _, _, err := acc.CreateToken(master.WithPrincipal(p.ctx, p.as("oli")), "rita", master.NewToken{Name: "theirs", Project: "reports"}); master.KindOf(err) != master.KindForbidden {
			t.Fatalf("a token for someone else: %v, want forbidden", err)
		}
		plain, tok, err := acc.CreateToken(master.WithPrincipal(p.ctx, p.as("bea")), "bea", master.NewToken{Name: "ci", Project: "billing", Role: master.ProjectOperator,
			ExpiresAt: time.Now().Add(24 * time.Hour)})
		if err != nil {
			t.Fatal(err)
		}
		if tok.ProjectID == 0 || tok.Role != "operator" {
			t.Fatalf("token %+v", tok)
		}
		pr, err := acc.AuthenticateToken(p.ctx, plain, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		billing, err := p.m.Projects().Get(p.ctx, "billing")
		if err != nil {
			t.Fatal(err)
		}
		if r := pr.RoleIn(billing.ID); r != master.ProjectOperator {
			t.Fatalf("token role %q, want operator (capped)", r)
		}
		reports, _ := p.m.Projects().Get(p.ctx, "reports")
		if r := pr.RoleIn(reports.ID); r != "" {
			t.Fatalf("token role in another project %q", r)
		}
		// The token cannot mint a wider one: a cluster token, or editor.
		if _, _, err := acc.CreateToken(master.WithPrincipal(p.ctx, pr), "bea", master.NewToken{Name: "wider", Project: "billing", Role: master.ProjectEditor}); !isFieldErrors(err, "role") {
			t.Fatalf("a token minting an editor token: %v", err)
		}
		// The owner demoted to viewer: the token reads only, on its next use.
		if err := p.m.Projects().SetMember(p.ctx, "billing", "bea", master.ProjectViewer); err != nil {
			t.Fatal(err)
		}
		pr, err = acc.AuthenticateToken(p.ctx, plain, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		if r := pr.RoleIn(billing.ID); r != master.ProjectViewer {
			t.Fatalf("after the owner's demotion the token is %q, want viewer", r)
		}
		tk, err := p.m.Tasks().Create(p.ctx, inProject("billing", "wb"), "admin")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := p.m.Tasks().Start(master.WithPrincipal(p.ctx, pr), tk.ID); master.KindOf(err) != master.KindForbidden {
			t.Fatalf("the demoted owner's token starts a task: %v", err)
		}
	})
}
