package handlers_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/schedulemaster-go/schedulemaster/protocol"
	"github.com/schedulemaster-go/schedulemaster/store/storetest"
)

// The misfire policy goes from the form and the API to the stored task, the
// task JSON, the task page and back into the edit form; other values are
// refused with a field error.
func TestTaskMisfirePolicyInFormAndAPI(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, ns storetest.NamedStore) {
		e := newEnv(t, ns)
		e.addOfflineNode("w1")
		c := e.login("admin", "admin-password-1")
		good := taskForm("nightly export", "http://127.0.0.1:9/export", "w1")

		resp := e.postForm(c, "/tasks", with(good, "misfire", "later"))
		if b := body(t, resp); resp.StatusCode != http.StatusUnprocessableEntity || !strings.Contains(b, `id="error-misfire"`) ||
			!strings.Contains(b, "is not skip or run_once") {
			t.Fatalf("bad misfire: %d, want 422 with the field error", resp.StatusCode)
		}
		// A form without the field (an older page) gets the default.
		resp = e.postForm(c, "/tasks", good)
		if resp.StatusCode != http.StatusSeeOther {
			t.Fatalf("form without misfire: %d", resp.StatusCode)
		}
		if got := e.task(strings.TrimPrefix(resp.Header.Get("Location"), "/tasks/")); got.Misfire != protocol.MisfireSkip {
			t.Fatalf("default misfire %q, want skip", got.Misfire)
		}

		resp = e.postForm(c, "/tasks", with(good, "title", "caught-up export", "misfire", "run_once"))
		if resp.StatusCode != http.StatusSeeOther {
			t.Fatalf("run_once form: %d\n%s", resp.StatusCode, body(t, resp))
		}
		loc := resp.Header.Get("Location")
		id := strings.TrimPrefix(loc, "/tasks/")
		if got := e.task(id); got.Misfire != protocol.MisfireRunOnce {
			t.Fatalf("stored misfire %q, want run_once", got.Misfire)
		}
		if st, page := e.do(c, "GET", loc, "", nil); st != 200 || !strings.Contains(page, "<dt>Misfire</dt><dd>run_once</dd>") {
			t.Fatalf("task page does not show the policy: %d", st)
		}
		if st, page := e.do(c, "GET", loc+"/edit", "", nil); st != 200 || !strings.Contains(page, `<option value="run_once" selected`) {
			t.Fatalf("edit form does not select the policy: %d", st)
		}
		if st, js := e.do(c, "GET", "/api/v1/tasks/"+id, "", nil); st != 200 || !strings.Contains(js, `"misfire":"run_once"`) {
			t.Fatalf("task JSON: %d %s", st, js)
		}
		st, js := e.do(c, "POST", "/api/v1/tasks", `{"title":"t2","type":"http","misfire":"never","schedule":{"kind":"cron","cron":"0 * * * *"},"http":{"method":"GET","url":"http://127.0.0.1:1/"},"executors":["w1"]}`, nil)
		if st != http.StatusUnprocessableEntity && st != http.StatusBadRequest || !strings.Contains(js, "misfire") {
			t.Fatalf("API with a bad misfire: %d %s", st, js)
		}
	})
}
