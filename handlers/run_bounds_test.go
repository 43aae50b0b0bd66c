package handlers_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/schedulemaster-go/schedulemaster/master"
	"github.com/schedulemaster-go/schedulemaster/protocol"
	"github.com/schedulemaster-go/schedulemaster/store"
	"github.com/schedulemaster-go/schedulemaster/store/storetest"
	"github.com/schedulemaster-go/schedulemaster/worker"
)

// reportNode creates worker node w1 executing task t1 and returns its secret.
func (e *env) reportNode() string {
	e.t.Helper()
	ctx := context.Background()
	secret := protocol.NewSecret()
	n := &store.Node{Name: "w1", Type: store.TypeWorker, Protocol: "http", Host: "127.0.0.1:1", Status: store.StatusRunning,
		Priority: 1, MaxConcurrency: 1, Mode: store.ModeAuto, Secret: secret}
	if err := store.CreateNode(ctx, e.st.DB, n); err != nil {
		e.t.Fatal(err)
	}
	tk := &store.Task{ID: "t1", Title: "t1", Type: "http", Status: store.TaskStopped, Keepers: "[]", Children: "[]",
		Spec:      `{"id":"t1","title":"t1","type":"http","schedule":{"kind":"interval","every":"1h"},"http":{"method":"GET","url":"http://127.0.0.1:1/"},"timeout":"1s"}`,
		Executors: []string{"w1"}}
	if err := store.CreateTask(ctx, e.st.DB, tk); err != nil {
		e.t.Fatal(err)
	}
	return secret
}

// postBatch posts a run batch as w1; length -1 sends it chunked.
func (e *env) postBatch(secret string, body io.Reader, length int64) (int, string, http.Header) {
	e.t.Helper()
	req, err := http.NewRequest(http.MethodPost, e.srv.URL+protocol.PathMasterRuns, body)
	if err != nil {
		e.t.Fatal(err)
	}
	req.ContentLength = length
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(protocol.HeaderNode, "w1")
	req.Header.Set(protocol.HeaderSecret, secret)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err.Error(), nil
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), resp.Header
}

func (e *env) runCount() int {
	e.t.Helper()
	n, err := e.st.DB.NewSelect().Model((*store.Run)(nil)).Count(context.Background())
	if err != nil {
		e.t.Fatal(err)
	}
	return int(n)
}

func report(id, output string) protocol.RunReport {
	now := time.Now().UTC()
	return protocol.RunReport{ID: id, TaskID: "t1", Node: "w1", ScheduledAt: now, StartedAt: now, EndedAt: now,
		Result: protocol.ResultSuccess, Attempt: 1, HTTPStatus: 200, Output: output}
}

