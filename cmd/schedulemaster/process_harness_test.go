package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// binPath is the schedulemaster binary built once for the process tests.
var binPath string

// defaultParallel is how many tests of this package run side by side when
// go test is given no -parallel. Its own default, GOMAXPROCS, is 2 on the CI
// machine, but these tests spend nearly all their time waiting for real
// processes and clocks (a fire per second, health probes every second, pages
// polling), not on the CPU: one test at a time, the package used less than a
// fifth of one core. Run with -parallel N to choose otherwise.
const defaultParallel = "8"

func TestMain(m *testing.M) {
	flag.Parse()
	given := false
	flag.Visit(func(f *flag.Flag) { given = given || f.Name == "test.parallel" })
	if !given {
		if err := flag.Set("test.parallel", defaultParallel); err != nil {
			fmt.Fprintln(os.Stderr, "set -test.parallel:", err)
			os.Exit(1)
		}
	}
	dir, err := os.MkdirTemp("", "smbin")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binPath = filepath.Join(dir, "schedulemaster")
	// Built as the release image builds it (CGO_ENABLED=0, -trimpath), so
	// CI compiles the dependency graph once for vet, this and the image.
	build := exec.Command("go", "build", "-trimpath", "-o", binPath, ".")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "build schedulemaster for the process tests:", err)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	code := m.Run()
	sharedBrowser.stop()
	os.RemoveAll(dir)
	os.Exit(code)
}

// proc is a running schedulemaster process with its log captured.
type proc struct {
	t    *testing.T
	name string
	cmd  *exec.Cmd
	mu   sync.Mutex
	logs []string
	done chan struct{}
	err  error
}

const testClusterKey = "process-test-cluster-key-0123456789"

// startProc runs the binary and waits until a log line matches ready; it
// returns the process and the submatches of ready.
func startProc(t *testing.T, name string, ready *regexp.Regexp, args ...string) (*proc, []string) {
	t.Helper()
	return startProcBin(t, binPath, name, ready, args...)
}

// startProcBin is startProc with another build of the binary.
func startProcBin(t *testing.T, bin, name string, ready *regexp.Regexp, args ...string) (*proc, []string) {
	t.Helper()
	return startProcEnv(t, bin, name, ready, nil, args...)
}

// startProcEnv is startProcBin with env (NAME=value) added to the test's
// environment.
func startProcEnv(t *testing.T, bin, name string, ready *regexp.Regexp, env []string, args ...string) (*proc, []string) {
	t.Helper()
	p := &proc{t: t, name: name, cmd: exec.Command(bin, args...), done: make(chan struct{})}
	if env != nil {
		p.cmd.Env = append(os.Environ(), env...)
	}
	stderr, err := p.cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	p.cmd.Stdout = io.Discard
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	found := make(chan []string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		sent := false
		for sc.Scan() {
			line := sc.Text()
			p.mu.Lock()
			p.logs = append(p.logs, line)
			p.mu.Unlock()
			if !sent {
				if m := ready.FindStringSubmatch(line); m != nil {
					found <- m
					sent = true
				}
			}
		}
		p.err = p.cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(func() {
		p.kill()
		if t.Failed() {
			t.Logf("--- log of %s:\n%s", name, strings.Join(p.snapshot(), "\n"))
		}
	})
	select {
	case m := <-found:
		return p, m
	case <-p.done:
		t.Fatalf("%s exited before it was ready: %v\n%s", name, p.err, strings.Join(p.snapshot(), "\n"))
	case <-time.After(60 * time.Second):
		t.Fatalf("%s not ready after 60s:\n%s", name, strings.Join(p.snapshot(), "\n"))
	}
	return nil, nil
}

func (p *proc) snapshot() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.logs...)
}

// logged reports whether any log line contains s.
func (p *proc) logged(s string) bool {
	for _, l := range p.snapshot() {
		if strings.Contains(l, s) {
			return true
		}
	}
	return false
}

// waitLogged waits until the log has at least n lines containing s; a
// process logs after it answers, so a line may come just after what a test
// saw of its effect.
func (p *proc) waitLogged(t *testing.T, s string, n int, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		got := 0
		for _, l := range p.snapshot() {
			if strings.Contains(l, s) {
				got++
			}
		}
		if got >= n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d log lines of %s contain %q after %s, want %d", got, p.name, s, timeout, n)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// kill sends SIGKILL and waits for the process to be gone.
func (p *proc) kill() {
	select {
	case <-p.done:
		return
	default:
	}
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.done
}

// term sends SIGTERM and waits (bounded) for a clean exit.
func (p *proc) term() error {
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
		return p.err
	case <-time.After(30 * time.Second):
		p.kill()
		return fmt.Errorf("%s did not exit within 30s of SIGTERM", p.name)
	}
}

