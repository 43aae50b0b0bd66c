package handlers_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/schedulemaster-go/schedulemaster/store"
	"github.com/schedulemaster-go/schedulemaster/store/storetest"
)

// A running node the health sweep found degraded shows "degraded" beside its
// status, with the reason, on the nodes list and its page, and its reason in
// /api/v1/nodes; a sound node shows none of it.
func TestDegradedNodeShownOnTheConsoleAndTheAPI(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, ns storetest.NamedStore) {
		e := newEnv(t, ns)
		ctx := storetest.Ctx(t)
		startStoppableWorker(t, e, "w1")
		c := e.login("admin", "admin-password-1")
		if _, list := e.do(c, "GET", "/nodes", "", nil); strings.Contains(list, `data-testid="degraded"`) {
			t.Fatal("a sound node is shown degraded")
		}
		const reason = "degraded: data directory full: runs.spool: write /d/runs.spool: no space left on device"
		if err := store.MarkSeenWithReason(ctx, e.st.DB, []string{"w1"}, e.node("w1").LastSeen, reason, nil); err != nil {
			t.Fatal(err)
		}
		_, list := e.do(c, "GET", "/nodes", "", nil)
		for _, want := range []string{`data-testid="status">running</span>`, `data-testid="degraded" title="` + reason + `">degraded</span>`,
			`class="reason">` + reason + `</td>`} {
			if !strings.Contains(list, want) {
				t.Errorf("nodes list lacks %s", want)
			}
		}
		_, page := e.do(c, "GET", "/nodes/w1", "", nil)
		for _, want := range []string{`data-testid="degraded">degraded</span>`, `id="node-reason">` + reason + `</span>`} {
			if !strings.Contains(page, want) {
				t.Errorf("node page lacks %s", want)
			}
		}
		status, body := e.do(e.client(), "GET", "/api/v1/nodes", "", e.bearer("ops"))
		if status != http.StatusOK {
			t.Fatalf("GET /api/v1/nodes: %d %s", status, body)
		}
		nodes := decode[[]apiNode](t, body)
		if len(nodes) != 1 || nodes[0].Status != int(store.StatusRunning) || nodes[0].Reason != reason {
			t.Fatalf("API nodes %+v, want w1 running with reason %q", nodes, reason)
		}
	})
}