func batchJSON(t *testing.T, runs []protocol.RunReport) []byte {
	t.Helper()
	b, err := json.Marshal(protocol.RunsRequest{Runs: runs})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// A batch over the run count or the byte bound is refused whole with 413 and
// a sentence naming the bounds, with or without a Content-Length; so is a
// batch that turns bad after good runs (400); nothing of them is stored. Ten
// runs of the largest output JSON can carry (64 KiB of control characters,
// six bytes each once escaped) fit in one batch.
func TestRunBatchOverItsBoundsIsRefusedWhole(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, ns storetest.NamedStore) {
		e := newEnv(t, ns)
		secret := e.reportNode()

		var many []protocol.RunReport
		for i := range protocol.MaxRunsPerBatch + 1 {
			many = append(many, report(fmt.Sprintf("many-%d", i), "ok"))
		}
		big := strings.Repeat("x", protocol.MaxOutputBytes)
		var heavy []protocol.RunReport
		for i := range 70 { // 70 x 64 KiB: over 4 MiB
			heavy = append(heavy, report(fmt.Sprintf("heavy-%d", i), big))
		}
		good := batchJSON(t, []protocol.RunReport{report("fine-1", "ok"), report("fine-2", "ok")})
		for _, c := range []struct {
			name   string
			body   []byte
			status int
			says   string
		}{
			{"1001 runs", batchJSON(t, many), http.StatusRequestEntityTooLarge, "at most 1000 runs"},
			{"over 4 MiB", batchJSON(t, heavy), http.StatusRequestEntityTooLarge, "4194304 bytes"},
			{"bad after good runs", append(bytes.Clone(good[:len(good)-2]), []byte(`,{"id":"bad","nope":1}]}`)...), http.StatusBadRequest, "invalid JSON body"},
			{"trailing data", append(bytes.Clone(good), []byte(`{}`)...), http.StatusBadRequest, "trailing data"},
			{"unknown top-level field", []byte(`{"runs":[],"more":[]}`), http.StatusBadRequest, "unknown field"},
			{"runs twice", append([]byte(`{"runs":[],`), good[1:]...), http.StatusBadRequest, "twice"},
		} {
			for _, chunked := range []bool{false, true} {
				length := int64(len(c.body))
				if chunked {
					length = -1
				}
				status, body, _ := e.postBatch(secret, bytes.NewReader(c.body), length)
				if status != c.status || !strings.Contains(body, c.says) {
					t.Errorf("%s (chunked %v): %d %s, want %d saying %q", c.name, chunked, status, body, c.status, c.says)
				}
				if n := e.runCount(); n != 0 {
					t.Fatalf("%s (chunked %v): %d runs stored, want none", c.name, chunked, n)
				}
			}
		}

		// The largest legitimate runs fit, ten to a batch.
		worst := strings.Repeat("\x01", protocol.MaxOutputBytes)
		var maxRuns []protocol.RunReport
		for i := range 10 {
			maxRuns = append(maxRuns, report(fmt.Sprintf("max-%d", i), worst))
		}
		body := batchJSON(t, maxRuns)
		if len(body) <= 9*protocol.MaxOutputBytes*6 || len(body) > 10*protocol.MaxRunReportBytes ||
			10*protocol.MaxRunReportBytes > protocol.MaxRunsBatchBytes {
			t.Fatalf("the batch of maximum runs is %d bytes, a maximum report %d, the bound %d: the test proves nothing",
				len(body), protocol.MaxRunReportBytes, protocol.MaxRunsBatchBytes)
		}
		status, answer, _ := e.postBatch(secret, bytes.NewReader(body), int64(len(body)))
		if status != http.StatusOK || decode[protocol.RunsResponse](t, answer).Accepted != 10 {
			t.Fatalf("ten maximum runs (%d bytes): %d %s, want all 10 accepted", len(body), status, answer)
		}
	})
}

// stalledBatch is a batch whose body never ends until released: it holds
// one of the master's ingest slots meanwhile.
type stalledBatch struct{ w *io.PipeWriter }

func (e *env) stallBatch(secret string, wg *sync.WaitGroup) *stalledBatch {
	r, w := io.Pipe()
	wg.Add(1)
	go func() {
		defer wg.Done()
		e.postBatch(secret, r, -1)
	}()
	go func() { _, _ = w.Write([]byte(`{"runs":[`)) }()
	return &stalledBatch{w: w}
}

