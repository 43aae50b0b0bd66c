package master_test

import (
	"context"
	"crypto/ed25519"
	"encoding/hex"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/schedulemaster-go/schedulemaster/master"
	"github.com/schedulemaster-go/schedulemaster/protocol"
	"github.com/schedulemaster-go/schedulemaster/store"
	"github.com/schedulemaster-go/schedulemaster/store/storetest"
	"github.com/schedulemaster-go/schedulemaster/worker"
)

func TestAutoRegistrationAndOffline(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, s storetest.NamedStore) {
		e := newEnv(t, s)
		url := e.serveMaster()
		tw := startWorker(t, "auto1", autoCfg(url))
		runWorker(t, tw.W)

		var n *store.Node
		storetest.Eventually(t, 10*time.Second, func() bool {
			got, err := store.GetNode(e.ctx, s.Store.DB, "auto1")
			n = got
			return err == nil && got.Status == store.StatusRunning
		}, "auto worker never appeared running")
		if n.Mode != store.ModeAuto || n.Type != store.TypeWorker || n.DesiredStatus != store.StatusRunning ||
			n.Host != tw.Host || n.BootID != tw.W.BootID() || n.LastSeen.IsZero() {
			t.Errorf("registered node = %+v", n)
		}
		if !tw.W.CheckSecret(n.Secret) {
			t.Error("the stored secret is not the worker's")
		}
		if h := tw.W.Health(); h.Status != protocol.StateScheduling {
			t.Errorf("worker state after registration = %q", h.Status)
		}

		// It is healthy for the checker.
		if res := e.m.Sweep(e.ctx); res.Healthy != 1 || res.Failed != 0 {
			t.Errorf("sweep after registration = %+v", res)
		}

		// Authenticate and Offline with bad credentials: ErrUnauthorized, nothing changes.
		before := e.snapshot("auto1")
		for _, c := range []struct{ name, secret string }{
			{"auto1", protocol.NewSecret()}, {"auto1", ""}, {"", n.Secret}, {"nobody", n.Secret}, {"auto1", n.Secret[:10]},
		} {
			if err := e.m.Offline(e.ctx, c.name, c.secret); !errors.Is(err, master.ErrUnauthorized) {
				t.Errorf("Offline(%q, %q...) = %v, want ErrUnauthorized", c.name, c.secret[:min(6, len(c.secret))], err)
			}
		}
		if after := e.snapshot("auto1"); after != before {
			t.Errorf("refused Offline changed the node:\n%s\n%s", before, after)
		}
		if got, err := e.m.Authenticate(e.ctx, "auto1", n.Secret); err != nil || got.Name != "auto1" {
			t.Errorf("Authenticate with the right secret = %v", err)
		}

		// Graceful stop: the worker tells the master, the node goes offline, fire claims released.
		e.insertClaim("task-1", "auto1")
		ctx, cancel := context.WithTimeout(e.ctx, 10*time.Second)
		defer cancel()
		if err := tw.W.Stop(ctx); err != nil {
			t.Fatalf("worker Stop: %v", err)
		}
		n = e.node("auto1")
		if n.Status != store.StatusOffline || n.DesiredStatus != store.StatusOffline || !strings.Contains(n.Reason, "stopped") {
			t.Errorf("after graceful stop: %+v", n)
		}
		if e.claimsOf("auto1") != 0 {
			t.Error("fire claims survived the worker going offline")
		}
		// Offline with desired offline: slow sweeps do not probe it.
		if res := newMaster(t, s, func(c *master.Config) { c.Health.OfflineEvery = 1 }).Sweep(e.ctx); res.Probed != 0 {
			t.Errorf("a gracefully stopped worker was probed: %+v", res)
		}
	})
}

func TestRegistrationRetriesUntilMasterUp(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, s storetest.NamedStore) {
		e := newEnv(t, s)
		var up atomic.Bool
		var refused atomic.Int32
		api := e.masterAPI()
		srv := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
			if !up.Load() {
				refused.Add(1)
				writeErr(rw, errors.New("master starting"))
				return
			}
			api.ServeHTTP(rw, r)
		}))
		t.Cleanup(srv.Close)
		tw := startWorker(t, "late", autoCfg(srv.URL))
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		done := make(chan struct{})
		go func() { tw.W.Run(ctx); close(done) }()
		defer func() { cancel(); <-done }()
		storetest.Eventually(t, 10*time.Second, func() bool { return refused.Load() >= 1 }, "the worker never tried to register")
		if _, err := store.GetNode(e.ctx, s.Store.DB, "late"); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("node exists while the master refuses: %v", err)
		}
		up.Store(true)
		storetest.Eventually(t, 15*time.Second, func() bool {
			n, err := store.GetNode(e.ctx, s.Store.DB, "late")
			return err == nil && n.Status == store.StatusRunning && n.BootID == tw.W.BootID()
		}, "the worker did not register once the master was up")
		select {
		case <-tw.W.Ready():
		case <-ctx.Done():
			t.Fatal("Run was not ready after registering")
		}
	})
}

