package handlers_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/schedulemaster-go/schedulemaster/store"
	"github.com/schedulemaster-go/schedulemaster/store/storetest"
)

// A pending node shows Approve in the list and on its page; the API approves
// it (200, also again), refuses viewers (403) and answers 404 for unknown
// names; approval is an event.
func TestNodeApproveConsoleAndAPI(t *testing.T) {
	t.Parallel()
	e := newEnv(t, storetest.OpenSQLite(t))
	admin := e.login("admin", "admin-password-1")
	e.addUser("vic", "vic-password-1", store.RoleViewer)
	viewer := e.login("vic", "vic-password-1")
	now := time.Now()
	if err := store.CreateNode(context.Background(), e.st.DB, &store.Node{Name: "newbie", Type: store.TypeWorker, Mode: store.ModePending,
		Status: store.StatusOffline, Protocol: "http", Host: "127.0.0.1:1", MaxConcurrency: 1, LastSeen: now}); err != nil {
		t.Fatal(err)
	}
	_, list := e.do(admin, "GET", "/nodes", "", nil)
	if !strings.Contains(list, `data-action="approve" data-node="newbie"`) || strings.Contains(list, `data-action="connect" data-node="newbie"`) {
		t.Fatal("the nodes list does not offer Approve (and only Approve) for a pending node")
	}
	if _, page := e.do(admin, "GET", "/nodes/newbie", "", nil); !strings.Contains(page, `id="approve-node"`) {
		t.Fatal("the node page does not offer Approve")
	}
	if st, _ := e.do(viewer, "POST", "/api/v1/nodes/newbie/approve", "", nil); st != http.StatusForbidden {
		t.Fatalf("viewer approve: %d, want 403", st)
	}
	if st, _ := e.do(admin, "POST", "/api/v1/nodes/nobody/approve", "", nil); st != http.StatusNotFound {
		t.Fatalf("approve unknown: %d, want 404", st)
	}
	for range 2 {
		st, body := e.do(admin, "POST", "/api/v1/nodes/newbie/approve", "", nil)
		if st != http.StatusOK || decode[apiNode](t, body).Mode != store.ModeAuto {
			t.Fatalf("approve: %d %s", st, body)
		}
	}
	evs, _, err := store.ListEvents(context.Background(), e.st.DB, store.EventFilter{Action: "node.approve", Limit: 10})
	if err != nil || len(evs) != 1 || evs[0].Actor != "admin" || evs[0].Target != "newbie" {
		t.Fatalf("approve events %+v %v, want one by admin", evs, err)
	}
}