// With every ingest slot held by batches still being read, one more batch
// waits briefly and is answered 429 with Retry-After and a sentence; a real
// worker's reports are kept meanwhile, retried after the wait, and stored
// once when slots free up.
func TestRunBatchesBeyondTheSlotsWaitAndAreDeliveredAgain(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, ns storetest.NamedStore) {
		e := newEnv(t, ns)
		w, _ := startWorker(t, worker.Config{Identity: "w1", AutoRegister: true, MasterURL: e.srv.URL, AllowShell: true})
		runWorker(t, w)
		secret := e.node("w1").Secret
		admin := e.login("admin", "admin-password-1")
		st, created := e.do(admin, "POST", "/api/v1/tasks", `{"title":"echo","type":"shell",
			"schedule":{"kind":"cron","cron":"0 0 1 1 *"},"timeout":"1m","executors":["w1"],
			"shell":{"command":"echo delivered"}}`, nil)
		if st != http.StatusCreated {
			t.Fatalf("create task: %d %s", st, created)
		}
		taskID := decode[struct {
			ID string `json:"id"`
		}](t, created).ID

		var wg sync.WaitGroup
		var held []*stalledBatch
		defer func() {
			for _, h := range held {
				h.w.CloseWithError(io.ErrUnexpectedEOF)
			}
			wg.Wait()
		}()
		for range master.IngestSlots {
			held = append(held, e.stallBatch(secret, &wg))
		}
		// Probe until the held batches have every slot (a probe that comes
		// first is simply stored: it is empty).
		waitUntil(t, 20*time.Second, "a batch refused as busy", func() bool {
			status, body, hdr := e.postBatch(secret, strings.NewReader(`{"runs":[]}`), -1)
			if status == http.StatusOK {
				return false
			}
			if status != http.StatusTooManyRequests || hdr.Get("Retry-After") != "2" || !strings.Contains(body, "deliver this one again") {
				t.Fatalf("batch past the slots: %d %s (Retry-After %q), want 429 with Retry-After 2", status, body, hdr.Get("Retry-After"))
			}
			return true
		})

		if st, body := e.do(admin, "POST", "/api/v1/tasks/"+taskID+"/run", "", nil); st >= 300 {
			t.Fatalf("run once: %d %s", st, body)
		}
		// The run ends on the worker at once, but no report gets in while
		// the slots are held.
		stored := func() int {
			_, body := e.do(admin, "GET", "/api/v1/runs?task="+taskID, "", nil)
			return decode[apiRunsPage](t, body).Total
		}
		for end := time.Now().Add(3 * time.Second); time.Now().Before(end); time.Sleep(200 * time.Millisecond) {
			if n := stored(); n != 0 {
				t.Fatalf("%d runs stored while every ingest slot was held", n)
			}
		}
		for _, h := range held {
			h.w.CloseWithError(io.ErrUnexpectedEOF)
		}
		wg.Wait()
		held = nil
		waitUntil(t, 30*time.Second, "the kept report delivered again", func() bool {
			_, body := e.do(admin, "GET", "/api/v1/runs?task="+taskID+"&result=success", "", nil)
			p := decode[apiRunsPage](t, body)
			// The page and its total are two reads: the run may land between them.
			return p.Total == 1 && len(p.Items) == 1 && strings.Contains(p.Items[0].Output, "delivered")
		})
		if n := stored(); n != 1 {
			t.Fatalf("%d runs stored, want the one run once", n)
		}
		if s := w.ReportStats(); s.Dropped != 0 || s.Overflow != 0 {
			t.Fatalf("the worker gave up on reports: %+v", s)
		}
	})
}

// apiRunItem is a run of the API's lists, with the fields checked here.
type apiRunItem struct {
	ID              string     `json:"id"`
	Result          string     `json:"result"`
	Output          string     `json:"output"`
	OutputTruncated bool       `json:"output_truncated"`
	EndedAt         *time.Time `json:"ended_at"`
	DurationMS      *int64     `json:"duration_ms"`
}

