package worker_test

import (
	"bufio"
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/schedulemaster-go/schedulemaster/protocol"
	"github.com/schedulemaster-go/schedulemaster/store/storetest/testutil"
	"github.com/schedulemaster-go/schedulemaster/worker"
)

// An outsider without the cluster key gets the same answer whatever master
// name it tries: the answer reveals nothing about --workerof.
func TestConnectOutsiderLearnsNothingAboutWorkerOf(t *testing.T) {
	t.Parallel()
	w := newWorker(t, manualConfig("w1"))
	now := time.Now()
	_, errRight := w.Connect(sign("guessed-key-0123456789", masterName, masterName, "w1", now, protocol.NewNonce()), connectReq("w1"), now)
	_, errWrong := w.Connect(sign("guessed-key-0123456789", "other", "other", "w1", now, protocol.NewNonce()), connectReq("w1"), now)
	if errRight == nil || errWrong == nil || errRight.Error() != errWrong.Error() {
		t.Fatalf("answers differ: right master name %v, wrong one %v", errRight, errWrong)
	}
	if strings.Contains(errRight.Error(), "another cluster") {
		t.Fatalf("an outsider learned the master name: %v", errRight)
	}
	// Over HTTP too: same status and body.
	srv := serveWorker(t, w)
	answer := func(master string) string {
		h := sign("guessed-key-0123456789", master, master, "w1", time.Now(), protocol.NewNonce())
		body, _ := json.Marshal(connectReq("w1"))
		code, resp := post(t, srv.URL+protocol.PathConnect, map[string]string{
			protocol.HeaderMaster: h.Master, protocol.HeaderNameTo: h.NameTo, protocol.HeaderTimestamp: h.Timestamp,
			protocol.HeaderNonce: h.Nonce, protocol.HeaderConnection: h.MAC,
		}, string(body))
		return fmt.Sprint(code, " ", resp)
	}
	if a, b := answer(masterName), answer("other"); a != b {
		t.Fatalf("HTTP answers differ: %q vs %q", a, b)
	}
	// A holder of the cluster key signing for another master may learn that.
	_, err := w.Connect(sign(clusterKey, "other", "other", "w1", now, protocol.NewNonce()), connectReq("w1"), now)
	if err == nil || !strings.Contains(err.Error(), "another cluster") {
		t.Fatalf("a cluster member of another master: %v", err)
	}
}

func TestNodeKeyCreatedPrivateAndReused(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "data")
	cfg := manualConfig("w1")
	cfg.DataDir = dir
	w1 := newWorker(t, cfg)
	_ = w1
	keyFile := filepath.Join(dir, worker.NodeKeyFile)
	key1, err := os.ReadFile(keyFile)
	if err != nil {
		t.Fatalf("no node key after the first start: %v", err)
	}
	checkMode(t, dir, 0o700)
	checkMode(t, keyFile, 0o600)
	newWorker(t, cfg)
	key2, _ := os.ReadFile(keyFile)
	if string(key1) != string(key2) {
		t.Fatal("the node key changed at the second start")
	}
}

