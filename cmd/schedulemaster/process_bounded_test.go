package main

// Memory bounds of run ingest and run lists, read from the master process's
// RSS (/proc/<pid>/status). The bounds are goals with generous margins, not
// timings: the old code grew by several hundred MB on both.

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/schedulemaster-go/schedulemaster/protocol"
)

// memGoal is the most RSS the master may gain serving each burst below
// (100 MiB; the old code gained 140 MiB to 1.8 GiB).
const memGoal = 100 << 20

// procKiB reads a field (VmRSS, VmHWM) of a process's status in KiB.
func procKiB(t *testing.T, pid int, field string) int64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Skipf("no /proc to read the master's RSS: %v", err)
	}
	m := regexp.MustCompile(field + `:\s+(\d+) kB`).FindSubmatch(b)
	if m == nil {
		t.Skipf("no %s in /proc/<pid>/status", field)
	}
	n, _ := strconv.ParseInt(string(m[1]), 10, 64)
	return n
}

// memGrowth is the master's peak RSS since start minus its RSS now: an
// upper bound of what the burst after the call adds.
type memGrowth struct {
	t    *testing.T
	pid  int
	base int64
}

func startMemGrowth(t *testing.T, m *masterProc) *memGrowth {
	pid := m.cmd.Process.Pid
	// Reset the peak to the current RSS, so that the setup's own peak does
	// not count (Linux: "5" to clear_refs); without it the peak since the
	// start is an upper bound all the same.
	if err := os.WriteFile(fmt.Sprintf("/proc/%d/clear_refs", pid), []byte("5"), 0); err != nil {
		t.Logf("cannot reset the master's peak RSS (%v): measuring from its start", err)
	}
	return &memGrowth{t: t, pid: pid, base: procKiB(t, pid, "VmRSS")}
}

// check logs the growth and fails past memGoal.
func (g *memGrowth) check(what string) {
	g.t.Helper()
	peak := procKiB(g.t, g.pid, "VmHWM")
	grow := (peak - g.base) << 10
	g.t.Logf("%s: master RSS %.1f MiB before, peak %.1f MiB: grew %.1f MiB (goal < %d MiB)",
		what, float64(g.base)/1024, float64(peak)/1024, float64(grow)/(1<<20), memGoal>>20)
	if grow >= memGoal {
		g.t.Errorf("%s: the master's RSS grew by %.1f MiB, want under %d MiB", what, float64(grow)/(1<<20), memGoal>>20)
	}
}

// reportFleet is a master with a fake node executing one task.
type reportFleet struct {
	m      *masterProc
	node   *fakeNode
	taskID string
}

func startReportFleet(t *testing.T) *reportFleet {
	m := startMaster(t, "")
	f := &reportFleet{m: m, node: registerFake(t, m, "memw")}
	f.taskID = m.createTask(`{"title":"big outputs","type":"http","schedule":{"kind":"cron","cron":"0 0 1 1 *"},
		"http":{"method":"GET","url":"http://127.0.0.1:1/"},"timeout":"5s","executors":["memw"]}`).ID
	return f
}

// runReport is a finished run of the fleet's task with output.
func (f *reportFleet) runReport(id, output string) protocol.RunReport {
	now := time.Now().UTC()
	return protocol.RunReport{ID: id, TaskID: f.taskID, Node: "memw", ScheduledAt: now, StartedAt: now, EndedAt: now,
		Result: protocol.ResultSuccess, Attempt: 1, HTTPStatus: 200, Output: output}
}

// fullBatch is a batch of runs with 64 KiB outputs as large as a batch may be.
func (f *reportFleet) fullBatch(t *testing.T, prefix string) []byte {
	t.Helper()
	out := strings.Repeat("o", protocol.MaxOutputBytes)
	one, _ := json.Marshal(f.runReport(prefix+"-000", out))
	n := (4<<20 - 64) / (len(one) + 1)
	runs := make([]protocol.RunReport, n)
	for i := range runs {
		runs[i] = f.runReport(fmt.Sprintf("%s-%03d", prefix, i), out)
	}
	b, _ := json.Marshal(protocol.RunsRequest{Runs: runs})
	return b
}

