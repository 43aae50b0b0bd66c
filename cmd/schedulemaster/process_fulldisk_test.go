package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestProcessWorkerOnAFullDisk: a worker whose data dir (a 1 MiB tmpfs) is
// filled up shows as degraded on the master, "degraded: data directory
// full", and logs it once per file, not once per run. A clean restart on the
// full disk is not called unclean. With the master down, reports wait in
// memory; space returns, the worker stops (journaling them) and starts again,
// the master comes back: every fire's run is recorded once (successful runs
// at the master equal the target's hits), and no torn or glued record is
// met. Needs root to mount the tmpfs; skipped with the reason otherwise.
func TestProcessWorkerOnAFullDisk(t *testing.T) {
	t.Parallel()
	if os.Geteuid() != 0 {
		t.Skip("needs root to mount a 1 MiB tmpfs as the worker's data dir")
	}
	dir := filepath.Join(t.TempDir(), "w")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=1m,mode=0700", "tmpfs", dir).CombinedOutput(); err != nil {
		t.Skipf("cannot mount a tmpfs here (%v: %s): the full-disk test needs one", err, strings.TrimSpace(string(out)))
	}
	t.Cleanup(func() { _ = exec.Command("umount", "-l", dir).Run() })
	// The disk is kept full as another process filling it would: whatever
	// the worker frees (an emptied journal, a replaced fires file) is taken
	// again within a millisecond.
	filler := filepath.Join(dir, "filler")
	stopFill, fillDone := make(chan struct{}), make(chan struct{})
	fill := func() {
		f, err := os.OpenFile(filler, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
		if err != nil {
			t.Fatal(err)
		}
		go func() {
			defer close(fillDone)
			defer f.Close()
			buf := make([]byte, 4096)
			tick := time.NewTicker(time.Millisecond)
			defer tick.Stop()
			for {
				for {
					if _, err := f.Write(buf); err != nil {
						break // ENOSPC: full again
					}
				}
				select {
				case <-stopFill:
					return
				case <-tick.C:
				}
			}
		}()
	}
	free := func() {
		t.Helper()
		close(stopFill)
		<-fillDone
		if err := os.Remove(filler); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		select {
		case <-fillDone:
		default:
			close(stopFill)
			<-fillDone
		}
	})

	m := startMaster(t, "")
	tg := newTarget(t)
	w, host := startWorker(t, m, "fd1", "--data-dir", dir)
	_, port, _ := strings.Cut(host, ":")
	m.waitNode("fd1", 30*time.Second, "running", func(n *nodeJSON) bool { return n.Status == 2 })
	task := m.createTask(`{"title":"every second","type":"http","schedule":{"kind":"interval","every":"1s"},"timeout":"10s",
		"http":{"method":"GET","url":"` + tg.URL + `/fd"},"executors":["fd1"]}`)
	m.taskAction(task.ID, "start")
	waitFor(t, 30*time.Second, "three runs", func() bool { return tg.count("/fd") >= 3 })

	// The disk fills up: the node is degraded, said once per file.
	fill()
	m.waitNode("fd1", 20*time.Second, "degraded: data directory full", func(n *nodeJSON) bool {
		return n.Status == 2 && strings.HasPrefix(n.Reason, "degraded: data directory full")
	})
	full := tg.count("/fd")
	waitFor(t, 30*time.Second, "five runs on the full disk", func() bool { return tg.count("/fd") >= full+5 })
	for _, file := range []string{"runs.spool", "fires.json"} {
		n := 0
		for _, l := range w.snapshot() {
			if strings.Contains(l, "data directory not writable") && strings.Contains(l, "file="+file) {
				n++
			}
		}
		// Once per change: a page freed by the worker and taken by the
		// filler a moment later may make one more change, never one a run.
		if n > 2 {
			t.Errorf("%d lines say %s is not writable, over five runs; want one per change", n, file)
		}
	}
	w.waitLogged(t, "data directory not writable", 1, 5*time.Second)

	// A clean restart on the full disk is recognised as clean.
	if err := w.term(); err != nil {
		t.Fatalf("worker exit: %v", err)
	}
	if w.logged("run reports lost") {
		t.Fatal("reports lost at a clean stop with the master up")
	}
	w2, _ := startWorker(t, m, "fd1", "--data-dir", dir, "--port", port)
	w2.waitLogged(t, "registered with the master", 1, 30*time.Second)
	if w2.logged("did not stop cleanly") {
		t.Fatal("a clean stop on a full disk was called unclean")
	}
	if !w2.logged("stopped cleanly but could not save its last fires") {
		t.Fatal("the restart did not read the clean stop from the stop file (the fires file was stale)")
	}

	// The master goes down; reports wait in memory, the disk still full.
	addr := strings.TrimPrefix(m.URL, "http://")
	if err := m.term(); err != nil {
		t.Fatalf("master exit: %v", err)
	}
	down := tg.count("/fd")
	waitFor(t, 30*time.Second, "three runs without a master", func() bool { return tg.count("/fd") >= down+3 })
	// Space returns: the next reports are journaled; the worker stops and
	// journals those it held in memory.
	free()
	back := tg.count("/fd")
	waitFor(t, 30*time.Second, "two runs with room again", func() bool { return tg.count("/fd") >= back+2 })
	w2.waitLogged(t, "data directory writable again", 1, 10*time.Second)
	_ = w2.term() // telling the master it goes offline fails: it is down
	if w2.logged("run reports lost") || !w2.logged("run reports kept in the journal") {
		t.Fatal("the reports held in memory were not journaled at the stop")
	}

	m2 := startMaster(t, m.DataDir, "--listen", addr)
	w3, _ := startWorker(t, m2, "fd1", "--data-dir", dir, "--port", port)
	m2.waitNode("fd1", 30*time.Second, "running and no longer degraded", func(n *nodeJSON) bool {
		return n.Status == 2 && n.Reason == ""
	})
	waitFor(t, 30*time.Second, "two more runs", func() bool { return tg.count("/fd") >= back+4 })
	m2.taskAction(task.ID, "stop")
	var hits, success int
	waitFor(t, 30*time.Second, "a successful run recorded for every hit", func() bool {
		hits, success = tg.count("/fd"), 0
		for _, r := range m2.runs(task.ID) {
			if r.Result == "success" {
				success++
			}
		}
		return success == hits
	})
	t.Logf("%d hits, %d successful runs recorded", hits, success)
	for _, p := range []*proc{w, w2, w3} {
		for _, bad := range []string{"corrupt line", "cut a torn record", "run reports lost", "did not stop cleanly"} {
			if p.logged(bad) {
				t.Errorf("%s logged %q", p.name, bad)
			}
		}
	}
}
