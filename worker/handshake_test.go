package worker_test

import (
	"context"
	"crypto/md5"
	"encoding/hex"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/schedulemaster-go/schedulemaster/protocol"
	"github.com/schedulemaster-go/schedulemaster/store/storetest/testutil"
	"github.com/schedulemaster-go/schedulemaster/worker"
)

const (
	clusterKey = "test-cluster-key-0123456789abcdef"
	masterName = "master"
)

func manualConfig(identity string) worker.Config {
	return worker.Config{
		Identity: identity, Protocol: "http", IP: "127.0.0.1", Port: 30001, Priority: 1, MaxConcurrency: 10,
		ClusterKey: clusterKey, AutoRegister: false, WorkerOf: masterName, StopTimeout: 2 * time.Second,
	}
}

func newWorker(t *testing.T, cfg worker.Config) *worker.Worker {
	t.Helper()
	w, err := worker.New(cfg, testutil.Logger(t))
	if err != nil {
		t.Fatal(err)
	}
	// Stop releases what New prepared and ends what a Run started: no
	// goroutine outlives the test. A second Stop (after the test's own) is
	// harmless.
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = w.Stop(ctx)
	})
	return w
}

// run runs w until the test ends and waits until it is ready: started and,
// in auto mode, registered.
func run(t *testing.T, w *worker.Worker) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		// Run ends with Stop, whose call to a master may fail: only a Run
		// that never ran is the test's fault.
		if err := w.Run(ctx); errors.Is(err, worker.ErrRunning) || errors.Is(err, worker.ErrStopped) {
			t.Errorf("Run: %v", err)
		}
	}()
	t.Cleanup(func() { cancel(); <-done })
	select {
	case <-w.Ready():
	case <-done:
		t.Fatal("Run returned before the worker was ready")
	case <-time.After(20 * time.Second):
		t.Fatal("the worker was not ready within 20s")
	}
}

// sign builds handshake headers as the master does, with explicit inputs so that
// each test can get one of them wrong.
func sign(key, macMaster, headerMaster, node string, at time.Time, nonce string) worker.ConnectHeaders {
	ts := strconv.FormatInt(at.Unix(), 10)
	return worker.ConnectHeaders{
		Master: headerMaster, NameTo: node, Timestamp: ts, Nonce: nonce,
		MAC: protocol.ConnectMAC(key, macMaster, node, ts, nonce),
	}
}

func good(node string, now time.Time) worker.ConnectHeaders {
	return sign(clusterKey, masterName, masterName, node, now, protocol.NewNonce())
}

func connectReq(node string) protocol.ConnectRequest {
	return protocol.ConnectRequest{Node: protocol.NodeConfig{Name: node, Protocol: "http", Host: "127.0.0.1:30001", Priority: 1, MaxConcurrency: 10}}
}

func TestConnectAcceptsAndRotatesSecret(t *testing.T) {
	t.Parallel()
	w := newWorker(t, manualConfig("w1"))
	if h := w.Health(); h.Status != protocol.StateWaiting || h.Node != "w1" || h.BootID != w.BootID() || h.BootID == "" {
		t.Fatalf("health before connect = %+v", h)
	}
	now := time.Now()
	req := connectReq("w1")
	req.Node.Priority, req.Node.Host = 7, "127.0.0.1:30002"
	r1, err := w.Connect(good("w1", now), req, now)
	if err != nil {
		t.Fatalf("correct handshake refused: %v", err)
	}
	if r1.Node != "w1" || r1.BootID != w.BootID() {
		t.Errorf("answer = %+v", r1)
	}
	if b, err := hex.DecodeString(r1.Secret); err != nil || len(b) != 32 {
		t.Errorf("secret %q is not 32 bytes hex", r1.Secret)
	}
	if !w.CheckSecret(r1.Secret) {
		t.Error("the returned secret does not pass CheckSecret")
	}
	if h := w.Health(); h.Status != protocol.StateIdle {
		t.Errorf("state after connect = %q, want idle", h.Status)
	}

	r2, err := w.Connect(good("w1", now), connectReq("w1"), now)
	if err != nil {
		t.Fatalf("second correct handshake refused: %v", err)
	}
	if r2.Secret == r1.Secret {
		t.Fatal("a new Connect returned the same secret")
	}
	if w.CheckSecret(r1.Secret) {
		t.Error("the old secret still works after a new Connect")
	}
	if !w.CheckSecret(r2.Secret) {
		t.Error("the new secret does not work")
	}
	for _, bad := range []string{"", r2.Secret[:63], r2.Secret + "0", strings.ToUpper(r2.Secret)} {
		if w.CheckSecret(bad) {
			t.Errorf("CheckSecret(%q) = true", bad)
		}
	}
}

