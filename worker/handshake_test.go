package worker_test

import (
	"crypto/md5"
	"encoding/hex"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

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
	w, err := worker.New(cfg, testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	return w
}

// sign builds handshake headers as the master does, with explicit inputs so that
// each test can get one of them wrong.
func sign(key, macMaster, headerMaster, node string, at time.Time, nonce string) worker.ConnectHeaders {
	ts := strconv.FormatInt(at.Unix(), 10)
	return worker.ConnectHeaders{
		Master: headerMaster, NameTo: node, Timestamp: ts, Nonce: nonce,
		MAC: worker.ConnectMAC(key, macMaster, node, ts, nonce),
	}
}

func good(node string, now time.Time) worker.ConnectHeaders {
	return sign(clusterKey, masterName, masterName, node, now, worker.NewNonce())
}

func connectReq(node string) worker.ConnectRequest {
	return worker.ConnectRequest{Node: worker.NodeConfig{Name: node, Protocol: "http", Host: "127.0.0.1:30001", Priority: 1, MaxConcurrency: 10}}
}

func TestConnectAcceptsAndRotatesSecret(t *testing.T) {
	w := newWorker(t, manualConfig("w1"))
	if h := w.Health(); h.Status != worker.StateWaiting || h.Node != "w1" || h.BootID != w.BootID() || h.BootID == "" {
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
	if h := w.Health(); h.Status != worker.StateIdle {
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
		req     worker.ConnectRequest
		want    error
	}{
		{"wrong key", func() worker.ConnectHeaders {
			return sign("another-cluster-key", masterName, masterName, "w1", now, worker.NewNonce())
		}, connectReq("w1"), worker.ErrHandshake},
		{"stale timestamp", func() worker.ConnectHeaders {
			return sign(clusterKey, masterName, masterName, "w1", now.Add(-6*time.Minute), worker.NewNonce())
		}, connectReq("w1"), worker.ErrHandshake},
		{"future timestamp", func() worker.ConnectHeaders {
			return sign(clusterKey, masterName, masterName, "w1", now.Add(6*time.Minute), worker.NewNonce())
		}, connectReq("w1"), worker.ErrHandshake},
		{"timestamp not a number", missing(func(h *worker.ConnectHeaders) {
			h.Timestamp = "yesterday"
			h.MAC = worker.ConnectMAC(clusterKey, masterName, h.NameTo, h.Timestamp, h.Nonce)
		}), connectReq("w1"), worker.ErrHandshake},
		{"another master in header and MAC", func() worker.ConnectHeaders {
			return sign(clusterKey, "evil-master", "evil-master", "w1", now, worker.NewNonce())
		}, connectReq("w1"), worker.ErrHandshake},
		{"another master in header, MAC for ours", func() worker.ConnectHeaders {
			return sign(clusterKey, masterName, "evil-master", "w1", now, worker.NewNonce())
		}, connectReq("w1"), worker.ErrHandshake},
		{"MAC for another master, right header", func() worker.ConnectHeaders {
			return sign(clusterKey, "evil-master", masterName, "w1", now, worker.NewNonce())
		}, connectReq("w1"), worker.ErrHandshake},
		{"MAC for another master, no header", func() worker.ConnectHeaders {
			return sign(clusterKey, "evil-master", "", "w1", now, worker.NewNonce())
		}, connectReq("w1"), worker.ErrHandshake},
		{"ScheduleMaster md5 forgery", forged, connectReq("w1"), worker.ErrHandshake},
		{"MAC not hex", missing(func(h *worker.ConnectHeaders) { h.MAC = "zz" + h.MAC[2:] }), connectReq("w1"), worker.ErrHandshake},
		{"MAC for another node", func() worker.ConnectHeaders {
			h := good("w1", now)
			h.MAC = worker.ConnectMAC(clusterKey, masterName, "w2", h.Timestamp, h.Nonce)
			return h
		}, connectReq("w1"), worker.ErrHandshake},
		{"signed for another node name", func() worker.ConnectHeaders { return good("w2", now) }, connectReq("w2"), worker.ErrHandshake},
		{"nonce too short", func() worker.ConnectHeaders {
			return sign(clusterKey, masterName, masterName, "w1", now, "abc")
		}, connectReq("w1"), worker.ErrHandshake},
		{"missing sm_nameto", missing(func(h *worker.ConnectHeaders) { h.NameTo = "" }), connectReq("w1"), worker.ErrHandshake},
		{"missing sm_timestamp", missing(func(h *worker.ConnectHeaders) { h.Timestamp = "" }), connectReq("w1"), worker.ErrHandshake},
		{"missing sm_nonce", missing(func(h *worker.ConnectHeaders) { h.Nonce = "" }), connectReq("w1"), worker.ErrHandshake},
		{"missing sm_connection", missing(func(h *worker.ConnectHeaders) { h.MAC = "" }), connectReq("w1"), worker.ErrHandshake},
		{"body names another node", func() worker.ConnectHeaders { return good("w1", now) }, connectReq("w9"), worker.ErrInvalid},
		{"bad config in body", func() worker.ConnectHeaders { return good("w1", now) }, func() worker.ConnectRequest {
			r := connectReq("w1")
			r.Node.Host = "127.0.0.1:0"
			return r
		}(), worker.ErrInvalid},
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
	w := newWorker(t, manualConfig("w1"))
	now := time.Now()
	h := good("w1", now)
	first, err := w.Connect(h, connectReq("w1"), now)
	if err != nil {
		t.Fatal(err)
	}
	_, err = w.Connect(h, connectReq("w1"), now.Add(time.Second))
	if !errors.Is(err, worker.ErrHandshake) || !strings.Contains(err.Error(), "nonce") {
		t.Fatalf("replay = %v, want a nonce handshake error", err)
	}
	if !w.CheckSecret(first.Secret) {
		t.Error("a replay changed the secret")
	}
}

func TestConnectRefusedWithoutMaster(t *testing.T) {
	// An auto-registering worker without --workerof accepts no Connect until it registered.
	cfg := manualConfig("w1")
	cfg.AutoRegister, cfg.WorkerOf = true, ""
	w := newWorker(t, cfg)
	now := time.Now()
	if _, err := w.Connect(good("w1", now), connectReq("w1"), now); !errors.Is(err, worker.ErrHandshake) {
		t.Fatalf("Connect on a worker with no master = %v, want ErrHandshake", err)
	}
}

func TestConnectAssignsNameToAnonymousWorker(t *testing.T) {
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

func TestCheckTimestamp(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	for _, c := range []struct {
		ts string
		ok bool
	}{
		{strconv.FormatInt(now.Unix(), 10), true},
		{strconv.FormatInt(now.Add(-5*time.Minute).Unix(), 10), true},
		{strconv.FormatInt(now.Add(5*time.Minute).Unix(), 10), true},
		{strconv.FormatInt(now.Add(-5*time.Minute-time.Second).Unix(), 10), false},
		{strconv.FormatInt(now.Add(5*time.Minute+time.Second).Unix(), 10), false},
		{"", false},
		{"1e9", false},
		{"-1", false},
	} {
		err := worker.CheckTimestamp(c.ts, now)
		if (err == nil) != c.ok {
			t.Errorf("CheckTimestamp(%q) = %v, want ok=%v", c.ts, err, c.ok)
		}
		if err != nil && !errors.Is(err, worker.ErrHandshake) {
			t.Errorf("CheckTimestamp(%q) error %v is not ErrHandshake", c.ts, err)
		}
	}
}

func TestMACHelpers(t *testing.T) {
	a := worker.RegisterMAC(clusterKey, "w1", "1", "n", []byte(`{"a":1}`))
	if a == worker.RegisterMAC(clusterKey, "w1", "1", "n", []byte(`{"a":2}`)) {
		t.Error("RegisterMAC does not cover the body")
	}
	if a == worker.RegisterMAC("other", "w1", "1", "n", []byte(`{"a":1}`)) {
		t.Error("RegisterMAC does not depend on the key")
	}
	if !worker.EqualMAC(a, a) || worker.EqualMAC(a, a[:len(a)-2]) || worker.EqualMAC("zz", "zz") {
		t.Error("EqualMAC wrong")
	}
	// The fields are separated: moving a character between them changes the MAC.
	if worker.ConnectMAC(clusterKey, "ab", "c", "1", "n") == worker.ConnectMAC(clusterKey, "a", "bc", "1", "n") {
		t.Error("ConnectMAC fields are not separated")
	}
	if worker.EqualSecret("", "") || !worker.EqualSecret("x", "x") || worker.EqualSecret("x", "y") {
		t.Error("EqualSecret wrong")
	}
	if s1, s2 := worker.NewSecret(), worker.NewSecret(); s1 == s2 || len(s1) != 64 {
		t.Errorf("NewSecret: %q %q", s1, s2)
	}
}
