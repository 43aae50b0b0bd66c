package handlers_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/schedulemaster-go/schedulemaster/protocol"
	"github.com/schedulemaster-go/schedulemaster/store/storetest"
)

// The routing strategy and key go from the form and the API to the stored
// task, the task JSON, the task page and back into the edit form; hash
// without a key naming a param is refused with a field error.
func TestTaskRoutingInFormAndAPI(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, ns storetest.NamedStore) {
		e := newEnv(t, ns)
		e.addOfflineNode("w1")
		c := e.login("admin", "admin-password-1")
		good := taskForm("sharded export", "http://127.0.0.1:9/export?c={{customer}}", "w1")

		resp := e.postForm(c, "/tasks", with(good, "routing", "hash", "routing_key", "customer"))
		if b := body(t, resp); resp.StatusCode != http.StatusUnprocessableEntity || !strings.Contains(b, `id="error-routing_key"`) ||
			!strings.Contains(b, "must name a param") {
			t.Fatalf("hash without the param: %d, want 422 with the field error", resp.StatusCode)
		}
		resp = e.postForm(c, "/tasks", good)
		if resp.StatusCode != http.StatusSeeOther {
			t.Fatalf("form without routing: %d\n%s", resp.StatusCode, body(t, resp))
		}
		if got := e.task(strings.TrimPrefix(resp.Header.Get("Location"), "/tasks/")); got.Routing != protocol.RoutingWeighted {
			t.Fatalf("default routing %q, want weighted", got.Routing)
		}
		resp = e.postForm(c, "/tasks", with(good, "title", "hashed export", "routing", "hash", "routing_key", "customer", "params", "customer=acme"))
		if resp.StatusCode != http.StatusSeeOther {
			t.Fatalf("hash form: %d\n%s", resp.StatusCode, body(t, resp))
		}
		loc := resp.Header.Get("Location")
		id := strings.TrimPrefix(loc, "/tasks/")
		if got := e.task(id); got.Routing != protocol.RoutingHash || got.RoutingKey != "customer" {
			t.Fatalf("stored routing %q key %q, want hash customer", got.Routing, got.RoutingKey)
		}
		if st, page := e.do(c, "GET", loc, "", nil); st != 200 || !strings.Contains(page, "<dt>Routing</dt><dd>hash by customer</dd>") {
			t.Fatalf("task page does not show the routing: %d", st)
		}
		if st, page := e.do(c, "GET", loc+"/edit", "", nil); st != 200 || !strings.Contains(page, `<option value="hash" selected`) ||
			!strings.Contains(page, `name="routing_key" value="customer"`) {
			t.Fatalf("edit form does not keep the routing: %d", st)
		}
		if st, js := e.do(c, "GET", "/api/v1/tasks/"+id, "", nil); st != 200 || !strings.Contains(js, `"routing":"hash","routing_key":"customer"`) {
			t.Fatalf("task JSON: %d %s", st, js)
		}
		st, js := e.do(c, "POST", "/api/v1/tasks", `{"title":"t2","type":"http","routing":"nearest","schedule":{"kind":"cron","cron":"0 * * * *"},"http":{"method":"GET","url":"http://127.0.0.1:1/"},"executors":["w1"]}`, nil)
		if st != http.StatusUnprocessableEntity && st != http.StatusBadRequest || !strings.Contains(js, "routing") {
			t.Fatalf("API with a bad routing: %d %s", st, js)
		}
	})
}