func TestConnectRefusals(t *testing.T) {
	t.Parallel()
	now := time.Now()
	md5sum := md5.Sum([]byte(masterName))
	forged := func() worker.ConnectHeaders {
		h := good("w1", now)
		h.MAC = hex.EncodeToString(md5sum[:]) // ScheduleMaster's sm_connection
		return h
	}
	missing := func(f func(*worker.ConnectHeaders)) func() worker.ConnectHeaders {
		return func() worker.ConnectHeaders { h := good("w1", now); f(&h); return h }
	}
	cases := []struct {
		name    string
		headers func() worker.ConnectHeaders
		req     protocol.ConnectRequest
		want    error
	}{
		{"wrong key", func() worker.ConnectHeaders {
			return sign("another-cluster-key", masterName, masterName, "w1", now, protocol.NewNonce())
		}, connectReq("w1"), protocol.ErrHandshake},
		{"stale timestamp", func() worker.ConnectHeaders {
			return sign(clusterKey, masterName, masterName, "w1", now.Add(-6*time.Minute), protocol.NewNonce())
		}, connectReq("w1"), protocol.ErrHandshake},
		{"future timestamp", func() worker.ConnectHeaders {
			return sign(clusterKey, masterName, masterName, "w1", now.Add(6*time.Minute), protocol.NewNonce())
		}, connectReq("w1"), protocol.ErrHandshake},
		{"timestamp not a number", missing(func(h *worker.ConnectHeaders) {
			h.Timestamp = "yesterday"
			h.MAC = protocol.ConnectMAC(clusterKey, masterName, h.NameTo, h.Timestamp, h.Nonce)
		}), connectReq("w1"), protocol.ErrHandshake},
		{"another master in header and MAC", func() worker.ConnectHeaders {
			return sign(clusterKey, "evil-master", "evil-master", "w1", now, protocol.NewNonce())
		}, connectReq("w1"), protocol.ErrHandshake},
		{"another master in header, MAC for ours", func() worker.ConnectHeaders {
			return sign(clusterKey, masterName, "evil-master", "w1", now, protocol.NewNonce())
		}, connectReq("w1"), protocol.ErrHandshake},
		{"MAC for another master, right header", func() worker.ConnectHeaders {
			return sign(clusterKey, "evil-master", masterName, "w1", now, protocol.NewNonce())
		}, connectReq("w1"), protocol.ErrHandshake},
		{"MAC for another master, no header", func() worker.ConnectHeaders {
			return sign(clusterKey, "evil-master", "", "w1", now, protocol.NewNonce())
		}, connectReq("w1"), protocol.ErrHandshake},
		{"ScheduleMaster md5 forgery", forged, connectReq("w1"), protocol.ErrHandshake},
		{"MAC not hex", missing(func(h *worker.ConnectHeaders) { h.MAC = "zz" + h.MAC[2:] }), connectReq("w1"), protocol.ErrHandshake},
		{"MAC for another node", func() worker.ConnectHeaders {
			h := good("w1", now)
			h.MAC = protocol.ConnectMAC(clusterKey, masterName, "w2", h.Timestamp, h.Nonce)
			return h
		}, connectReq("w1"), protocol.ErrHandshake},
		{"signed for another node name", func() worker.ConnectHeaders { return good("w2", now) }, connectReq("w2"), protocol.ErrHandshake},
		{"nonce too short", func() worker.ConnectHeaders {
			return sign(clusterKey, masterName, masterName, "w1", now, "abc")
		}, connectReq("w1"), protocol.ErrHandshake},
		{"missing sm_nameto", missing(func(h *worker.ConnectHeaders) { h.NameTo = "" }), connectReq("w1"), protocol.ErrHandshake},
		{"missing sm_timestamp", missing(func(h *worker.ConnectHeaders) { h.Timestamp = "" }), connectReq("w1"), protocol.ErrHandshake},
		{"missing sm_nonce", missing(func(h *worker.ConnectHeaders) { h.Nonce = "" }), connectReq("w1"), protocol.ErrHandshake},
		{"missing sm_connection", missing(func(h *worker.ConnectHeaders) { h.MAC = "" }), connectReq("w1"), protocol.ErrHandshake},
		{"body names another node", func() worker.ConnectHeaders { return good("w1", now) }, connectReq("w9"), protocol.ErrInvalid},
		{"bad config in body", func() worker.ConnectHeaders { return good("w1", now) }, func() protocol.ConnectRequest {
			r := connectReq("w1")
			r.Node.Host = "127.0.0.1:0"
			return r
		}(), protocol.ErrInvalid},
	}
	w := newWorker(t, manualConfig("w1"))
	ok, err := w.Connect(good("w1", now), connectReq("w1"), now)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			resp, err := w.Connect(c.headers(), c.req, now)
			if !errors.Is(err, c.want) {
				t.Fatalf("Connect = %v, want %v", err, c.want)
			}
			if resp.Secret != "" {
				t.Error("a refused Connect returned a secret")
			}
			if !w.CheckSecret(ok.Secret) {
				t.Error("a refused Connect changed the secret")
			}
		})
	}
	if h := w.Health(); h.Node != "w1" {
		t.Errorf("a refused Connect changed the node name to %q", h.Node)
	}
}

