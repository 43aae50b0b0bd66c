package handlers_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/bcrypt"

	"github.com/schedulemaster-go/schedulemaster/handlers"
	"github.com/schedulemaster-go/schedulemaster/master"
	"github.com/schedulemaster-go/schedulemaster/store"
	"github.com/schedulemaster-go/schedulemaster/store/storetest"
	"github.com/schedulemaster-go/schedulemaster/views"
)

// benchNodesVM is the nodes page's view model with n rows in a mix of states.
func benchNodesVM(n int) views.NodesVM {
	vm := views.NodesVM{Layout: views.LayoutVM{Title: "Nodes", User: "admin", Role: store.RoleAdmin, Active: "nodes"},
		PollInterval: "every 2s", ShowActions: true, AutoCommand: "schedulemaster worker --identity NAME --master http://127.0.0.1:30000 --cluster-key KEY"}
	for i := 0; i < n; i++ {
		st := []store.NodeStatus{store.StatusRunning, store.StatusRunning, store.StatusIdle, store.StatusOffline}[i%4]
		r := views.NodeRow{Name: fmt.Sprintf("worker-%05d", i), Type: store.TypeWorker, Host: fmt.Sprintf("10.0.%d.%d:30001", i/256, i%256),
			Protocol: "http", Status: int(st), StatusName: st.String(), Priority: 1 + i%5, MaxConcurrency: 20,
			LastSeen: fmt.Sprintf("%ds ago", i%60), LastSeenAt: "2026-11-22T10:00:00Z", Mode: store.ModeAuto,
			CanConnect: st == store.StatusOffline, CanEnable: st == store.StatusIdle, CanDisable: st == store.StatusRunning,
			CanDelete: st != store.StatusRunning, CanEdit: true}
		if st == store.StatusOffline {
			r.Reason = "offline after 3 failed health checks: node is unreachable: connection refused"
		}
		vm.Rows = append(vm.Rows, r)
		vm.Counts[st]++
	}
	return vm
}

// BenchmarkNodeTableRender renders the templ components of the nodes page with
// 1,000 nodes (SPEC 9: the page under 30 ms of server time).
func BenchmarkNodeTableRender(b *testing.B) {
	vm := benchNodesVM(1000)
	ctx := context.Background()
	b.Run("rows-fragment-1000", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			if err := views.NodeRows(vm).Render(ctx, io.Discard); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("page-1000", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			if err := views.NodesPage(vm).Render(ctx, io.Discard); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkNodesHandler serves GET /nodes and GET /nodes/rows for a logged-in
// admin through the master's router (no network), with 1,000 nodes in SQLite:
// query, view model and render.
func BenchmarkNodesHandler(b *testing.B) {
	dsn, err := store.ParseDSN("sqlite://"+filepath.Join(b.TempDir(), "bench.db"), "")
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	st, err := store.Open(ctx, dsn, storetest.Discard())
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { st.Close() })
	now := time.Now().UTC()
	var nodes []store.Node
	for i := 0; i < 1000; i++ {
		st := []store.NodeStatus{store.StatusRunning, store.StatusRunning, store.StatusIdle, store.StatusOffline}[i%4]
		nodes = append(nodes, store.Node{Name: fmt.Sprintf("worker-%05d", i), Type: store.TypeWorker, Protocol: "http",
			Host: fmt.Sprintf("10.0.%d.%d:30001", i/256, i%256), Secret: "s", Status: st, DesiredStatus: st, Priority: 1,
			MaxConcurrency: 20, LastSeen: now.Add(-time.Duration(i%60) * time.Second), BootID: "b", Mode: store.ModeAuto,
			CreatedAt: now, UpdatedAt: now})
	}
	for len(nodes) > 0 {
		part := nodes[:min(500, len(nodes))]
		nodes = nodes[len(part):]
		if _, err := st.DB.NewInsert().Model(&part).Exec(ctx); err != nil {
			b.Fatal(err)
		}
	}
	hash, _ := bcrypt.GenerateFromPassword([]byte("bench-password-1"), bcrypt.MinCost)
	if err := store.CreateUser(ctx, st.DB, &store.User{Username: "admin", PasswordHash: string(hash), Role: store.RoleAdmin}); err != nil {
		b.Fatal(err)
	}
	m := master.New(master.Config{Identity: "master", ClusterKey: clusterKey, AdvertiseHost: "127.0.0.1:1",
		Health: master.HealthConfig{Interval: time.Hour}}, st, storetest.Discard())
	h, err := handlers.NewMasterRouter(ctx, handlers.MasterDeps{Master: m, Log: storetest.Discard()})
	if err != nil {
		b.Fatal(err)
	}
	cookie := benchLogin(b, h, "admin", "bench-password-1")
	for _, path := range []string{"/nodes", "/nodes/rows"} {
		b.Run(strings.ReplaceAll(strings.TrimPrefix(path, "/"), "/", "-")+"-1000", func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				req := httptest.NewRequest(http.MethodGet, path, nil)
				req.Header.Set("Cookie", cookie)
				rec := httptest.NewRecorder()
				h.ServeHTTP(rec, req)
				if rec.Code != http.StatusOK {
					b.Fatalf("GET %s: %d", path, rec.Code)
				}
			}
		})
	}
}

// benchLogin logs in through a loopback server and returns the Cookie header.
func benchLogin(b *testing.B, h http.Handler, user, password string) string {
	b.Helper()
	srv := httptest.NewServer(h)
	defer srv.Close()
	jar, _ := cookiejar.New(nil)
	c := &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := c.PostForm(srv.URL+"/login", url.Values{"username": {user}, "password": {password}})
	if err != nil {
		b.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusSeeOther {
		b.Fatalf("login: %d", resp.StatusCode)
	}
	u, _ := url.Parse(srv.URL)
	var parts []string
	for _, ck := range jar.Cookies(u) {
		parts = append(parts, ck.Name+"="+ck.Value)
	}
	return strings.Join(parts, "; ")
}
