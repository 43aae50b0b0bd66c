package handlers_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/schedulemaster-go/schedulemaster/protocol"
	"github.com/schedulemaster-go/schedulemaster/store"
	"github.com/schedulemaster-go/schedulemaster/store/storetest"
	"github.com/schedulemaster-go/schedulemaster/worker"
)

type apiNode struct {
	Name           string     `json:"name"`
	Type           string     `json:"type"`
	Status         int        `json:"status"`
	Host           string     `json:"host"`
	Protocol       string     `json:"protocol"`
	Priority       int        `json:"priority"`
	MaxConcurrency int        `json:"max_concurrency"`
	LastSeen       *time.Time `json:"last_seen"`
	Failures       int        `json:"failures"`
	Mode           string     `json:"mode"`
	Reason         string     `json:"reason"`
}

func TestAPIAuthentication(t *testing.T) {
	t.Parallel()
	e := newEnv(t, storetest.OpenSQLite(t))
	anon := e.client()
	status, body := e.do(anon, "GET", "/api/v1/nodes", "", nil)
	if status != http.StatusUnauthorized || !strings.Contains(body, `"error"`) {
		t.Fatalf("anonymous: %d %s", status, body)
	}
	status, _ = e.do(anon, "GET", "/api/v1/nodes", "", map[string]string{"Authorization": "Bearer smt_nope"})
	if status != http.StatusUnauthorized {
		t.Fatalf("unknown token: %d", status)
	}
	plain, hash, err := store.NewTokenValue()
	if err != nil {
		t.Fatal(err)
	}
	tok := &store.APIToken{Name: "ci", TokenHash: hash, CreatedBy: "admin"}
	if err := store.CreateToken(context.Background(), e.st.DB, tok); err != nil {
		t.Fatal(err)
	}
	bearer := map[string]string{"Authorization": "Bearer " + plain}
	status, body = e.do(anon, "GET", "/api/v1/nodes", "", bearer)
	if status != 200 {
		t.Fatalf("token: %d %s", status, body)
	}
	decode[[]apiNode](t, body)
	if err := store.RevokeToken(context.Background(), e.st.DB, tok.ID); err != nil {
		t.Fatal(err)
	}
	status, _ = e.do(anon, "GET", "/api/v1/nodes", "", bearer)
	if status != http.StatusUnauthorized {
		t.Fatalf("revoked token: %d, want 401", status)
	}
	// The session cookie works for the API too.
	c := e.login("admin", "admin-password-1")
	if status, _ := e.do(c, "GET", "/api/v1/nodes", "", nil); status != 200 {
		t.Fatalf("session on API: %d", status)
	}
}

