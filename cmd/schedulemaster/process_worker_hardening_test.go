package main

import (
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// A client that sends headers and then drips the body to a real worker is cut
// off by the worker's read timeout (shortened by --read-timeout here).
func TestProcessWorkerCutsATrickledBody(t *testing.T) {
	t.Parallel()
	m := startMaster(t, "")
	_, host := startWorker(t, m, "trick1", "--read-timeout", "500ms")
	conn, err := net.Dial("tcp", host)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprintf(conn, "POST /api/server/connect HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n", host)
	closed := make(chan struct{})
	go func() { io.Copy(io.Discard, conn); close(closed) }()
	deadline := time.After(20 * time.Second)
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-closed:
			return
		case <-deadline:
			t.Fatal("the worker still holds a trickling connection after 20s")
		case <-tick.C:
			if _, err := conn.Write([]byte(" ")); err != nil {
				return // closed by the worker
			}
		}
	}
}

// A restarted worker proves its name with the node key kept in its data dir;
// another machine (another data dir, so another key) cannot take the name.
// The data dir and its files are private, also when they were not before.
func TestProcessWorkerNodeKeyAndPrivateDataDir(t *testing.T) {
	t.Parallel()
	m := startMaster(t, "")
	dir := filepath.Join(t.TempDir(), "w")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	spool := filepath.Join(dir, "runs.spool")
	if err := os.WriteFile(spool, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	os.Chmod(dir, 0o755)
	os.Chmod(spool, 0o644)
	w1, host := startWorker(t, m, "keyed1", "--data-dir", dir)
	m.waitNode("keyed1", 20*time.Second, "running", func(n *nodeJSON) bool { return n.Status == 2 })
	for path, want := range map[string]os.FileMode{dir: 0o700, spool: 0o600, filepath.Join(dir, "node.key"): 0o600} {
		st, err := os.Stat(path)
		if err != nil || st.Mode().Perm() != want {
			t.Fatalf("%s: mode %v (%v), want %o", path, st.Mode().Perm(), err, want)
		}
	}
	key, _ := os.ReadFile(filepath.Join(dir, "node.key"))

	// Same machine again (same data dir and port): registers again.
	w1.kill()
	_, port, _ := strings.Cut(host, ":")
	w2, _ := startWorker(t, m, "keyed1", "--data-dir", dir, "--port", port)
	deadline := time.Now().Add(30 * time.Second)
	for !w2.logged("registered with the master") {
		if time.Now().After(deadline) {
			t.Fatal("the restarted worker did not register again with its own key")
		}
		time.Sleep(50 * time.Millisecond)
	}
	if again, _ := os.ReadFile(filepath.Join(dir, "node.key")); string(again) != string(key) {
		t.Fatal("the node key changed across a restart")
	}
	w2.kill()

	// Another machine claiming the name: refused, retried, never registered.
	impostor, _ := startWorker(t, m, "keyed1")
	deadline = time.Now().Add(30 * time.Second)
	for !impostor.logged("registration with the master failed") {
		if time.Now().After(deadline) {
			t.Fatal("the impostor's registration was not refused")
		}
		time.Sleep(50 * time.Millisecond)
	}
	if impostor.logged("registered with the master") {
		t.Fatal("a worker with another node key took over the name")
	}
	if n := m.node("keyed1"); n == nil || n.Host != host {
		t.Fatalf("the impostor changed the node: %+v", n)
	}
}