func TestManualWorkerAppearsOnlyAfterConnect(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, s storetest.NamedStore) {
		e := newEnv(t, s)
		url := e.serveMaster()
		tw := startWorker(t, "man1", func(c *worker.Config) { c.MasterURL = url }) // AutoRegister false, WorkerOf master
		runWorker(t, tw.W)
		if _, err := e.m.Nodes().Get(e.ctx, "man1"); !errors.Is(err, master.ErrNotFound) {
			t.Fatalf("a manual worker registered itself: %v", err)
		}
		if e.countNodes() != 0 {
			t.Fatalf("%d nodes after a manual worker started", e.countNodes())
		}
		e.create(tw)
		n := e.connect("man1")
		if n.Status != store.StatusIdle || n.Mode != store.ModeManual || !tw.W.CheckSecret(n.Secret) {
			t.Errorf("after connect: %+v", n)
		}
		e.enable("man1")
		// Its graceful stop is authenticated with the secret the master stored.
		ctx, cancel := context.WithTimeout(e.ctx, 10*time.Second)
		defer cancel()
		if err := tw.W.Stop(ctx); err != nil {
			t.Fatalf("manual worker Stop: %v", err)
		}
		if n := e.node("man1"); n.Status != store.StatusOffline || n.DesiredStatus != store.StatusOffline {
			t.Errorf("after manual worker stop: %+v", n)
		}
	})
}

// signedRegistration builds a registration request as worker.Run does, with a
// fresh node key.
func signedRegistration(t *testing.T, key string, req protocol.RegisterRequest, at time.Time) (master.RegisterHeaders, []byte) {
	t.Helper()
	_, priv, err := ed25519.GenerateKey(nil)
	if err != nil {
		t.Fatal(err)
	}
	return signedRegistrationWith(t, key, priv, req, at)
}

// signedRegistrationWith signs a registration with the cluster key and the
// given node key (whose public half goes in the body unless set already).
func signedRegistrationWith(t *testing.T, key string, nodeKey ed25519.PrivateKey, req protocol.RegisterRequest, at time.Time) (master.RegisterHeaders, []byte) {
	t.Helper()
	if req.NodeKey == "" {
		req.NodeKey = hex.EncodeToString(nodeKey.Public().(ed25519.PublicKey))
	}
	body, err := json.Marshal(req)
	if err != nil {
		t.Fatal(err)
	}
	ts := strconv.FormatInt(at.Unix(), 10)
	nonce := protocol.NewNonce()
	return master.RegisterHeaders{Node: req.Node.Name, Timestamp: ts, Nonce: nonce,
		Signature:     protocol.RegisterMAC(key, req.Node.Name, ts, nonce, body),
		NodeSignature: protocol.SignRegistration(nodeKey, req.Node.Name, ts, nonce, body)}, body
}