func TestAPINodeLifecycle(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, ns storetest.NamedStore) {
		e := newEnv(t, ns)
		c := e.login("admin", "admin-password-1")
		w, host := startWorker(t, worker.Config{Identity: "w1", WorkerOf: "master", AutoRegister: false})

		bad := []string{
			`{"name":"","host":"127.0.0.1:1"}`,
			`{"name":"w 1","host":"127.0.0.1:1"}`,
			`{"name":"` + strings.Repeat("a", 65) + `","host":"127.0.0.1:1"}`,
			`{"name":"w1","host":"nohost"}`,
			`{"name":"w1","host":"127.0.0.1:0"}`,
			`{"name":"w1","host":"127.0.0.1:1","protocol":"ftp"}`,
			`{"name":"w1","host":"127.0.0.1:1","priority":-1}`,
			`{"name":"w1","host":"127.0.0.1:1","max_concurrency":100000}`,
			`{"name":"w1","host":"127.0.0.1:1","unknown":1}`,
			`{"name":"w1",`,
			`[]`,
		}
		before := e.nodeCount()
		for _, b := range bad {
			status, body := e.do(c, "POST", "/api/v1/nodes", b, nil)
			if status != http.StatusBadRequest || !strings.Contains(body, `"error"`) {
				t.Errorf("create %s: %d %s, want 400 with error", b, status, body)
			}
		}
		if e.nodeCount() != before {
			t.Fatal("bad input created a node")
		}

		status, body := e.do(c, "POST", "/api/v1/nodes", `{"name":"w1","host":"`+host+`","protocol":"http","priority":3,"max_concurrency":7}`, nil)
		if status != http.StatusCreated {
			t.Fatalf("create: %d %s", status, body)
		}
		n := decode[apiNode](t, body)
		if n.Status != 0 || n.Mode != "manual" || n.Priority != 3 || n.MaxConcurrency != 7 {
			t.Fatalf("created %+v", n)
		}
		if status, _ := e.do(c, "POST", "/api/v1/nodes", `{"name":"w1","host":"`+host+`"}`, nil); status != http.StatusBadRequest && status != http.StatusConflict {
			t.Fatalf("duplicate: %d, want 4xx", status)
		}

		// Refused transitions from offline say why and change nothing.
		for _, a := range []string{"enable", "disable"} {
			status, body := e.do(c, "POST", "/api/v1/nodes/w1/"+a, "", nil)
			if status != http.StatusConflict || !strings.Contains(body, "w1 is offline") {
				t.Fatalf("%s offline node: %d %s", a, status, body)
			}
		}
		if status, _ := e.do(c, "POST", "/api/v1/nodes/ghost/connect", "", nil); status != http.StatusNotFound {
			t.Fatalf("connect unknown: %d", status)
		}

		status, body = e.do(c, "POST", "/api/v1/nodes/w1/connect", "", nil)
		if status != 200 || decode[apiNode](t, body).Status != 1 {
			t.Fatalf("connect: %d %s", status, body)
		}
		if w.Health().Status != protocol.StateIdle {
			t.Fatalf("worker state after connect: %s", w.Health().Status)
		}
		status, body = e.do(c, "POST", "/api/v1/nodes/w1/enable", "", nil)
		if status != 200 || decode[apiNode](t, body).Status != 2 {
			t.Fatalf("enable: %d %s", status, body)
		}
		if w.Health().Status != protocol.StateScheduling {
			t.Fatalf("worker state after enable: %s", w.Health().Status)
		}
		status, body = e.do(c, "DELETE", "/api/v1/nodes/w1", "", nil)
		if status != http.StatusConflict || !strings.Contains(body, "disable it") {
			t.Fatalf("delete running: %d %s", status, body)
		}
		status, body = e.do(c, "POST", "/api/v1/nodes/w1/disable", "", nil)
		if status != 200 || decode[apiNode](t, body).Status != 1 {
			t.Fatalf("disable: %d %s", status, body)
		}
		if w.Health().Status != protocol.StateIdle {
			t.Fatalf("worker state after disable: %s", w.Health().Status)
		}
		status, _ = e.do(c, "DELETE", "/api/v1/nodes/w1", "", nil)
		if status != http.StatusNoContent {
			t.Fatalf("delete: %d", status)
		}
		if status, _ := e.do(c, "GET", "/api/v1/nodes/w1", "", nil); status != http.StatusNotFound {
			t.Fatalf("get deleted: %d", status)
		}
	})
}

func TestAPIConnectToDownWorkerFailsCleanly(t *testing.T) {
	t.Parallel()
	e := newEnv(t, storetest.OpenSQLite(t))
	c := e.login("admin", "admin-password-1")
	_, host := startWorker(t, worker.Config{Identity: "w2", WorkerOf: "master"})
	if status, body := e.do(c, "POST", "/api/v1/nodes", `{"name":"w2","host":"127.0.0.1:1"}`, nil); status != http.StatusCreated {
		t.Fatalf("create: %d %s", status, body)
	}
	status, body := e.do(c, "POST", "/api/v1/nodes/w2/connect", "", nil)
	if status != http.StatusBadGateway || !strings.Contains(body, "node w2") || !strings.Contains(body, "unreachable") {
		t.Fatalf("connect to down worker: %d %s, want 502 naming the node", status, body)
	}
	if n := e.node("w2"); n.Status != store.StatusOffline || n.Secret != "" {
		t.Fatalf("node changed after a failed connect: %+v", n)
	}
	_ = host
}

