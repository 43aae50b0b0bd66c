package master_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/schedulemaster-go/schedulemaster/master"
	"github.com/schedulemaster-go/schedulemaster/protocol"
	"github.com/schedulemaster-go/schedulemaster/store"
	"github.com/schedulemaster-go/schedulemaster/store/storetest"
)

// TestHardening3TokensNeverWiderThanTheirMaker is the token rule as a
// property: for every maker (a person's session, or a token of every scope
// that person could make) and every requested scope (project, role,
// expiry), a child token the engine creates may do in every project only
// what its maker may, is a cluster token only when its maker is, and
// expires no later than its maker. A token limited to one project lists
// and revokes nothing outside it.
func TestHardening3TokensNeverWiderThanTheirMaker(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, s storetest.NamedStore) {
		t.Parallel()
		p := setupProjects(t, s)
		acc := p.m.Accounts()
		if err := store.CreateUser(p.ctx, s.Store.DB, &store.User{Username: "ada", PasswordHash: "x", Role: store.RoleAdmin}); err != nil {
			t.Fatal(err)
		}
		if err := p.m.Projects().SetMember(p.ctx, "reports", "bea", master.ProjectViewer); err != nil {
			t.Fatal(err)
		}
		var projects []int64
		for _, name := range []string{master.DefaultProject, "billing", "reports"} {
			pr, err := p.m.Projects().Get(p.ctx, name)
			if err != nil {
				t.Fatal(err)
			}
			projects = append(projects, pr.ID)
		}
		actions := []master.Action{master.ActRead, master.ActOperate, master.ActEdit, master.ActReadSecrets, master.ActManage}
		roles := []master.ProjectRole{"", master.ProjectOwner, master.ProjectEditor, master.ProjectOperator, master.ProjectViewer}
		names := []string{"", master.DefaultProject, "billing", "reports"}
		now := time.Now()
		expiries := []time.Time{{}, now.Add(2 * time.Hour), now.Add(30 * time.Minute), now.Add(48 * time.Hour)}

		type maker struct {
			desc string
			pr   *master.Principal
		}
		// wider returns why child may do more than parent, or "".
		wider := func(child, parent *master.Principal) string {
			for _, id := range projects {
				for _, a := range actions {
					if child.Can(id, a) && !parent.Can(id, a) {
						return fmt.Sprintf("may %s in project %d, its maker may not", a, id)
					}
				}
			}
			if child.ClusterAdmin() && !parent.ClusterAdmin() {
				return "is a cluster admin, its maker is not"
			}
			if parent.Token != "" && !parent.TokenExpiresAt.IsZero() &&
				(child.TokenExpiresAt.IsZero() || child.TokenExpiresAt.After(parent.TokenExpiresAt)) {
				return fmt.Sprintf("expires %v, after its maker (%v)", child.TokenExpiresAt, parent.TokenExpiresAt)
			}
			return ""
		}
		n := 0
		mint := func(m maker, owner string, proj string, role master.ProjectRole, exp time.Time) (*master.Principal, bool) {
			n++
			plain, _, err := acc.CreateToken(master.WithPrincipal(p.ctx, m.pr), owner, master.NewToken{Name: fmt.Sprintf("t%d", n), Project: proj, Role: role, ExpiresAt: exp})
			if err != nil {
				return nil, false
			}
			child, err := acc.AuthenticateToken(p.ctx, plain, time.Now())
			if err != nil {
				t.Fatalf("%s: the new token is refused: %v", m.desc, err)
			}
			return child, true
		}
		created, refused := 0, 0
		for _, user := range []string{"ada", "bea", "oli", "rita"} {
			session := maker{desc: user + "'s session", pr: p.as(user)}
			var makers []maker
			for _, proj := range names {
				for _, role := range roles {
					for _, exp := range expiries[:2] {
						tok, ok := mint(session, user, proj, role, exp)
						if !ok {
							continue
						}
						if why := wider(tok, session.pr); why != "" {
							t.Fatalf("%s made a token (project %q, role %q) that %s", session.desc, proj, role, why)
						}
						makers = append(makers, maker{desc: fmt.Sprintf("%s's token (project %q, role %q, expires %v)", user, proj, role, !exp.IsZero()), pr: tok})
					}
				}
			}
			for _, m := range makers {
				for _, proj := range names {
					for _, role := range roles {
						for _, exp := range expiries[1:] {
							child, ok := mint(m, user, proj, role, exp)
							if !ok {
								refused++
								continue
							}
							created++
							if why := wider(child, m.pr); why != "" {
								t.Fatalf("%s asked for (project %q, role %q, expiry %v) and made a token that %s", m.desc, proj, role, exp, why)
							}
						}
					}
				}
				if m.pr.TokenProject == 0 {
					continue
				}
				ts, err := acc.ListTokens(master.WithPrincipal(p.ctx, m.pr))
				if err != nil {
					t.Fatal(err)
				}
				for _, tk := range ts {
					if tk.ProjectID != m.pr.TokenProject {
						t.Fatalf("%s lists token %q of project %d", m.desc, tk.Name, tk.ProjectID)
					}
				}
			}
		}
		if created == 0 || refused == 0 {
			t.Fatalf("created %d, refused %d child tokens: the property was not exercised both ways", created, refused)
		}
		t.Logf("%d child tokens created, %d refused, none wider than its maker", created, refused)
	})
}

