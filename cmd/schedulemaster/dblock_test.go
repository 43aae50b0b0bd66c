package main

import (
	"errors"
	"os"
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

// The README's first command starts a master in a directory with no data dir
// yet: the lock, the database and the dir are all created on the first start.
func TestFirstStartCreatesTheDataDir(t *testing.T) {
	dataDir := filepath.Join(t.TempDir(), "fresh", "data")
	m := startMaster(t, dataDir)
	if status, body := m.api("GET", "/health", ""); status != 200 || !strings.Contains(body, `"leader":true`) {
		t.Fatalf("GET /health on a first start: %d %s", status, body)
	}
	for _, p := range []string{dataDir, filepath.Join(dataDir, "schedulemaster.db")} {
		if _, err := os.Stat(p); err != nil {
			t.Errorf("%s after the first start: %v", p, err)
		}
	}
}