// deliver posts a batch as the worker does: again after Retry-After while
// the master is busy. It returns the final status and answer.
func (f *reportFleet) deliver(t *testing.T, body []byte) (int, string) {
	for attempt := 0; ; attempt++ {
		req, _ := http.NewRequest(http.MethodPost, f.m.URL+protocol.PathMasterRuns, bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set(protocol.HeaderNode, f.node.name)
		req.Header.Set(protocol.HeaderSecret, f.node.secret)
		resp, err := (&http.Client{Timeout: 2 * time.Minute}).Do(req)
		if err != nil {
			return 0, err.Error()
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusTooManyRequests || attempt == 30 {
			return resp.StatusCode, string(b)
		}
		wait, _ := strconv.Atoi(resp.Header.Get("Retry-After"))
		time.Sleep(time.Duration(max(wait, 1)) * time.Second)
	}
}

// repeatedBatch streams a batch of n copies of one run (ids made unique)
// without holding it: the size of batch the old master read whole.
type repeatedBatch struct {
	pending []byte
	n, i    int
	run     []byte // JSON of one run with id "ID-XXXXXXX"
}

func (r *repeatedBatch) Read(p []byte) (int, error) {
	for len(r.pending) == 0 {
		switch {
		case r.i == 0:
			r.pending = []byte(`{"runs":[`)
		case r.i <= r.n:
			sep := ","
			if r.i == 1 {
				sep = ""
			}
			r.pending = append([]byte(sep), bytes.Replace(r.run, []byte("XXXXXXX"), fmt.Appendf(nil, "%07d", r.i), 1)...)
		case r.i == r.n+1:
			r.pending = []byte(`]}`)
		default:
			return 0, io.EOF
		}
		r.i++
	}
	k := copy(p, r.pending)
	r.pending = r.pending[k:]
	return k, nil
}

func (r *repeatedBatch) size() int64 { return int64(len(`{"runs":[]}`) + r.n*len(r.run) + r.n - 1) }

// Eight parallel batches of the largest size a batch may have grow the
// master's RSS by less than 100 MB, all stored (some after a 429); eight
// parallel 60 MB batches (what the old bound let in) are refused with 413
// and grow it by as little.
func TestProcessIngestMemoryIsBounded(t *testing.T) {
	t.Parallel()
	f := startReportFleet(t)
	// Warm up: the first batch pays for pools and caches.
	if status, body := f.deliver(t, f.fullBatch(t, "warm")); status != http.StatusOK {
		t.Fatalf("warm-up batch: %d %s", status, body)
	}
	bodies := make([][]byte, 8)
	for i := range bodies {
		bodies[i] = f.fullBatch(t, fmt.Sprintf("full%d", i))
	}
	g := startMemGrowth(t, f.m)
	var wg sync.WaitGroup
	answers := make([]string, len(bodies))
	for i, b := range bodies {
		wg.Add(1)
		go func() {
			defer wg.Done()
			status, body := f.deliver(t, b)
			answers[i] = strconv.Itoa(status) + " " + body
		}()
	}
	wg.Wait()
	g.check(fmt.Sprintf("8 parallel batches of %d bytes", len(bodies[0])))
	for i, a := range answers {
		if !strings.HasPrefix(a, "200 ") || !strings.Contains(a, `"accepted":`) || strings.Contains(a, `"accepted":0`) {
			t.Errorf("full batch %d: %.200s", i, a)
		}
	}

	// Batches of the old bound: 900 runs of 64 KiB, about 60 MB each.
	one, _ := json.Marshal(f.runReport("ID-XXXXXXX", strings.Repeat("o", protocol.MaxOutputBytes)))
	g = startMemGrowth(t, f.m)
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rb := &repeatedBatch{n: 900, run: bytes.Replace(one, []byte("ID-"), fmt.Appendf(nil, "huge%d-", i), 1)}
			req, _ := http.NewRequest(http.MethodPost, f.m.URL+protocol.PathMasterRuns, rb)
			if i%2 == 0 {
				req.ContentLength = rb.size()
			} else {
				req.ContentLength = -1 // chunked: the bound must hold without a length
			}
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set(protocol.HeaderNode, f.node.name)
			req.Header.Set(protocol.HeaderSecret, f.node.secret)
			resp, err := (&http.Client{Timeout: 5 * time.Minute}).Do(req)
			if err != nil {
				answers[i] = "closed: " + err.Error() // refused before it was all sent
				return
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			answers[i] = strconv.Itoa(resp.StatusCode) + " " + string(b)
		}()
	}
	wg.Wait()
	g.check("8 parallel batches of 60 MB")
	for i, a := range answers {
		if !strings.HasPrefix(a, "413 ") && !strings.HasPrefix(a, "closed: ") {
			t.Errorf("60 MB batch %d: %.200s, want 413", i, a)
		}
	}
}

// Twelve concurrent lists of 500 runs, each with a 64 KiB output, grow the
// master's RSS by less than 100 MB: lists carry previews, not outputs.
func TestProcessRunListMemoryIsBounded(t *testing.T) {
	t.Parallel()
	f := startReportFleet(t)
	for i := 0; i < 9; i++ { // 9 full batches: over 500 runs
		if status, body := f.deliver(t, f.fullBatch(t, fmt.Sprintf("list%d", i))); status != http.StatusOK {
			t.Fatalf("batch %d: %d %.200s", i, status, body)
		}
	}
	// A warm-up list pays for pools and caches.
	if status, body := f.m.api("GET", "/api/v1/runs?limit=5", ""); status != http.StatusOK {
		t.Fatalf("list: %d %.200s", status, body)
	}
	g := startMemGrowth(t, f.m)
	var wg sync.WaitGroup
	sizes := make([]int, 12)
	for i := range sizes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			path := "/api/v1/runs?limit=500"
			if i%2 == 1 {
				path = "/api/v1/tasks/" + f.taskID + "/runs?limit=500"
			}
			var page struct {
				Items []struct {
					Output string `json:"output"`
				} `json:"items"`
			}
			// A list that outlasts the request deadline on a loaded machine
			// answers 503 with Retry-After, as it should: ask again, so
			// every list is read once whole while the memory is watched.
			for deadline := time.Now().Add(3 * time.Minute); ; {
				req, _ := http.NewRequest("GET", f.m.URL+path, nil)
				resp, err := f.m.client.Do(req)
				if err != nil {
					t.Errorf("list %d: %v", i, err)
					return
				}
				if resp.StatusCode == http.StatusServiceUnavailable && time.Now().Before(deadline) {
					resp.Body.Close()
					time.Sleep(time.Second)
					continue
				}
				err = json.NewDecoder(resp.Body).Decode(&page)
				resp.Body.Close()
				if err != nil || resp.StatusCode != http.StatusOK {
					t.Errorf("list %d: %d %v", i, resp.StatusCode, err)
					return
				}
				break
			}
			sizes[i] = len(page.Items)
			for _, it := range page.Items {
				if len(it.Output) > 1024 {
					t.Errorf("list %d carries a run's whole output (%d bytes)", i, len(it.Output))
					return
				}
			}
		}()
	}
	wg.Wait()
	g.check("12 concurrent lists of 500 runs with 64 KiB outputs")
	for i, n := range sizes {
		if n != 500 {
			t.Errorf("list %d: %d runs, want 500", i, n)
		}
	}
}