// Files left with loose modes (an older version, an operator's cp) are made
// private at start.
func TestDataDirAndFilesMadePrivateAtStart(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	spool := filepath.Join(dir, "runs.spool")
	if err := os.WriteFile(spool, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	keyFile := filepath.Join(dir, worker.NodeKeyFile)
	if err := os.WriteFile(keyFile, []byte(strings.Repeat("ab", 32)+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{spool, keyFile} {
		if err := os.Chmod(p, 0o644); err != nil { // past the umask
			t.Fatal(err)
		}
	}
	cfg := manualConfig("w1")
	cfg.DataDir = dir
	newWorker(t, cfg)
	checkMode(t, dir, 0o700)
	checkMode(t, spool, 0o600)
	checkMode(t, keyFile, 0o600)
}

func TestCorruptNodeKeyIsAStartupError(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	keyFile := filepath.Join(dir, worker.NodeKeyFile)
	if err := os.WriteFile(keyFile, []byte("not a key"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := manualConfig("w1")
	cfg.DataDir = dir
	_, err := worker.New(cfg, testutil.Logger(t))
	if err == nil || !strings.Contains(err.Error(), "corrupt") || !strings.Contains(err.Error(), "Reset identity") {
		t.Fatalf("New with a corrupt node key = %v, want a clear error", err)
	}
	if b, _ := os.ReadFile(keyFile); string(b) != "not a key" {
		t.Fatal("the corrupt key file was replaced")
	}
}

func checkMode(t *testing.T, path string, want os.FileMode) {
	t.Helper()
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode().Perm() != want {
		t.Errorf("%s has mode %o, want %o", path, st.Mode().Perm(), want)
	}
}

// The registration carries the node key and its signature, and the key is the
// same after a restart on the same data dir.
func TestRegistrationIsSignedWithTheNodeKey(t *testing.T) {
	t.Parallel()
	fm := &fakeMaster{}
	msrv := httptest.NewServer(fm)
	t.Cleanup(msrv.Close)
	dir := t.TempDir()
	register := func() protocol.RegisterRequest {
		cfg := manualConfig("auto1")
		cfg.AutoRegister, cfg.WorkerOf, cfg.MasterURL, cfg.Port, cfg.DataDir = true, "", msrv.URL, freePort(t), dir
		w := newWorker(t, cfg)
		run(t, w)
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		if err := w.Stop(ctx); err != nil {
			t.Fatal(err)
		}
		fm.mu.Lock()
		defer fm.mu.Unlock()
		if len(fm.regs) == 0 {
			t.Fatal("not registered (the fake master checks the node signature)")
		}
		return fm.regs[len(fm.regs)-1]
	}
	first := register()
	if b, err := hex.DecodeString(first.NodeKey); err != nil || len(b) != 32 {
		t.Fatalf("node_key %q is not a hex Ed25519 public key", first.NodeKey)
	}
	if second := register(); second.NodeKey != first.NodeKey {
		t.Fatalf("node key changed across restarts: %s then %s", first.NodeKey, second.NodeKey)
	}
}

// A client that sends its headers and then drips the body is cut off by the
// server's read timeout instead of holding the connection.
func TestWorkerServerCutsATrickledBody(t *testing.T) {
	t.Parallel()
	w := newWorker(t, manualConfig("w1"))
	to := worker.DefaultServerTimeouts()
	to.ReadHeader, to.Read = 200*time.Millisecond, 500*time.Millisecond
	srv := worker.NewServer(w, testutil.Logger(t), to)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	if srv.WriteTimeout <= 0 || srv.IdleTimeout <= 0 || srv.MaxHeaderBytes <= 0 {
		t.Fatalf("server without write/idle timeouts or header bound: %+v", srv)
	}

	conn, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprintf(conn, "POST %s HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n", protocol.PathConnect)
	closed := make(chan error, 1)
	go func() {
		_, err := io.Copy(io.Discard, conn) // returns when the server closes
		closed <- err
	}()
	deadline := time.After(15 * time.Second)
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for sent := 0; ; sent++ {
		select {
		case <-closed:
			if sent > 100 {
				t.Fatalf("connection closed only after %d bytes", sent)
			}
			return
		case <-deadline:
			t.Fatal("a trickling client still holds the connection after 15s")
		case <-tick.C:
			if _, err := conn.Write([]byte(" ")); err != nil {
				return // the server already closed it
			}
		}
	}
}

// Every worker route bounds its body before parsing: oversized bodies get 413.
func TestWorkerRoutesBoundTheirBodies(t *testing.T) {
	t.Parallel()
	w := newWorker(t, manualConfig("w1"))
	srv := serveWorker(t, w)
	_, resp, _ := connectHTTP(t, srv.URL, "w1")
	guard := map[string]string{protocol.HeaderSecret: resp.Secret}
	big := func(n int) string { return `{"id":"` + strings.Repeat("a", n) + `"}` }
	cases := []struct {
		path    string
		headers map[string]string
		body    string
	}{
		{protocol.PathConnect, nil, big(protocol.MaxSmallBody)},
		{protocol.PathTaskStop, guard, big(protocol.MaxSmallBody)},
		{protocol.PathTaskPause, guard, big(protocol.MaxSmallBody)},
		{protocol.PathTaskStart, guard, big(protocol.MaxTaskBody)},
		{protocol.PathTaskRunOnce, guard, big(protocol.MaxTaskBody)},
		{protocol.PathTaskRunOnceBatch, guard, big(protocol.MaxRunOnceBatchBody)},
		{protocol.PathRunOutput, guard, big(protocol.MaxSmallBody)},
		{protocol.PathRunKill, guard, big(protocol.MaxSmallBody)},
	}
	for _, c := range cases {
		if code, body := post(t, srv.URL+c.path, c.headers, c.body); code != http.StatusRequestEntityTooLarge {
			t.Errorf("%s with %d bytes: %d %s, want 413", c.path, len(c.body), code, body)
		}
	}
	// Chunked (no Content-Length) is bounded too.
	req, _ := http.NewRequest(http.MethodPost, srv.URL+protocol.PathTaskStop, bufio.NewReader(strings.NewReader(big(protocol.MaxSmallBody))))
	req.Header.Set(protocol.HeaderSecret, resp.Secret)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusRequestEntityTooLarge {
		t.Errorf("chunked oversized body: %d, want 413", res.StatusCode)
	}
}

// The routes of runs in progress need the current secret, and answer 404 for
// a run that is not in progress here, whatever its id looks like.
func TestRunRoutesNeedTheSecretAndARunInProgress(t *testing.T) {
	t.Parallel()
	w := newWorker(t, manualConfig("w1"))
	srv := serveWorker(t, w)
	_, resp, _ := connectHTTP(t, srv.URL, "w1")
	guard := map[string]string{protocol.HeaderSecret: resp.Secret}
	for _, path := range []string{protocol.PathRunOutput, protocol.PathRunKill} {
		if code, body := post(t, srv.URL+path, nil, `{"id":"00000000-0000-0000-0000-000000000001"}`); code != http.StatusUnauthorized {
			t.Errorf("%s without the secret: %d %s, want 401", path, code, body)
		}
		if code, body := post(t, srv.URL+path, map[string]string{protocol.HeaderSecret: "wrong"}, `{"id":"x"}`); code != http.StatusUnauthorized {
			t.Errorf("%s with a wrong secret: %d %s, want 401", path, code, body)
		}
		for _, id := range []string{"00000000-0000-0000-0000-000000000001", "", "not-a-run", `\u0000`, strings.Repeat("f", 5000)} {
			if code, body := post(t, srv.URL+path, guard, `{"id":"`+id+`","by":"x"}`); code != http.StatusNotFound {
				t.Errorf("%s of %.40q: %d %s, want 404", path, id, code, body)
			}
		}
		if code, body := post(t, srv.URL+path, guard, `{"id":1}`); code != http.StatusBadRequest {
			t.Errorf("%s with a number for id: %d %s, want 400", path, code, body)
		}
		if code, body := post(t, srv.URL+path, guard, `{"id":"x","extra":true}`); code != http.StatusBadRequest {
			t.Errorf("%s with an unknown field: %d %s, want 400", path, code, body)
		}
	}
}
