package main

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// A second master on one SQLite file is refused with a clear message while
// the first holds the lock, and starts once the first is gone.
//
// Not parallel: the lock is taken in this process, and a process that
// another test forks meanwhile holds a copy of the lock's file until it
// execs, which would keep the lock after unlock.
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

// A second worker process on one data dir is refused, saying why, before it
// reads the dir; the first keeps running. Once the first is gone (killed:
// the kernel drops its lock) a worker starts on the dir again.
func TestSecondWorkerOnOneDataDirRefused(t *testing.T) {
	t.Parallel()
	m := startMaster(t, "")
	dir := t.TempDir()
	first, _ := startWorker(t, m, "dd1", "--data-dir", dir)
	m.waitNode("dd1", 20*time.Second, "running", func(n *nodeJSON) bool { return n.Status == 2 })
	out, err := exec.Command(binPath, "worker", "--ip", "127.0.0.1", "--port", "0", "--master", m.URL,
		"--cluster-key", testClusterKey, "--identity", "dd2", "--data-dir", dir).CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || !strings.Contains(string(out), "another worker is running with this data dir") {
		t.Fatalf("second worker on one data dir: %v\n%s", err, out)
	}
	if m.node("dd2") != nil {
		t.Fatal("the refused worker registered")
	}
	if n := m.node("dd1"); n == nil || n.Status != 2 {
		t.Fatalf("the first worker after the refusal: %+v", n)
	}
	first.kill()
	startWorker(t, m, "dd1", "--data-dir", dir)
	m.waitLogged(t, `msg="worker registered" node=dd1`, 2, 30*time.Second)
}

// The README's first command starts a master in a directory with no data dir
// yet: the lock, the database and the dir are all created on the first start.
func TestFirstStartCreatesTheDataDir(t *testing.T) {
	t.Parallel()
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
