package worker_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/schedulemaster-go/schedulemaster/protocol"
)

// hourly is an hourly HTTP task; url "not a url" makes it invalid.
func hourly(id, url string) protocol.TaskSpec {
	return protocol.TaskSpec{TaskDef: protocol.TaskDef{ID: id, Title: id, Type: protocol.TaskHTTP,
		Schedule: protocol.Schedule{Kind: protocol.ScheduleInterval, Every: protocol.Duration(time.Hour), Align: protocol.AlignEpoch},
		HTTP:     &protocol.HTTPSpec{URL: url}}, Executors: 1}
}

// A batch does one operation task by task, each done or refused as its
// own call would be; a push in parts schedules each part at once, drops on
// the last part what no part named, and refuses a part of a session that
// another push superseded.
func TestTaskBatchAndStartupParts(t *testing.T) {
	t.Parallel()
	w := newWorker(t, manualConfig("w1"))
	run(t, w)
	srv := serveWorker(t, w)
	code, c, raw := connectHTTP(t, srv.URL, "w1")
	if code != http.StatusOK {
		t.Fatalf("connect: %d %s", code, raw)
	}
	auth := map[string]string{protocol.HeaderSecret: c.Secret}
	send := func(path string, v any) (int, string) {
		t.Helper()
		body, _ := json.Marshal(v)
		return post(t, srv.URL+path, auth, string(body))
	}
	results := func(code int, out string, want ...int) {
		t.Helper()
		var reply protocol.TaskBatchReply
		if code != http.StatusOK || json.Unmarshal([]byte(out), &reply) != nil || len(reply.Results) != len(want) {
			t.Fatalf("batch: %d %s", code, out)
		}
		for i, r := range reply.Results {
			if r.Status != want[i] || (r.Status != http.StatusOK) != (r.Error != "") {
				t.Errorf("result %d: %+v, want status %d", i, r, want[i])
			}
		}
	}
	// Not scheduling yet: each start is refused on its own.
	code, out := send(protocol.PathTaskBatch, protocol.TaskBatchRequest{Op: protocol.BatchStart, Tasks: []protocol.TaskSpec{hourly("a", "http://127.0.0.1:1/")}})
	results(code, out, http.StatusConflict)

	// A push in parts: the first part begins scheduling.
	code, out = send(protocol.PathStartupPart, protocol.StartupPartRequest{Session: "s1", First: true, Tasks: []protocol.TaskSpec{hourly("old", "http://127.0.0.1:1/")}})
	if code != http.StatusOK || w.Health().RunningTasks != 1 {
		t.Fatalf("first part: %d %s, %d tasks", code, out, w.Health().RunningTasks)
	}
	code, out = send(protocol.PathStartupPart, protocol.StartupPartRequest{Session: "s1", Last: true, Tasks: []protocol.TaskSpec{hourly("x", "http://127.0.0.1:1/")}})
	if code != http.StatusOK || w.Health().RunningTasks != 2 {
		t.Fatalf("last part: %d %s, %d tasks", code, out, w.Health().RunningTasks)
	}
	// A new session drops, on its last part, what none of its parts named.
	send(protocol.PathStartupPart, protocol.StartupPartRequest{Session: "s2", First: true, Tasks: []protocol.TaskSpec{hourly("x", "http://127.0.0.1:1/")}})
	// Another push begins: s2's next part is refused, nothing dropped.
	send(protocol.PathStartupPart, protocol.StartupPartRequest{Session: "s3", First: true, Tasks: []protocol.TaskSpec{hourly("y", "http://127.0.0.1:1/")}})
	if code, out := send(protocol.PathStartupPart, protocol.StartupPartRequest{Session: "s2", Last: true}); code != http.StatusConflict {
		t.Fatalf("a superseded session's part: %d %s, want 409", code, out)
	}
	if n := w.Health().RunningTasks; n != 3 {
		t.Fatalf("%d tasks after the refused part, want 3", n)
	}
	code, out = send(protocol.PathStartupPart, protocol.StartupPartRequest{Session: "s3", Last: true, Tasks: []protocol.TaskSpec{hourly("z", "http://127.0.0.1:1/"), hourly("bad", "not a url")}})
	if code != http.StatusInternalServerError || !strings.Contains(out, "bad") || w.Health().RunningTasks != 2 {
		t.Fatalf("s3's last part: %d %s, %d tasks (want y and z, bad refused)", code, out, w.Health().RunningTasks)
	}
	if code, out := send(protocol.PathStartupPart, protocol.StartupPartRequest{First: true}); code != http.StatusBadRequest {
		t.Fatalf("no session: %d %s", code, out)
	}

	// Batches: each task on its own.
	code, out = send(protocol.PathTaskBatch, protocol.TaskBatchRequest{Op: protocol.BatchStart,
		Tasks: []protocol.TaskSpec{hourly("a", "http://127.0.0.1:1/"), hourly("b", "not a url"), hourly("c", "http://127.0.0.1:1/")}})
	results(code, out, http.StatusOK, http.StatusBadRequest, http.StatusOK)
	if n := w.Health().RunningTasks; n != 4 {
		t.Fatalf("%d tasks after the batch start, want 4", n)
	}
	code, out = send(protocol.PathTaskBatch, protocol.TaskBatchRequest{Op: protocol.BatchPause, IDs: []string{"a", "ghost"}})
	results(code, out, http.StatusOK, http.StatusNotFound)
	code, out = send(protocol.PathTaskBatch, protocol.TaskBatchRequest{Op: protocol.BatchResume, IDs: []string{"a"}})
	results(code, out, http.StatusOK)
	code, out = send(protocol.PathTaskBatch, protocol.TaskBatchRequest{Op: protocol.BatchStop, IDs: []string{"a", "c", "ghost"}})
	results(code, out, http.StatusOK, http.StatusOK, http.StatusOK)
	if n := w.Health().RunningTasks; n != 2 {
		t.Fatalf("%d tasks after the batch stop, want 2", n)
	}
	// Refused whole: an unknown op, ids for a start, too many tasks.
	many := make([]string, protocol.MaxTaskBatch+1)
	for i := range many {
		many[i] = fmt.Sprint(i)
	}
	for _, req := range []protocol.TaskBatchRequest{{Op: "explode", IDs: []string{"a"}}, {Op: protocol.BatchStart, IDs: []string{"a"}},
		{Op: protocol.BatchStop, IDs: many}} {
		if code, out := send(protocol.PathTaskBatch, req); code != http.StatusBadRequest {
			t.Errorf("%s with %d ids: %d %s, want 400", req.Op, len(req.IDs), code, out)
		}
	}
	if code, _ := post(t, srv.URL+protocol.PathTaskBatch, nil, `{"op":"stop","ids":["y"]}`); code != http.StatusUnauthorized {
		t.Errorf("without the secret: %d, want 401", code)
	}
}