// TestHardening3ScopedTokenSeesNothingOutsideItsProject: a token limited to
// reports neither lists nor revokes its owner's billing or cluster tokens,
// cannot change its owner's password or e-mail, and a viewer-capped token
// mints only viewers.
func TestHardening3ScopedTokenSeesNothingOutsideItsProject(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, s storetest.NamedStore) {
		t.Parallel()
		p := setupProjects(t, s)
		acc := p.m.Accounts()
		if err := store.CreateUser(p.ctx, s.Store.DB, &store.User{Username: "ada", PasswordHash: "x", Role: store.RoleAdmin}); err != nil {
			t.Fatal(err)
		}
		admin := master.WithPrincipal(p.ctx, p.as("ada"))
		_, cluster, err := acc.CreateToken(admin, "ada", master.NewToken{Name: "cluster"})
		if err != nil {
			t.Fatal(err)
		}
		_, billing, err := acc.CreateToken(admin, "ada", master.NewToken{Name: "billing", Project: "billing"})
		if err != nil {
			t.Fatal(err)
		}
		plain, _, err := acc.CreateToken(admin, "ada", master.NewToken{Name: "reports-viewer", Project: "reports", Role: master.ProjectViewer})
		if err != nil {
			t.Fatal(err)
		}
		pr, err := acc.AuthenticateToken(p.ctx, plain, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		asToken := master.WithPrincipal(p.ctx, pr)
		ts, err := acc.ListTokens(asToken)
		if err != nil {
			t.Fatal(err)
		}
		if len(ts) != 1 || ts[0].Name != "reports-viewer" {
			t.Fatalf("the reports token lists %d tokens: %+v", len(ts), ts)
		}
		for _, other := range []*store.APIToken{cluster, billing} {
			if _, err := acc.RevokeToken(asToken, other.ID); master.KindOf(err) != master.KindNotFound {
				t.Fatalf("the reports token revokes %q: %v, want not found", other.Name, err)
			}
		}
		childPlain, child, err := acc.CreateToken(asToken, "ada", master.NewToken{Name: "child"})
		if err != nil {
			t.Fatal(err)
		}
		reports, _ := p.m.Projects().Get(p.ctx, "reports")
		if child.ProjectID != reports.ID || child.Role != string(master.ProjectViewer) {
			t.Fatalf("a viewer token's child: project %d role %q, want reports viewer", child.ProjectID, child.Role)
		}
		cp, err := acc.AuthenticateToken(p.ctx, childPlain, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		if cp.Can(reports.ID, master.ActEdit) || cp.Can(reports.ID, master.ActManage) {
			t.Fatal("a viewer token's child edits or manages the project")
		}
		u, err := store.GetUser(p.ctx, s.Store.DB, "ada")
		if err != nil {
			t.Fatal(err)
		}
		if err := acc.ChangeOwnEmail(asToken, "ada", "evil@example.com"); master.KindOf(err) != master.KindForbidden {
			t.Fatalf("a token changes its owner's e-mail: %v", err)
		}
		if err := acc.ChangeOwnPassword(asToken, u, "127.0.0.1", "x", "a-new-password-42", "a-new-password-42"); master.KindOf(err) != master.KindForbidden {
			t.Fatalf("a token changes its owner's password: %v", err)
		}
		if got, _ := store.GetUser(p.ctx, s.Store.DB, "ada"); got.Email != "" || got.PasswordHash != "x" {
			t.Fatalf("the owner's account changed: %+v", got)
		}
		// A token that expires makes none that outlives it.
		exp := time.Now().Add(time.Hour).Truncate(time.Second)
		plain, _, err = acc.CreateToken(admin, "ada", master.NewToken{Name: "short", Project: "reports", ExpiresAt: exp})
		if err != nil {
			t.Fatal(err)
		}
		short, err := acc.AuthenticateToken(p.ctx, plain, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		if _, _, err := acc.CreateToken(master.WithPrincipal(p.ctx, short), "ada", master.NewToken{Name: "long", ExpiresAt: exp.Add(time.Hour)}); !isFieldErrors(err, "expires_at") {
			t.Fatalf("a token made a longer-lived one: %v", err)
		}
		_, kid, err := acc.CreateToken(master.WithPrincipal(p.ctx, short), "ada", master.NewToken{Name: "kid"})
		if err != nil {
			t.Fatal(err)
		}
		if kid.ExpiresAt.IsZero() || kid.ExpiresAt.After(exp) {
			t.Fatalf("a child without an expiry asked for expires %v, want its maker's %v", kid.ExpiresAt, exp)
		}
	})
}

// TestHardening3KeepersRevealNoUserNames: a keeper must be a user who may
// read the task's project; a user of another project and a name that is
// no user get the same answer, so an editor learns no user names.
func TestHardening3KeepersRevealNoUserNames(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, s storetest.NamedStore) {
		t.Parallel()
		p := setupProjects(t, s)
		asBea := master.WithPrincipal(p.ctx, p.as("bea"))
		answer := func(keeper string) string {
			in := inProject("billing", "wb")
			in.Keepers = []string{keeper}
			_, err := p.m.Tasks().Create(asBea, in, "bea")
			if err == nil {
				return ""
			}
			if !isFieldErrors(err, "keepers") {
				t.Fatalf("keeper %q: %v, want a field error of keepers", keeper, err)
			}
			var fe protocol.FieldErrors
			errors.As(err, &fe)
			return strings.ReplaceAll(fe["keepers"], keeper, "NAME")
		}
		if got := answer("oli"); got != "" {
			t.Fatalf("a member of billing as keeper: %s", got)
		}
		other, none := answer("rita"), answer("nobody")
		if other == "" || other != none {
			t.Fatalf("a user of another project: %q; no such user: %q; want the same refusal", other, none)
		}
	})
}

