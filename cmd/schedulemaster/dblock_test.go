package main

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"
)

// A second master on one SQLite file is refused with a clear message while
// the first holds the lock, and starts once the first is gone.
func TestSecondSQLiteMasterRefused(t *testing.T) {
	db := filepath.Join(t.TempDir(), "schedulemaster.db")
	unlock, err := lockSQLite(db)
	if err != nil {
		t.Fatalf("first master: %v", err)
	}
	// flock locks belong to the open file, so a second open in this process
	// conflicts exactly as a second process would.
	_, err = lockSQLite(db)
	if !errors.Is(err, errSQLiteInUse) || !strings.Contains(err.Error(), "MySQL/MariaDB") {
		t.Fatalf("second master: %v, want errSQLiteInUse", err)
	}
	unlock()
	unlock2, err := lockSQLite(db)
	if err != nil {
		t.Fatalf("after the first stopped: %v", err)
	}
	unlock2()
}
