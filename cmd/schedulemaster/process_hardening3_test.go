package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
)

// repeatReader yields a prefix, then unit again and again up to n bytes.
type repeatReader struct {
	prefix, unit []byte
	n, off       int
}

func (r *repeatReader) Read(p []byte) (int, error) {
	if r.off >= r.n {
		return 0, io.EOF
	}
	w := 0
	for w < len(p) && r.off < r.n {
		var src []byte
		if r.off < len(r.prefix) {
			src = r.prefix[r.off:]
		} else {
			i := (r.off - len(r.prefix)) % len(r.unit)
			src = r.unit[i:]
		}
		c := copy(p[w:], src[:min(len(src), r.n-r.off)])
		w, r.off = w+c, r.off+c
	}
	return w, nil
}

// TestHardening3ViewerBodiesCostTheMasterNothing: a viewer's four 58 MiB
// bulk saves at once, its 1 MiB YAML document of aliases and its delayed
// batch are refused (403) before their bodies are read, and an editor's
// alias bomb is refused by the document's expansion budget; the master's
// peak RSS (VmHWM, a binary without the race detector) moves by less than
// 100 MB over all of it.
func TestHardening3ViewerBodiesCostTheMasterNothing(t *testing.T) {
	t.Parallel()
	m := startMaster(t, "")
	st, body := m.api("POST", "/api/v1/tokens", `{"name":"viewer","project":"default","role":"viewer"}`)
	var tok struct {
		Token string `json:"token"`
	}
	if st != http.StatusCreated || json.Unmarshal([]byte(body), &tok) != nil || tok.Token == "" {
		t.Fatalf("viewer token: %d %s", st, body)
	}
	admin := m.apiToken()
	pid := m.cmd.Process.Pid
	before := int64(vmHWM(t, pid)) << 10

	send := func(token, path string, r io.Reader, n int64, ctype string) (int, string, error) {
		req, err := http.NewRequest("POST", m.URL+path, r)
		if err != nil {
			t.Fatal(err)
		}
		req.ContentLength = n
		req.Header.Set("Content-Type", ctype)
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return 0, "", err
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		return resp.StatusCode, string(b), nil
	}
	const bulk = 58 << 20
	task := []byte(`{"title":"x","type":"http","http":{"url":"http://127.0.0.1:1/x"},"schedule":{"kind":"interval","every":"1h"}},`)
	var wg sync.WaitGroup
	var mu sync.Mutex
	answers := map[int]int{}
	for range 4 {
		wg.Go(func() {
			st, b, err := send(tok.Token, "/api/v1/tasks/bulk", &repeatReader{prefix: []byte(`{"action":"save","tasks":[`), unit: task, n: bulk}, bulk, "application/json")
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				answers[-1]++ // refused unread: the connection closed under the upload
				return
			}
			answers[st]++
			if st != http.StatusForbidden {
				t.Errorf("a viewer's bulk save: %d %.200s, want 403", st, b)
			}
		})
	}
	wg.Wait()
	if answers[http.StatusForbidden] == 0 {
		t.Fatalf("no viewer's bulk save was answered 403: %v", answers)
	}
	var bomb bytes.Buffer
	bomb.WriteString("version: 1\na0: &a0 [lol, lol, lol, lol, lol, lol, lol, lol, lol, lol]\n")
	for i := 1; i < 10; i++ {
		fmt.Fprintf(&bomb, "a%d: &a%d [*a%d, *a%d, *a%d, *a%d, *a%d, *a%d, *a%d, *a%d, *a%d, *a%d]\n", i, i, i-1, i-1, i-1, i-1, i-1, i-1, i-1, i-1, i-1, i-1)
	}
	for bomb.Len() < 1<<20 {
		bomb.WriteString("# padding to a megabyte of text, which the budget scales with\n")
	}
	bomb.WriteString("tasks: []\n")
	if st, b, err := send(tok.Token, "/api/v1/apply", bytes.NewReader(bomb.Bytes()), int64(bomb.Len()), "application/yaml"); err == nil && st != http.StatusForbidden {
		t.Fatalf("a viewer's apply: %d %.200s, want 403", st, b)
	}
	if st, b, err := send(tok.Token, "/api/v1/delayed/batch", strings.NewReader(`{"items":[]}`), 12, "application/json"); err != nil || st != http.StatusForbidden {
		t.Fatalf("a viewer's delayed batch: %d %.200s %v, want 403", st, b, err)
	}
	st, b, err := send(admin, "/api/v1/apply", bytes.NewReader(bomb.Bytes()), int64(bomb.Len()), "application/yaml")
	if err != nil || st != http.StatusBadRequest || !strings.Contains(b, "aliases expand to more than") {
		t.Fatalf("an admin's alias bomb: %d %.300s %v, want 400 naming the alias budget", st, b, err)
	}
	after := int64(vmHWM(t, pid)) << 10
	t.Logf("master VmHWM %d MiB before, %d MiB after (answers to the bulk saves: %v)", before>>20, after>>20, answers)
	if after-before > 100<<20 {
		t.Fatalf("the master's peak RSS grew by %d MiB (from %d MiB), want < 100 MiB", (after-before)>>20, before>>20)
	}
}
