package handlers_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/schedulemaster-go/schedulemaster/protocol"
	"github.com/schedulemaster-go/schedulemaster/store/storetest"
)

// The overlap policy goes from the form and the API to the stored task, the
// task JSON, the task page and back into the edit form; other values are
// refused with a field error.
func TestTaskOverlapPolicyInFormAndAPI(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, ns storetest.NamedStore) {
		e := newEnv(t, ns)
		e.addOfflineNode("w1")
		c := e.login("admin", "admin-password-1")
		good := taskForm("nightly export", "http://127.0.0.1:9/export", "w1")

		resp := e.postForm(c, "/tasks", with(good, "overlap", "sometimes"))
		if b := body(t, resp); resp.StatusCode != http.StatusUnprocessableEntity || !strings.Contains(b, `id="error-overlap"`) ||
			!strings.Contains(b, "is not allow, skip or queue") {
			t.Fatalf("bad overlap: %d, want 422 with the field error", resp.StatusCode)
		}
		// A form without the field (an older page) gets the default.
		resp = e.postForm(c, "/tasks", good)
		if resp.StatusCode != http.StatusSeeOther {
			t.Fatalf("form without overlap: %d", resp.StatusCode)
		}
		if got := e.task(strings.TrimPrefix(resp.Header.Get("Location"), "/tasks/")); got.Overlap != protocol.OverlapAllow {
			t.Fatalf("default overlap %q, want allow", got.Overlap)
		}

		resp = e.postForm(c, "/tasks", with(good, "title", "queued export", "overlap", "queue"))
		if resp.StatusCode != http.StatusSeeOther {
			t.Fatalf("queue form: %d\n%s", resp.StatusCode, body(t, resp))
		}
		loc := resp.Header.Get("Location")
		id := strings.TrimPrefix(loc, "/tasks/")
		if got := e.task(id); got.Overlap != protocol.OverlapQueue {
			t.Fatalf("stored overlap %q, want queue", got.Overlap)
		}
		if st, page := e.do(c, "GET", loc, "", nil); st != 200 || !strings.Contains(page, "<dt>Overlap</dt><dd>queue</dd>") {
			t.Fatalf("task page does not show the policy: %d", st)
		}
		if st, page := e.do(c, "GET", loc+"/edit", "", nil); st != 200 || !strings.Contains(page, `<option value="queue" selected`) {
			t.Fatalf("edit form does not select the policy: %d", st)
		}
		if st, js := e.do(c, "GET", "/api/v1/tasks/"+id, "", nil); st != 200 || !strings.Contains(js, `"overlap":"queue"`) {
			t.Fatalf("task JSON: %d %s", st, js)
		}
		st, js := e.do(c, "POST", "/api/v1/tasks", `{"title":"t2","type":"http","overlap":"never","schedule":{"kind":"cron","cron":"0 * * * *"},"http":{"method":"GET","url":"http://127.0.0.1:1/"},"executors":["w1"]}`, nil)
		if st != http.StatusUnprocessableEntity && st != http.StatusBadRequest || !strings.Contains(js, "overlap") {
			t.Fatalf("API with a bad overlap: %d %s", st, js)
		}
	})
}
