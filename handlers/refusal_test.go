package handlers_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/schedulemaster-go/schedulemaster/store"
	"github.com/schedulemaster-go/schedulemaster/store/storetest"
)

// A failed worker call shows people a sentence, never the Go error chain;
// the chain goes to the log.
func TestWorkerFailureShowsASentenceAndLogsTheChain(t *testing.T) {
	t.Parallel()
	e, logs := newEnvLogged(t, nil)
	c := e.login("admin", "admin-password-1")
	if status, body := e.do(c, "POST", "/api/v1/nodes", `{"name":"w2","host":"127.0.0.1:1"}`, nil); status != http.StatusCreated {
		t.Fatalf("create: %d %s", status, body)
	}
	chain := func(s string) bool { return strings.Contains(s, "dial tcp") || strings.Contains(s, "master:") }

	status, body := e.do(c, "POST", "/api/v1/nodes/w2/connect", "", nil)
	if status != http.StatusBadGateway || !strings.Contains(body, "node w2") || !strings.Contains(body, "unreachable") || chain(body) {
		t.Fatalf("API connect to a closed port: %d %s, want 502 with a sentence and no error chain", status, body)
	}

	status, page := e.do(c, "POST", "/nodes/w2/connect", "", map[string]string{"HX-Request": "true"})
	if status != http.StatusBadGateway || !strings.Contains(page, "unreachable") || chain(page) {
		t.Fatalf("console connect to a closed port: %d, want 502 with a sentence and no error chain:\n%s", status, page)
	}

	evs, _, err := store.ListEvents(storetest.Ctx(t), e.st.DB, store.EventFilter{Action: "node.connect"})
	if err != nil {
		t.Fatal(err)
	}
	for _, ev := range evs {
		if chain(ev.Detail) {
			t.Errorf("event detail %q shows the error chain", ev.Detail)
		}
	}

	if l := logs.String(); !strings.Contains(l, "dial tcp") || !strings.Contains(l, "master: worker call failed") {
		t.Fatalf("the log lacks the error chain:\n%s", l)
	}
}