// Lists of runs carry the first 256 characters of each output (cut on a
// character, marked output_truncated), never the whole output, which comes
// one run at a time; a run in progress has no end and no duration; the
// result filter takes running, under its name state too.
func TestRunListsCarryPreviewsAndRunningRunsHaveNoEnd(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, ns storetest.NamedStore) {
		e := newEnv(t, ns)
		e.reportNode()
		ctx := context.Background()
		now := time.Now().UTC().Truncate(time.Second)
		long := strings.Repeat("é", 300) + strings.Repeat("x", protocol.MaxOutputBytes-600)
		exact := strings.Repeat("ü", store.OutputPreviewChars)
		runs := []store.Run{
			{ID: "big", TaskID: "t1", Node: "w1", ScheduledAt: now, StartedAt: now.Add(-3 * time.Second), EndedAt: now.Add(-2 * time.Second),
				DurationMS: 1000, Result: store.ResultSuccess, Attempt: 1, Output: long},
			{ID: "exact", TaskID: "t1", Node: "w1", ScheduledAt: now, StartedAt: now.Add(-2 * time.Second), EndedAt: now.Add(-time.Second),
				DurationMS: 1000, Result: store.ResultFailed, Attempt: 1, Output: exact},
			{ID: "inprog", TaskID: "t1", Node: "w1", ScheduledAt: now, StartedAt: now, EndedAt: now, Result: store.ResultRunning, Attempt: 1},
		}
		if _, err := store.InsertRuns(ctx, e.st.DB, runs); err != nil {
			t.Fatal(err)
		}
		e.addUser("vic", "vic-password-1", store.RoleViewer)
		viewer := e.login("vic", "vic-password-1")
		list := func(path string) map[string]apiRunItem {
			t.Helper()
			st, body := e.do(viewer, "GET", path, "", nil)
			if st != http.StatusOK {
				t.Fatalf("%s: %d %s", path, st, body)
			}
			if len(body) > 8<<10 {
				t.Errorf("%s: %d bytes for three runs; a whole output is in it", path, len(body))
			}
			var page struct {
				Items []apiRunItem `json:"items"`
			}
			if err := json.Unmarshal([]byte(body), &page); err != nil {
				t.Fatal(err)
			}
			out := map[string]apiRunItem{}
			for _, it := range page.Items {
				out[it.ID] = it
			}
			return out
		}
		for _, path := range []string{"/api/v1/runs?limit=500", "/api/v1/tasks/t1/runs?limit=500"} {
			items := list(path)
			if len(items) != 3 {
				t.Fatalf("%s: %d runs, want 3", path, len(items))
			}
			if b := items["big"]; b.Output != strings.Repeat("é", store.OutputPreviewChars) || !b.OutputTruncated || !utf8.ValidString(b.Output) {
				t.Errorf("%s: big run's preview %d bytes, truncated %v; want 256 'é', truncated", path, len(b.Output), b.OutputTruncated)
			}
			if x := items["exact"]; x.Output != exact || x.OutputTruncated {
				t.Errorf("%s: a 256-character output: %q truncated %v; want it whole, not truncated", path, x.Output, x.OutputTruncated)
			}
			if l := items["inprog"]; l.EndedAt != nil || l.DurationMS != nil || l.Result != store.ResultRunning {
				t.Errorf("%s: run in progress: ended_at %v, duration_ms %v; want both null", path, l.EndedAt, l.DurationMS)
			}
			if b := items["big"]; b.EndedAt == nil || !b.EndedAt.Equal(now.Add(-2*time.Second)) || b.DurationMS == nil || *b.DurationMS != 1000 {
				t.Errorf("%s: ended run: ended_at %v, duration_ms %v", path, b.EndedAt, b.DurationMS)
			}
		}
		// One run at a time, the whole output.
		st, body := e.do(viewer, "GET", "/api/v1/runs/big", "", nil)
		if one := decode[apiRunItem](t, body); st != http.StatusOK || one.Output != long || one.OutputTruncated {
			t.Errorf("GET /api/v1/runs/big: %d, %d bytes of output, want all %d", st, len(one.Output), len(long))
		}
		st, body = e.do(viewer, "GET", "/api/v1/runs/big/output", "", nil)
		if one := decode[apiRunItem](t, body); st != http.StatusOK || one.Output != long {
			t.Errorf("GET /api/v1/runs/big/output: %d, %d bytes of output, want all %d", st, len(one.Output), len(long))
		}
		st, body = e.do(viewer, "GET", "/api/v1/runs/inprog", "", nil)
		if one := decode[apiRunItem](t, body); st != http.StatusOK || one.EndedAt != nil || one.DurationMS != nil ||
			!strings.Contains(body, `"ended_at":null`) {
			t.Errorf("GET /api/v1/runs/inprog: %d %s; want ended_at and duration_ms null", st, body)
		}

		// The running filter, by either name, on the API and the console.
		for _, path := range []string{"/api/v1/runs?result=running", "/api/v1/runs?state=running", "/api/v1/tasks/t1/runs?state=running"} {
			if items := list(path); len(items) != 1 || items["inprog"].ID != "inprog" {
				t.Errorf("%s: %v, want only the run in progress", path, items)
			}
		}
		if st, body := e.do(viewer, "GET", "/api/v1/runs?state=running&result=success", "", nil); st != http.StatusBadRequest ||
			!strings.Contains(body, "give one") {
			t.Errorf("state and result disagreeing: %d %s, want 400", st, body)
		}
		st, page := e.do(viewer, "GET", "/runs?state=running", "", nil)
		if st != http.StatusOK || !strings.Contains(page, `href="/runs/inprog"`) ||
			strings.Contains(page, `href="/runs/big"`) || strings.Contains(page, `href="/runs/exact"`) {
			t.Errorf("console runs page with state=running: %d; want the run in progress only", st)
		}
	})
}
