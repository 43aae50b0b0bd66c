package store_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/schedulemaster-go/schedulemaster/store"
	"github.com/schedulemaster-go/schedulemaster/store/storetest"
)

// TestOpenMakesSQLiteFilesPrivate: the data dir is 0700 and the database
// with its -wal and -shm files 0600, on a first start and when they already
// exist with looser modes.
func TestOpenMakesSQLiteFilesPrivate(t *testing.T) {
	t.Parallel()
	check := func(dir, db string) {
		t.Helper()
		if fi, err := os.Stat(dir); err != nil || fi.Mode().Perm() != 0o700 {
			t.Fatalf("data dir: %v %v, want 0700", fi.Mode(), err)
		}
		found := 0
		for _, p := range []string{db, db + "-wal", db + "-shm"} {
			fi, err := os.Stat(p)
			if os.IsNotExist(err) && p != db {
				continue
			}
			if err != nil || fi.Mode().Perm() != 0o600 {
				t.Fatalf("%s: %v %v, want 0600", filepath.Base(p), fi.Mode(), err)
			}
			found++
		}
		if found < 2 {
			t.Fatalf("expected the database and its WAL files, found %d", found)
		}
	}
	open := func(db string) *store.Store {
		t.Helper()
		st, err := store.Open(context.Background(), store.DSN{Dialect: store.SQLite, Path: db}, storetest.Discard())
		if err != nil {
			t.Fatal(err)
		}
		return st
	}
	dir := filepath.Join(t.TempDir(), "data")
	db := filepath.Join(dir, "schedulemaster.db")
	st := open(db)
	check(dir, db)

	// Loosen everything (as an old version or a careless copy would) and open again.
	for _, p := range []string{db, db + "-wal", db + "-shm"} {
		if err := os.Chmod(p, 0o644); err != nil && !os.IsNotExist(err) {
			t.Fatal(err)
		}
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	st2 := open(db)
	check(dir, db)
	st2.Close()
	st.Close()
}