// TestHardening3PoolCountsOnlyReadableRuns: a pool's run counts are of the
// runs the viewer may read: the owner of reports sees none of billing's
// failed runs on billing's worker, a cluster admin sees them all.
func TestHardening3PoolCountsOnlyReadableRuns(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, s storetest.NamedStore) {
		t.Parallel()
		p := setupProjects(t, s)
		tk, err := p.m.Tasks().Create(p.ctx, inProject("billing", "wb"), "admin")
		if err != nil {
			t.Fatal(err)
		}
		now := time.Now().UTC()
		var runs []store.Run
		for i := range 4 {
			runs = append(runs, store.Run{ID: fmt.Sprintf("run-pool-%d", i), TaskID: tk.ID, Node: "wb", ScheduledAt: now, StartedAt: now,
				Result: store.ResultFailed, Attempt: 1})
		}
		if _, err := store.InsertRuns(p.ctx, s.Store.DB, runs); err != nil {
			t.Fatal(err)
		}
		count := func(ctx context.Context) (int, int) {
			pools, err := p.m.Pools().List(ctx, "pool")
			if err != nil {
				t.Fatal(err)
			}
			runs, failed := 0, 0
			for _, pl := range pools {
				runs, failed = runs+pl.Runs, failed+pl.Failed
				for _, mb := range pl.Members {
					runs, failed = runs+mb.Runs, failed+mb.Failed
				}
			}
			return runs, failed
		}
		if r, f := count(master.WithPrincipal(p.ctx, p.as("rita"))); r != 0 || f != 0 {
			t.Fatalf("the owner of reports counts %d runs, %d failed of billing's", r, f)
		}
		if r, f := count(master.WithPrincipal(p.ctx, p.as("bea"))); r != 8 || f != 8 {
			t.Fatalf("an editor of billing counts %d runs, %d failed; want 4 on the pool and 4 on its member", r, f)
		}
		if r, f := count(p.ctx); r != 8 || f != 8 {
			t.Fatalf("the system counts %d runs, %d failed; want 4 on the pool and 4 on its member", r, f)
		}
	})
}