func TestWorkerRegistrationAndGracefulOffline(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, ns storetest.NamedStore) {
		e := newEnv(t, ns)
		w, host := startWorker(t, worker.Config{Identity: "auto1", AutoRegister: true, MasterURL: e.srv.URL})
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		runWorker(t, w)
		n := e.node("auto1")
		if n.Status != store.StatusRunning || n.Mode != store.ModeAuto || n.Host != host || n.BootID != w.BootID() {
			t.Fatalf("registered node %+v", n)
		}
		if !w.CheckSecret(n.Secret) {
			t.Fatal("stored secret is not the worker's")
		}
		if err := w.Stop(ctx); err != nil {
			t.Fatal(err)
		}
		n = e.node("auto1")
		if n.Status != store.StatusOffline || !strings.Contains(n.Reason, "graceful") {
			t.Fatalf("after graceful stop: %+v", n)
		}
	})
}

func TestRegistrationWithWrongKeyRefused(t *testing.T) {
	t.Parallel()
	e := newEnv(t, storetest.OpenSQLite(t))
	w, _ := startWorker(t, worker.Config{Identity: "auto2", AutoRegister: true, MasterURL: e.srv.URL, ClusterKey: "wrong-key-wrong-key-wrong"})
	ctx, cancel := context.WithTimeout(context.Background(), 1500*time.Millisecond)
	defer cancel()
	w.Run(ctx) // retries until ctx ends
	if _, err := store.GetNode(context.Background(), e.st.DB, "auto2"); err == nil {
		t.Fatal("a worker with the wrong cluster key registered")
	}
	// Offline notices need the node's secret.
	status, _ := e.do(e.client(), "POST", "/api/worker/offline", "{}", map[string]string{"sm_node": "master", "sm_secret": "x"})
	if status != http.StatusUnauthorized {
		t.Fatalf("offline with wrong secret: %d", status)
	}
}

// 2,000 nodes never make one huge answer: the API pages them (limit, offset,
// X-Total-Count) and the console shows one page with links to the others.
func TestNodesArePaged(t *testing.T) {
	t.Parallel()
	e := newEnv(t, storetest.OpenSQLite(t))
	admin := e.login("admin", "admin-password-1")
	now := time.Now()
	nodes := make([]store.Node, 2000)
	for i := range nodes {
		nodes[i] = store.Node{Name: fmt.Sprintf("n%04d", i), Type: store.TypeWorker, Mode: store.ModeAuto, Protocol: "http",
			Host: "127.0.0.1:1", MaxConcurrency: 1, CreatedAt: now, UpdatedAt: now}
	}
	if _, err := e.st.DB.NewInsert().Model(&nodes).Exec(context.Background()); err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequest("GET", e.srv.URL+"/api/v1/nodes?limit=100&offset=1900", nil)
	resp, err := admin.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body := readAll(t, resp)
	page := decode[[]apiNode](t, body)
	if resp.StatusCode != http.StatusOK || len(page) != 100 || page[0].Name != "n1900" || resp.Header.Get("X-Total-Count") != "2000" {
		t.Fatalf("page: %d, %d nodes from %q, total %q", resp.StatusCode, len(page), page[0].Name, resp.Header.Get("X-Total-Count"))
	}
	if st, body := e.do(admin, "GET", "/api/v1/nodes", "", nil); st != http.StatusOK || len(decode[[]apiNode](t, body)) != 500 {
		t.Fatalf("default page: %d, want 500 nodes", st)
	}
	for _, bad := range []string{"limit=0", "limit=1001", "limit=x", "offset=-1"} {
		if st, body := e.do(admin, "GET", "/api/v1/nodes?"+bad, "", nil); st != http.StatusBadRequest || !strings.Contains(body, "fields") {
			t.Errorf("%s: %d %s, want 400 naming the field", bad, st, body)
		}
	}
	st, html := e.do(admin, "GET", "/nodes?offset=100", "", nil)
	if st != http.StatusOK || strings.Count(html, `<tr id="node-`) != 100 || !strings.Contains(html, "n0100") || strings.Contains(html, `id="node-n0099"`) ||
		!strings.Contains(html, "of 2000") || !strings.Contains(html, `rel="next"`) || !strings.Contains(html, `rel="prev"`) {
		t.Fatalf("console page 2: %d, %d rows", st, strings.Count(html, `<tr id="node-`))
	}
}
