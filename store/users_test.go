package store_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/schedulemaster-go/schedulemaster/store"
	"github.com/schedulemaster-go/schedulemaster/store/storetest"
)

func addStoreUser(t *testing.T, ctx context.Context, s storetest.NamedStore, name, role string) {
	t.Helper()
	if err := store.CreateUser(ctx, s.Store.DB, &store.User{Username: name, PasswordHash: "hash-" + name, Role: role}); err != nil {
		t.Fatalf("CreateUser(%s): %v", name, err)
	}
}

func mustUser(t *testing.T, ctx context.Context, s storetest.NamedStore, name string) *store.User {
	t.Helper()
	u, err := store.GetUser(ctx, s.Store.DB, name)
	if err != nil {
		t.Fatalf("GetUser(%s): %v", name, err)
	}
	return u
}

func TestUserListAndUpdates(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, s storetest.NamedStore) {
		ctx := storetest.Ctx(t)
		db := s.Store.DB

		us, err := store.ListUsers(ctx, db, 50, 0)
		if err != nil || len(us) != 0 {
			t.Fatalf("ListUsers on an empty store = %v, %v", us, err)
		}
		for _, n := range []string{"carol", "alice", "bob"} {
			addStoreUser(t, ctx, s, n, store.RoleViewer)
		}
		if err := store.CreateUser(ctx, db, &store.User{Username: "bob", PasswordHash: "x", Role: store.RoleViewer}); !errors.Is(err, store.ErrDuplicate) {
			t.Fatalf("duplicate CreateUser = %v, want ErrDuplicate", err)
		}
		us, err = store.ListUsers(ctx, db, 0, 0)
		if err != nil || len(us) != 3 || us[0].Username != "alice" || us[2].Username != "carol" {
			t.Fatalf("ListUsers(all) = %+v, %v; want alice, bob, carol", us, err)
		}
		us, err = store.ListUsers(ctx, db, 2, 1)
		if err != nil || len(us) != 2 || us[0].Username != "bob" || us[1].Username != "carol" {
			t.Fatalf("ListUsers(2, 1) = %+v, %v; want bob, carol", us, err)
		}

		if err := store.UpdateUserRole(ctx, db, "alice", store.RoleAdmin); err != nil {
			t.Fatal(err)
		}
		if u := mustUser(t, ctx, s, "alice"); u.Role != store.RoleAdmin {
			t.Fatalf("alice role = %q, want admin", u.Role)
		}
		// Setting the same value again is not an error (MySQL counts changed rows).
		if err := store.UpdateUserRole(ctx, db, "alice", store.RoleAdmin); err != nil {
			t.Fatalf("same role again: %v", err)
		}
		if err := store.UpdateUserRole(ctx, db, "alice", "root"); err == nil {
			t.Fatal("UpdateUserRole accepted role root")
		}

		if err := store.SetUserEmail(ctx, db, "bob", "bob@example.com"); err != nil {
			t.Fatal(err)
		}
		if err := store.SetUserPassword(ctx, db, "bob", "new-hash"); err != nil {
			t.Fatal(err)
		}
		if err := store.SetUserDisabled(ctx, db, "bob", true); err != nil {
			t.Fatal(err)
		}
		u := mustUser(t, ctx, s, "bob")
		if u.Email != "bob@example.com" || u.PasswordHash != "new-hash" || !u.Disabled || u.UpdatedAt.Before(u.CreatedAt) {
			t.Fatalf("bob after updates: %+v", u)
		}
		if err := store.SetUserDisabled(ctx, db, "bob", false); err != nil {
			t.Fatal(err)
		}
		if err := store.SetUserEmail(ctx, db, "bob", ""); err != nil {
			t.Fatal(err)
		}
		if u := mustUser(t, ctx, s, "bob"); u.Disabled || u.Email != "" {
			t.Fatalf("bob after enable and clear email: %+v", u)
		}
		if err := store.SetUserPassword(ctx, db, "bob", ""); err == nil {
			t.Fatal("SetUserPassword accepted an empty hash")
		}

		for name, fn := range map[string]func() error{
			"role":     func() error { return store.UpdateUserRole(ctx, db, "nobody", store.RoleViewer) },
			"disable":  func() error { return store.SetUserDisabled(ctx, db, "nobody", true) },
			"enable":   func() error { return store.SetUserDisabled(ctx, db, "nobody", false) },
			"password": func() error { return store.SetUserPassword(ctx, db, "nobody", "h") },
			"email":    func() error { return store.SetUserEmail(ctx, db, "nobody", "a@b.c") },
		} {
			if err := fn(); !errors.Is(err, store.ErrNotFound) {
				t.Errorf("%s of an unknown user = %v, want ErrNotFound", name, err)
			}
		}
		if n, _ := store.CountUsers(ctx, db); n != 3 {
			t.Fatalf("CountUsers = %d, want 3 (updates of unknown users created none)", n)
		}
	})
}

