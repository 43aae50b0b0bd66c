package store_test

import (
	"errors"
	"testing"

	"github.com/schedulemaster-go/schedulemaster/store"
	"github.com/schedulemaster-go/schedulemaster/store/storetest"
)

// TestConnectionsByNameAndVersion: a connection's name is unique in its
// project; a project's own connection wins over the one for every project
// of that name; an update or delete from a version that moved on is a
// conflict; lists leave the sealed secret out; on every engine.
func TestConnectionsByNameAndVersion(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, s storetest.NamedStore) {
		ctx, db := storetest.Ctx(t), s.Store.DB
		all := &store.Connection{ID: "c0", ProjectID: 0, Name: "bus", Kind: "nats", Address: "a:1", SecretEnc: "sealed", TLS: "{}", Options: "{}"}
		own := &store.Connection{ID: "c1", ProjectID: store.DefaultProjectID, Name: "bus", Kind: "nats", Address: "b:2", SecretEnc: "x", TLS: "{}", Options: "{}"}
		db0 := &store.Connection{ID: "c2", ProjectID: 0, Name: "db", Kind: "postgres", Address: "c:3", SecretEnc: "", TLS: "{}", Options: "{}"}
		for _, c := range []*store.Connection{all, own, db0} {
			if err := store.CreateConnection(ctx, db, c); err != nil {
				t.Fatal(err)
			}
		}
		dup := &store.Connection{ID: "c3", ProjectID: store.DefaultProjectID, Name: "bus", Kind: "amqp", Address: "d:4", TLS: "{}", Options: "{}"}
		if err := store.CreateConnection(ctx, db, dup); !errors.Is(err, store.ErrDuplicate) {
			t.Fatalf("a second %q in one project: %v", "bus", err)
		}
		got, err := store.ConnectionsNamed(ctx, db, store.DefaultProjectID, []string{"bus", "db", "none"})
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != 2 || got["bus"].ID != "c1" || got["db"].ID != "c2" {
			t.Fatalf("named: %+v", got)
		}
		if got, _ := store.ConnectionsNamed(ctx, db, 999, []string{"bus"}); got["bus"] == nil || got["bus"].ID != "c0" {
			t.Fatalf("another project sees the one for every project: %+v", got)
		}
		own.Address = "b:3"
		if err := store.UpdateConnection(ctx, db, own, 1); err != nil {
			t.Fatal(err)
		}
		if err := store.UpdateConnection(ctx, db, own, 1); !errors.Is(err, store.ErrConflict) {
			t.Fatalf("an update from a version that moved on: %v", err)
		}
		if err := store.DeleteConnection(ctx, db, "c1", 1); !errors.Is(err, store.ErrConflict) {
			t.Fatalf("a delete from a version that moved on: %v", err)
		}
		list, err := store.ListConnections(ctx, db, []int64{0})
		if err != nil {
			t.Fatal(err)
		}
		if len(list) != 2 || list[0].SecretEnc != "" || !list[0].HasSecret || list[1].HasSecret {
			t.Fatalf("list of every project's connections: %+v", list)
		}
		if err := store.DeleteConnection(ctx, db, "c1", 2); err != nil {
			t.Fatal(err)
		}
		if _, err := store.GetConnection(ctx, db, "c1"); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("deleted: %v", err)
		}
	})
}
