package main

import (
	"io"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"
)

var (
	newTokenRE       = regexp.MustCompile(`id="new-token">(smt_[^<]+)<`)
	metricsListenRE  = regexp.MustCompile(`msg="serving metrics" listen=(127\.0\.0\.1:\d+)`)
	masterLeaderLine = regexp.MustCompile(`(?m)^sm_master_leader 1$`)
)

// get fetches url with the given headers and returns the status and body.
func get(t *testing.T, u string, hdr map[string]string) (int, string) {
	t.Helper()
	req, err := http.NewRequest("GET", u, nil)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := (&http.Client{Timeout: 10 * time.Second}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestProcessMetrics: the master binary serves /metrics to an API token only;
// a worker started with --metrics-listen serves its metrics there without
// the secret, while its API keeps them behind it.
func TestProcessMetrics(t *testing.T) {
	t.Parallel()
	m := startMaster(t, "")
	resp, err := m.client.PostForm(m.URL+"/tokens", url.Values{"name": {"prometheus"}})
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	tok := newTokenRE.FindStringSubmatch(string(page))
	if tok == nil {
		t.Fatalf("no new token on the tokens page (%d)", resp.StatusCode)
	}
	if status, _ := get(t, m.URL+"/metrics", nil); status != http.StatusUnauthorized {
		t.Fatalf("master /metrics without a token: %d", status)
	}
	status, body := get(t, m.URL+"/metrics", map[string]string{"Authorization": "Bearer " + tok[1]})
	if status != http.StatusOK || !masterLeaderLine.MatchString(body) || !strings.Contains(body, `sm_master_nodes{status="running",type="master"} 1`) {
		t.Fatalf("master /metrics with a token: %d\n%.2000s", status, body)
	}

	w, host := startWorker(t, m, "mw1", "--metrics-listen", "127.0.0.1:0")
	var addr string
	deadline := time.Now().Add(10 * time.Second)
	for addr == "" {
		for _, line := range w.snapshot() {
			if sub := metricsListenRE.FindStringSubmatch(line); sub != nil {
				addr = sub[1]
			}
		}
		if addr == "" && time.Now().After(deadline) {
			t.Fatalf("the worker never said where it serves metrics:\n%s", strings.Join(w.snapshot(), "\n"))
		}
		time.Sleep(50 * time.Millisecond)
	}
	status, body = get(t, "http://"+addr+"/metrics", nil)
	if status != http.StatusOK || !strings.Contains(body, `sm_worker_runs_total{result="success"} 0`) || !strings.Contains(body, "sm_worker_report_queue 0") {
		t.Fatalf("worker --metrics-listen: %d\n%.2000s", status, body)
	}
	if status, _ := get(t, "http://"+addr+"/tasks", nil); status != http.StatusNotFound {
		t.Errorf("the metrics address serves more than /metrics: %d", status)
	}
	if status, _ := get(t, "http://"+host+"/metrics", nil); status != http.StatusUnauthorized {
		t.Errorf("worker API /metrics without sm_secret: %d, want 401", status)
	}
}
