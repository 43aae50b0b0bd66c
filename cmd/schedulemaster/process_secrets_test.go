package main

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestProcessSecretValuesNeverShowInRuns: a real master and worker run an
// HTTP task whose secret param, secret header and Authorization reach a
// target that first holds the request (the live "waiting for" line and the
// output API are read meanwhile), then fails echoing every header, the URL
// and the query: the stored output, the run API, the run search and the live
// line show the mask, never the values.
func TestProcessSecretValuesNeverShowInRuns(t *testing.T) {
	t.Parallel()
	const tok, hdr, bearer = "proc-tok-7f3a9", "proc-hdr-51c2e", "proc-bearer-88d0"
	release := make(chan struct{})
	var once sync.Once
	open := func() { once.Do(func() { close(release) }) }
	defer open()
	target := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, req *http.Request) {
		select {
		case <-release:
		case <-req.Context().Done():
			return
		}
		rw.WriteHeader(http.StatusBadGateway)
		_ = req.Header.Write(rw)
		_, _ = io.WriteString(rw, "path="+req.URL.Path+" query="+req.URL.RawQuery)
	}))
	defer target.Close()

	m := startMaster(t, "")
	startWorker(t, m, "sw1")
	m.waitNode("sw1", 30*time.Second, "running", func(n *nodeJSON) bool { return n.Status == 2 })
	task := m.createTask(`{"title":"secret hook","type":"http","schedule":{"kind":"interval","every":"1h"},
		"http":{"method":"GET","url":"` + target.URL + `/p/{{TOKEN}}?key={{TOKEN}}",
			"headers":{"Authorization":"Bearer ` + bearer + `","X-Mine":"` + hdr + `"},"secret_headers":["X-Mine"]},
		"params":{"TOKEN":"` + tok + `"},"secret_params":["TOKEN"],"timeout":"30s","executors":["sw1"]}`)
	m.taskAction(task.ID, "run")
	runs := m.waitRuns(task.ID, 20*time.Second, "the run listed as running", func(r []runJSON) bool {
		return len(r) == 1 && r[0].Result == "running"
	})
	noSecret := func(what, body string) {
		t.Helper()
		for _, s := range []string{tok, hdr, bearer} {
			if strings.Contains(body, s) {
				t.Fatalf("%s shows the secret %q: %s", what, s, body)
			}
		}
	}
	// The live line, while the request waits.
	var live string
	deadline := time.Now().Add(20 * time.Second)
	for !strings.Contains(live, "waiting for the answer") {
		if time.Now().After(deadline) {
			t.Fatalf("no live line: %s", live)
		}
		_, live = m.api("GET", "/api/v1/runs/"+runs[0].ID+"/output", "")
		time.Sleep(50 * time.Millisecond)
	}
	noSecret("the live output API", live)
	if !strings.Contains(live, "/p/********") {
		t.Fatalf("the live line does not show the masked path: %s", live)
	}
	_, page := m.api("GET", "/runs/"+runs[0].ID+"/live", "")
	noSecret("the live run fragment", page)

	open()
	done := m.waitRuns(task.ID, 20*time.Second, "the run failed", func(r []runJSON) bool {
		return len(r) == 1 && r[0].Result == "failed"
	})
	out := done[0].Output
	noSecret("the stored output", out)
	if !strings.Contains(out, "X-Mine: ********") || !strings.Contains(out, "key=********") {
		t.Fatalf("the stored output does not show the masks: %s", out)
	}
	for _, path := range []string{"/api/v1/runs/" + runs[0].ID, "/api/v1/runs/" + runs[0].ID + "/output", "/runs/" + runs[0].ID,
		"/api/v1/runs?task=" + task.ID, "/runs?task=" + task.ID} {
		st, body := m.api("GET", path, "")
		if st != http.StatusOK || !strings.Contains(body, runs[0].ID) {
			t.Fatalf("GET %s: %d, run not listed", path, st)
		}
		noSecret(path, body)
	}
}