func TestLastAdminIsKept(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, s storetest.NamedStore) {
		ctx := storetest.Ctx(t)
		db := s.Store.DB
		addStoreUser(t, ctx, s, "root", store.RoleAdmin)
		addStoreUser(t, ctx, s, "ops", store.RoleAdmin)
		addStoreUser(t, ctx, s, "eve", store.RoleViewer)

		count := func(want int) {
			t.Helper()
			n, err := store.CountActiveAdmins(ctx, db)
			if err != nil || n != want {
				t.Fatalf("CountActiveAdmins = %d, %v; want %d", n, err, want)
			}
		}
		count(2)
		if err := store.SetUserDisabled(ctx, db, "ops", true); err != nil {
			t.Fatal(err)
		}
		count(1)
		// root is now the only enabled admin: neither demote nor disable.
		if err := store.UpdateUserRole(ctx, db, "root", store.RoleViewer); !errors.Is(err, store.ErrLastAdmin) {
			t.Fatalf("demote the last admin = %v, want ErrLastAdmin", err)
		}
		if err := store.SetUserDisabled(ctx, db, "root", true); !errors.Is(err, store.ErrLastAdmin) {
			t.Fatalf("disable the last admin = %v, want ErrLastAdmin", err)
		}
		if u := mustUser(t, ctx, s, "root"); u.Role != store.RoleAdmin || u.Disabled {
			t.Fatalf("root after refused changes: %+v", u)
		}
		// Changing a disabled admin or a viewer is fine, and so is re-enabling.
		if err := store.UpdateUserRole(ctx, db, "ops", store.RoleViewer); err != nil {
			t.Fatal(err)
		}
		if err := store.SetUserDisabled(ctx, db, "eve", true); err != nil {
			t.Fatal(err)
		}
		if err := store.UpdateUserRole(ctx, db, "eve", store.RoleAdmin); err != nil {
			t.Fatal(err)
		}
		count(1) // eve is admin but disabled
		if err := store.SetUserDisabled(ctx, db, "eve", false); err != nil {
			t.Fatal(err)
		}
		count(2)
		// With a second enabled admin, root may step down.
		if err := store.UpdateUserRole(ctx, db, "root", store.RoleViewer); err != nil {
			t.Fatal(err)
		}
		count(1)
		if err := store.SetUserDisabled(ctx, db, "eve", true); !errors.Is(err, store.ErrLastAdmin) {
			t.Fatalf("disable eve, the last admin = %v, want ErrLastAdmin", err)
		}
	})
}

// TestLastAdminConcurrentDemotions: two admins demote each other at once;
// exactly one change may win, so one enabled admin is left.
func TestLastAdminConcurrentDemotions(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, s storetest.NamedStore) {
		ctx := storetest.Ctx(t)
		db := s.Store.DB
		for round := 0; round < 5; round++ {
			a, b := fmt.Sprintf("a%d", round), fmt.Sprintf("b%d", round)
			addStoreUser(t, ctx, s, a, store.RoleAdmin)
			addStoreUser(t, ctx, s, b, store.RoleAdmin)
			if round > 0 {
				// The previous round's survivor steps aside so a and b are the only admins.
				for _, u := range []string{fmt.Sprintf("a%d", round-1), fmt.Sprintf("b%d", round-1)} {
					if err := store.UpdateUserRole(ctx, db, u, store.RoleViewer); err != nil {
						t.Fatal(err)
					}
				}
			}
			var wg sync.WaitGroup
			errs := make([]error, 2)
			for i, fn := range []func() error{
				func() error { return store.UpdateUserRole(ctx, db, a, store.RoleViewer) },
				func() error { return store.SetUserDisabled(ctx, db, b, true) },
			} {
				wg.Add(1)
				go func() { defer wg.Done(); errs[i] = fn() }()
			}
			wg.Wait()
			ok := 0
			for _, err := range errs {
				switch {
				case err == nil:
					ok++
				case !errors.Is(err, store.ErrLastAdmin):
					t.Fatalf("round %d: unexpected error %v", round, err)
				}
			}
			n, err := store.CountActiveAdmins(ctx, db)
			if err != nil || n != 1 || ok != 1 {
				t.Fatalf("round %d: %d changes succeeded, %d enabled admins left (%v); want 1 and 1", round, ok, n, err)
			}
			if round < 4 {
				// Restore a and b as enabled admins for the hand-over above.
				_ = store.UpdateUserRole(ctx, db, a, store.RoleAdmin)
				_ = store.SetUserDisabled(ctx, db, b, false)
			}
		}
	})
}