func TestRegisterRefusals(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, s storetest.NamedStore) {
		e := newEnv(t, s)
		e.addMasterNode()
		now := time.Now()
		valid := func() protocol.RegisterRequest {
			return protocol.RegisterRequest{
				Node:   protocol.NodeConfig{Name: "r1", Protocol: "http", Host: "127.0.0.1:30001", Priority: 1, MaxConcurrency: 5},
				Secret: protocol.NewSecret(), BootID: protocol.NewNonce(), MachineName: "box",
			}
		}
		h, body := signedRegistration(t, clusterKey, valid(), now)

		cases := []struct {
			name string
			h    master.RegisterHeaders
			body []byte
			want error
		}{
			{"wrong key", func() master.RegisterHeaders { h, _ := signedRegistration(t, "other", valid(), now); return h }(), body, master.ErrUnauthorized},
			{"body changed after signing", h, []byte(strings.Replace(string(body), "127.0.0.1:30001", "127.0.0.1:30002", 1)), master.ErrUnauthorized},
			{"missing signature", master.RegisterHeaders{Node: h.Node, Timestamp: h.Timestamp, Nonce: h.Nonce}, body, master.ErrUnauthorized},
			{"missing node", master.RegisterHeaders{Timestamp: h.Timestamp, Nonce: h.Nonce, Signature: h.Signature}, body, master.ErrUnauthorized},
		}
		sh, sb := signedRegistration(t, clusterKey, valid(), now.Add(-6*time.Minute))
		cases = append(cases, struct {
			name string
			h    master.RegisterHeaders
			body []byte
			want error
		}{"stale", sh, sb, master.ErrUnauthorized})
		fh, fb := signedRegistration(t, clusterKey, valid(), now.Add(6*time.Minute))
		cases = append(cases, struct {
			name string
			h    master.RegisterHeaders
			body []byte
			want error
		}{"future", fh, fb, master.ErrUnauthorized})
		for _, c := range cases {
			if _, err := e.m.Register(e.ctx, c.h, c.body); !errors.Is(err, c.want) {
				t.Errorf("%s: %v, want %v", c.name, err, c.want)
			}
		}
		invalid := []struct {
			name string
			edit func(*protocol.RegisterRequest)
		}{
			{"bad host", func(r *protocol.RegisterRequest) { r.Node.Host = "nope" }},
			{"short secret", func(r *protocol.RegisterRequest) { r.Secret = "abcd" }},
			{"no boot id", func(r *protocol.RegisterRequest) { r.BootID = "" }},
			{"master's name", func(r *protocol.RegisterRequest) { r.Node.Name = masterName }},
		}
		for _, c := range invalid {
			r := valid()
			c.edit(&r)
			h, b := signedRegistration(t, clusterKey, r, now)
			_, err := e.m.Register(e.ctx, h, b)
			if err == nil || errors.Is(err, master.ErrUnauthorized) || !(errors.Is(err, master.ErrInvalid) || errors.Is(err, protocol.ErrInvalid)) {
				t.Errorf("%s: %v, want an invalid-input error", c.name, err)
			}
		}
		if e.countNodes() != 1 {
			t.Fatalf("%d nodes after refused registrations, want only the master", e.countNodes())
		}

		// The valid one is accepted once; its replay is refused.
		resp, err := e.m.Register(e.ctx, h, body)
		if err != nil || resp.Master != masterName {
			t.Fatalf("valid registration: %+v %v", resp, err)
		}
		if _, err := e.m.Register(e.ctx, h, body); !errors.Is(err, master.ErrUnauthorized) {
			t.Errorf("replayed registration = %v, want ErrUnauthorized", err)
		}
		if n := e.node("r1"); n.Status != store.StatusRunning || n.Mode != store.ModeAuto {
			t.Errorf("registered node = %+v", n)
		}
	})
}

// A worker the master had seen down is told so, with when the master began
// to see it down (the node's last change of state): it counts its missed
// fires before that, the master's misfire windows those after. A worker the
// master saw running is told nothing: it counts all of them.
func TestRegisterSaysSinceWhenTheMasterSawTheNodeDown(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, s storetest.NamedStore) {
		e := newEnv(t, s)
		e.addMasterNode()
		_, key, err := ed25519.GenerateKey(nil)
		if err != nil {
			t.Fatal(err)
		}
		req := func() protocol.RegisterRequest {
			return protocol.RegisterRequest{
				Node:   protocol.NodeConfig{Name: "d1", Protocol: "http", Host: "127.0.0.1:30001", Priority: 1, MaxConcurrency: 5},
				Secret: protocol.NewSecret(), BootID: protocol.NewNonce(), MachineName: "box",
			}
		}
		h, body := signedRegistrationWith(t, clusterKey, key, req(), time.Now())
		resp, err := e.m.Register(e.ctx, h, body)
		if err != nil {
			t.Fatal(err)
		}
		if resp.DownNoticed || resp.DownSince != nil {
			t.Fatalf("a new node: down noticed %v since %v", resp.DownNoticed, resp.DownSince)
		}
		h, body = signedRegistrationWith(t, clusterKey, key, req(), time.Now())
		if resp, err = e.m.Register(e.ctx, h, body); err != nil || resp.DownNoticed {
			t.Fatalf("a running node registering again: %+v, %v", resp, err)
		}
		reason := "test: seen down"
		if err := store.TransitionNode(e.ctx, s.Store.DB, "d1", store.Transition{From: []store.NodeStatus{store.StatusRunning},
			To: store.StatusOffline, Reason: &reason}); err != nil {
			t.Fatal(err)
		}
		n, err := store.GetNode(e.ctx, s.Store.DB, "d1")
		if err != nil {
			t.Fatal(err)
		}
		h, body = signedRegistrationWith(t, clusterKey, key, req(), time.Now())
		resp, err = e.m.Register(e.ctx, h, body)
		if err != nil {
			t.Fatal(err)
		}
		if !resp.DownNoticed || resp.DownSince == nil || !resp.DownSince.Equal(n.UpdatedAt) {
			t.Fatalf("down noticed %v since %v, want since %s (when it went offline)", resp.DownNoticed, resp.DownSince, n.UpdatedAt)
		}
	})
}
