package main

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"
)

type delayedRunJSON struct {
	ID        string `json:"id"`
	TaskID    string `json:"task_id"`
	DelayedID string `json:"delayed_id"`
	Node      string `json:"node"`
	Result    string `json:"result"`
	Attempt   int    `json:"attempt"`
}

type delayedJSON struct {
	ID       string           `json:"id"`
	Status   string           `json:"status"`
	DueAt    time.Time        `json:"due_at"`
	Attempts int              `json:"attempts"`
	Late     bool             `json:"late"`
	Node     string           `json:"node"`
	Runs     []delayedRunJSON `json:"runs"`
}

func (m *masterProc) delayed(id string) delayedJSON {
	m.t.Helper()
	status, resp := m.api("GET", "/api/v1/delayed/"+id, "")
	if status != http.StatusOK {
		m.t.Fatalf("get delayed %s: %d %s", id, status, resp)
	}
	var d delayedJSON
	if err := json.Unmarshal([]byte(resp), &d); err != nil {
		m.t.Fatal(err)
	}
	return d
}

// A delayed task created through the API of a real master fires once, at
// its time, on a real worker process, and its run shows in GET
// /api/v1/delayed/{id}; creating it again while pending answers the same one;
// a cancelled one never fires.
func TestProcessDelayedTask(t *testing.T) {
	t.Parallel()
	m := startMaster(t, "")
	startWorker(t, m, "dw1")
	m.waitNode("dw1", 30*time.Second, "running", func(n *nodeJSON) bool { return n.Status == 2 })
	tg := newTarget(t)

	body := `{"source_app":"shop","topic":"order.timeout","content_key":"42","delay":"2s","notify_url":"` + tg.URL + `/order-42","notify_body":"{\"order\":42}"}`
	status, resp := m.api("POST", "/api/v1/delayed", body)
	if status != http.StatusCreated {
		t.Fatalf("create: %d %s", status, resp)
	}
	var d delayedJSON
	if err := json.Unmarshal([]byte(resp), &d); err != nil {
		t.Fatal(err)
	}
	status, resp = m.api("POST", "/api/v1/delayed", body)
	var again delayedJSON
	_ = json.Unmarshal([]byte(resp), &again)
	if status != http.StatusOK || again.ID != d.ID {
		t.Fatalf("create again while pending: %d %s; want 200 with %s", status, resp, d.ID)
	}
	// A second one, cancelled before its time, never fires.
	other := strings.NewReplacer(`"42"`, `"43"`, "order-42", "order-43").Replace(body)
	status, resp = m.api("POST", "/api/v1/delayed", other)
	var cancelled delayedJSON
	_ = json.Unmarshal([]byte(resp), &cancelled)
	if status != http.StatusCreated {
		t.Fatalf("create the second: %d %s", status, resp)
	}
	if status, resp := m.api("POST", "/api/v1/delayed/"+cancelled.ID+"/cancel", ""); status != http.StatusOK || !strings.Contains(resp, `"status":"cancelled"`) {
		t.Fatalf("cancel: %d %s", status, resp)
	}
	if status, resp := m.api("DELETE", "/api/v1/delayed/"+cancelled.ID, ""); status != http.StatusConflict {
		t.Fatalf("cancel twice: %d %s", status, resp)
	}

	deadline := time.Now().Add(30 * time.Second)
	for {
		got := m.delayed(d.ID)
		if got.Status == "success" && len(got.Runs) == 1 {
			d = got
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("delayed task not done with its run after 30s: %+v", got)
		}
		time.Sleep(100 * time.Millisecond)
	}
	hits := tg.times("/order-42")
	if len(hits) != 1 {
		t.Fatalf("the callback was called %d times, want once", len(hits))
	}
	if hits[0].Before(d.DueAt) {
		t.Fatalf("fired at %s, before its due time %s", hits[0], d.DueAt)
	}
	t.Logf("fired %s after its due time", hits[0].Sub(d.DueAt).Round(time.Millisecond))
	r := d.Runs[0]
	if r.Node != "dw1" || r.Result != "success" || r.Attempt != 1 || r.DelayedID != d.ID || d.Attempts != 1 || d.Late {
		t.Fatalf("done: %+v run %+v", d, r)
	}
	if status, resp := m.api("GET", "/api/v1/runs/"+r.ID, ""); status != http.StatusOK || !strings.Contains(resp, `"delayed_id":"`+d.ID+`"`) {
		t.Fatalf("the run: %d %s", status, resp)
	}
	if tg.count("/order-43") != 0 {
		t.Fatal("the cancelled task fired")
	}
	if status, resp := m.api("GET", "/api/v1/delayed?status=success&source_app=shop", ""); status != http.StatusOK || !strings.Contains(resp, `"total":1`) {
		t.Fatalf("list: %d %s", status, resp)
	}
	// The console shows it with its run.
	status, page := m.api("GET", "/delayed/"+d.ID, "")
	if status != http.StatusOK || !strings.Contains(page, r.ID) || !strings.Contains(page, "success") {
		t.Fatalf("console page: %d", status)
	}
}