func TestConnectReplayedNonce(t *testing.T) {
	t.Parallel()
	w := newWorker(t, manualConfig("w1"))
	now := time.Now()
	h := good("w1", now)
	first, err := w.Connect(h, connectReq("w1"), now)
	if err != nil {
		t.Fatal(err)
	}
	_, err = w.Connect(h, connectReq("w1"), now.Add(time.Second))
	if !errors.Is(err, protocol.ErrHandshake) || !strings.Contains(err.Error(), "nonce") {
		t.Fatalf("replay = %v, want a nonce handshake error", err)
	}
	if !w.CheckSecret(first.Secret) {
		t.Error("a replay changed the secret")
	}
}

func TestConnectRefusedWithoutMaster(t *testing.T) {
	t.Parallel()
	// An auto-registering worker without --workerof accepts no Connect until it registered.
	cfg := manualConfig("w1")
	cfg.AutoRegister, cfg.WorkerOf = true, ""
	w := newWorker(t, cfg)
	now := time.Now()
	if _, err := w.Connect(good("w1", now), connectReq("w1"), now); !errors.Is(err, protocol.ErrHandshake) {
		t.Fatalf("Connect on a worker with no master = %v, want ErrHandshake", err)
	}
}

func TestConnectAssignsNameToAnonymousWorker(t *testing.T) {
	t.Parallel()
	w := newWorker(t, manualConfig(""))
	now := time.Now()
	resp, err := w.Connect(good("picked", now), connectReq("picked"), now)
	if err != nil {
		t.Fatal(err)
	}
	if resp.Node != "picked" || w.Name() != "picked" || w.Health().Node != "picked" {
		t.Errorf("name after connect: resp %q, Name %q", resp.Node, w.Name())
	}
}