var (
	masterReady = regexp.MustCompile(`msg="master serving" url=(\S+)`)
	workerReady = regexp.MustCompile(`msg="worker serving" listen=\S+ host=(\S+)`)
)

// masterProc is a running master and an API client logged in as admin.
type masterProc struct {
	*proc
	URL     string
	DataDir string
	client  *http.Client
}

// adminPassword is the password of user admin on every master the tests start.
const adminPassword = "process-test-pw"

// startMaster runs a master on an ephemeral port with a fresh SQLite database
// (or dataDir when reused) and fast health checks unless args override them.
func startMaster(t *testing.T, dataDir string, args ...string) *masterProc {
	t.Helper()
	fast := []string{"--health-interval", "1s", "--health-timeout", "500ms", "--max-failures", "3"}
	return startMasterAs(t, dataDir, append(fast, args...)...)
}

// startMasterAs is startMaster with no health flags of its own: args alone
// say how the master runs (without any health flag the stored settings
// govern the health checker). Its API client is logged in as admin.
func startMasterAs(t *testing.T, dataDir string, args ...string) *masterProc {
	t.Helper()
	if dataDir == "" {
		dataDir = t.TempDir()
	}
	base := []string{"master", "--listen", "127.0.0.1:0", "--data-dir", dataDir, "--admin-password", adminPassword,
		"--cluster-key", testClusterKey}
	p, m := startProc(t, "master", masterReady, append(base, args...)...)
	jar, _ := cookiejar.New(nil)
	mp := &masterProc{proc: p, URL: m[1], DataDir: dataDir, client: &http.Client{Jar: jar, Timeout: 30 * time.Second}}
	resp, err := mp.client.PostForm(mp.URL+"/login", url.Values{"username": {"admin"}, "password": {adminPassword}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK { // followed the redirect to /nodes
		t.Fatalf("login to the master: %d", resp.StatusCode)
	}
	return mp
}

// startWorker runs a worker of the master on an ephemeral port (or --port in args).
func startWorker(t *testing.T, m *masterProc, name string, args ...string) (*proc, string) {
	t.Helper()
	return startWorkerEnv(t, m, name, nil, args...)
}

// startWorkerEnv is startWorker with env (NAME=value) added to the
// worker's environment.
func startWorkerEnv(t *testing.T, m *masterProc, name string, env []string, args ...string) (*proc, string) {
	t.Helper()
	base := []string{"worker", "--ip", "127.0.0.1", "--port", "0", "--master", m.URL, "--cluster-key", testClusterKey,
		"--data-dir", t.TempDir()}
	if name != "" {
		base = append(base, "--identity", name)
	}
	p, sub := startProcEnv(t, binPath, "worker "+name, workerReady, env, append(base, args...)...)
	return p, sub[1]
}

type nodeJSON struct {
	Name     string `json:"name"`
	Type     string `json:"type"`
	Status   int    `json:"status"`
	Host     string `json:"host"`
	Failures int    `json:"failures"`
	Mode     string `json:"mode"`
	Priority int    `json:"priority"`
	Reason   string `json:"reason"`
}

// api calls the open API as admin and returns the status and body.
func (m *masterProc) api(method, path, body string) (int, string) {
	m.t.Helper()
	var r io.Reader
	if body != "" {
		r = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, m.URL+path, r)
	if err != nil {
		m.t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := m.client.Do(req)
	if err != nil {
		m.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// node returns the named node from the API, or nil when it does not exist.
func (m *masterProc) node(name string) *nodeJSON {
	m.t.Helper()
	status, body := m.api("GET", "/api/v1/nodes", "")
	if status != 200 {
		m.t.Fatalf("list nodes: %d %s", status, body)
	}
	var nodes []nodeJSON
	if err := json.Unmarshal([]byte(body), &nodes); err != nil {
		m.t.Fatal(err)
	}
	for i := range nodes {
		if nodes[i].Name == name {
			return &nodes[i]
		}
	}
	return nil
}

// waitNode polls until cond holds for the named node and returns how long it took.
func (m *masterProc) waitNode(name string, timeout time.Duration, what string, cond func(*nodeJSON) bool) time.Duration {
	m.t.Helper()
	start := time.Now()
	for {
		n := m.node(name)
		if n != nil && cond(n) {
			return time.Since(start)
		}
		if time.Since(start) > timeout {
			m.t.Fatalf("node %s: not %s after %s (last: %+v)", name, what, timeout, n)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// setPriority is the admin raising a node's priority (PATCH): a worker's own
// --priority counts only up to the default.
func (m *masterProc) setPriority(name string, prio string) {
	m.t.Helper()
	if st, body := m.api("PATCH", "/api/v1/nodes/"+name, `{"priority":`+prio+`}`); st != 200 {
		m.t.Fatalf("set priority of %s to %s: %d %s", name, prio, st, body)
	}
}
