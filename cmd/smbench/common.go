package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/uptrace/bun"
	"golang.org/x/crypto/bcrypt"

	"github.com/schedulemaster-go/schedulemaster/protocol"
	"github.com/schedulemaster-go/schedulemaster/store"
)

// benchClusterKey is the cluster key of every master smbench starts.
const benchClusterKey = "smbench-cluster-key-0123456789abcdef"

// ---------------------------------------------------------------- logging

// countHandler is a slog handler that drops everything below Warn and counts
// the rest, keeping the first few messages so a scenario can say what went wrong.
type countHandler struct {
	mu      sync.Mutex
	n       int
	first   []string
	verbose bool
	attrs   []slog.Attr
}

func (h *countHandler) Enabled(_ context.Context, l slog.Level) bool { return l >= slog.LevelWarn }

func (h *countHandler) Handle(_ context.Context, r slog.Record) error {
	var b strings.Builder
	b.WriteString(r.Level.String() + " " + r.Message)
	for _, a := range h.attrs {
		b.WriteString(" " + a.String())
	}
	r.Attrs(func(a slog.Attr) bool {
		b.WriteString(" " + a.String())
		return true
	})
	msg := b.String()
	h.mu.Lock()
	h.n++
	if len(h.first) < 5 {
		h.first = append(h.first, msg)
	}
	h.mu.Unlock()
	if h.verbose {
		fmt.Fprintln(os.Stderr, "  log:", msg)
	}
	return nil
}

func (h *countHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return &countSub{h: h, attrs: as}
}
func (h *countHandler) WithGroup(string) slog.Handler { return h }

// countSub forwards to the shared countHandler with extra attributes.
type countSub struct {
	h     *countHandler
	attrs []slog.Attr
}

func (s *countSub) Enabled(ctx context.Context, l slog.Level) bool { return s.h.Enabled(ctx, l) }
func (s *countSub) Handle(ctx context.Context, r slog.Record) error {
	r = r.Clone()
	r.AddAttrs(s.attrs...)
	return s.h.Handle(ctx, r)
}
func (s *countSub) WithAttrs(as []slog.Attr) slog.Handler {
	return &countSub{h: s.h, attrs: append(append([]slog.Attr(nil), s.attrs...), as...)}
}
func (s *countSub) WithGroup(string) slog.Handler { return s }

// reset forgets what was logged so far.
func (h *countHandler) reset() {
	h.mu.Lock()
	h.n, h.first = 0, nil
	h.mu.Unlock()
}

// warnings returns how many warnings/errors were logged and the first ones.
func (h *countHandler) warnings() (int, []string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.n, append([]string(nil), h.first...)
}

func (b *bench) newLogger() (*slog.Logger, *countHandler) {
	h := &countHandler{verbose: b.opt.Verbose}
	return slog.New(h), h
}

// ---------------------------------------------------------------- statistics

func sortDurations(d []time.Duration) []time.Duration {
	s := append([]time.Duration(nil), d...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s
}

// percentile of a sorted slice (nearest rank).
func percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(float64(len(sorted))*p+0.999999) - 1
	i = max(0, min(i, len(sorted)-1))
	return sorted[i]
}

func medianDur(d []time.Duration) time.Duration {
	if len(d) == 0 {
		return 0
	}
	s := sortDurations(d)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

func maxDur(d []time.Duration) time.Duration {
	var m time.Duration
	for _, v := range d {
		m = max(m, v)
	}
	return m
}

func medianF(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := append([]float64(nil), v...)
	sort.Float64s(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// fmtDur prints a duration with 3 significant digits in a fitting unit.
func fmtDur(d time.Duration) string {
	switch {
	case d < 0:
		return "-" + fmtDur(-d)
	case d < time.Millisecond:
		return fmt.Sprintf("%.0f µs", float64(d)/float64(time.Microsecond))
	case d < 10*time.Millisecond:
		return fmt.Sprintf("%.2f ms", float64(d)/float64(time.Millisecond))
	case d < time.Second:
		return fmt.Sprintf("%.1f ms", float64(d)/float64(time.Millisecond))
	case d < 10*time.Second:
		return fmt.Sprintf("%.2f s", d.Seconds())
	}
	return fmt.Sprintf("%.1f s", d.Seconds())
}

// fmtInt prints 12345 as 12,345.
func fmtInt(n int) string {
	s := fmt.Sprint(n)
	if n < 0 {
		return "-" + fmtInt(-n)
	}
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	return b.String()
}

// ---------------------------------------------------------------- process limits

// raiseNoFile lifts the soft open-files limit to the hard one and returns it.
func raiseNoFile() uint64 {
	var l syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &l); err != nil {
		return 1024
	}
	if l.Cur < l.Max {
		l.Cur = l.Max
		_ = syscall.Setrlimit(syscall.RLIMIT_NOFILE, &l)
		_ = syscall.Getrlimit(syscall.RLIMIT_NOFILE, &l)
	}
	return l.Cur
}

// ---------------------------------------------------------------- databases

func randHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// openSQLite opens a fresh, migrated SQLite store in dir.
func openSQLite(ctx context.Context, dir string, log *slog.Logger) (*store.Store, error) {
	dsn, err := store.ParseDSN("sqlite://"+filepath.Join(dir, "smbench.db"), "")
	if err != nil {
		return nil, err
	}
	return store.Open(ctx, dsn, log)
}

// insertNodes bulk-inserts worker nodes.
func insertNodes(ctx context.Context, db bun.IDB, nodes []store.Node) error {
	now := time.Now().UTC()
	for i := range nodes {
		if nodes[i].CreatedAt.IsZero() {
			nodes[i].CreatedAt, nodes[i].UpdatedAt = now, now
		}
	}
	for len(nodes) > 0 {
		part := nodes[:min(500, len(nodes))]
		nodes = nodes[len(part):]
		if _, err := db.NewInsert().Model(&part).Exec(ctx); err != nil {
			return fmt.Errorf("insert nodes: %w", err)
		}
	}
	return nil
}

// workerNode is a running, auto-registered worker row.
func workerNode(name, host, bootID string) store.Node {
	return store.Node{
		Name: name, Type: store.TypeWorker, MachineName: "smbench", Protocol: "http", Host: host,
		Secret: randHex(32), Status: store.StatusRunning, DesiredStatus: store.StatusRunning,
		Priority: 1, MaxConcurrency: 20, LastSeen: time.Now().UTC(), BootID: bootID, Mode: store.ModeAuto,
	}
}

// taskRow builds a stored task from a definition.
func taskRow(def protocol.TaskDef, status store.TaskStatus, executors []string) (*store.Task, error) {
	spec, err := json.Marshal(def)
	if err != nil {
		return nil, err
	}
	return &store.Task{ID: def.ID, ProjectID: store.DefaultProjectID, Title: def.Title, Type: def.Type, Status: status, Spec: string(spec),
		Keepers: "[]", Children: "[]", CreatedBy: "smbench", Executors: executors}, nil
}

// insertTasks stores tasks with their executors, in one transaction per chunk.
func insertTasks(ctx context.Context, db *bun.DB, tasks []*store.Task) error {
	for len(tasks) > 0 {
		part := tasks[:min(200, len(tasks))]
		tasks = tasks[len(part):]
		err := db.RunInTx(ctx, nil, func(ctx context.Context, tx bun.Tx) error {
			for _, t := range part {
				if err := store.CreateTask(ctx, tx, t); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// httpTask is an HTTP GET task on a cron schedule.
func httpTask(id, cron, target string) protocol.TaskDef {
	return protocol.TaskDef{
		ID: id, Title: "smbench " + id, Type: protocol.TaskHTTP,
		Schedule: protocol.Schedule{Kind: protocol.ScheduleCron, Cron: cron},
		HTTP:     &protocol.HTTPSpec{Method: "GET", URL: target + "/t/" + id},
		Timeout:  protocol.Duration(10 * time.Second),
	}
}

// countRuns counts the stored run records.
func countRuns(ctx context.Context, db bun.IDB) (int, error) {
	n, err := db.NewSelect().Model((*store.Run)(nil)).Count(ctx)
	return int(n), err
}

// addAdmin creates a console user with a cheap bcrypt hash.
func addAdmin(ctx context.Context, db bun.IDB, name, password string) error {
	hash, err := bcrypt.GenerateFromPassword([]byte(password), bcrypt.MinCost)
	if err != nil {
		return err
	}
	return store.CreateUser(ctx, db, &store.User{Username: name, PasswordHash: string(hash), Role: store.RoleAdmin})
}

// login posts the login form and returns the session cookie header.
func login(base, user, password string) (string, error) {
	jar, _ := cookiejar.New(nil)
	c := &http.Client{Jar: jar, Timeout: 20 * time.Second, CheckRedirect: func(*http.Request, []*http.Request) error {
		return http.ErrUseLastResponse
	}}
	resp, err := c.PostForm(base+"/login", url.Values{"username": {user}, "password": {password}})
	if err != nil {
		return "", err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusSeeOther {
		return "", fmt.Errorf("login: status %d, want 303", resp.StatusCode)
	}
	u, _ := url.Parse(base)
	var parts []string
	for _, ck := range jar.Cookies(u) {
		parts = append(parts, ck.Name+"="+ck.Value)
	}
	if len(parts) == 0 {
		return "", fmt.Errorf("login: no session cookie")
	}
	return strings.Join(parts, "; "), nil
}

// ---------------------------------------------------------------- fake worker fleet

// fleet is many cheap worker endpoints on loopback, one listener per node: the
// healthy ones answer /health with their node name and boot id (and 200 {} to
// anything else); the hung ones accept connections and never answer.
type fleet struct {
	srv   *http.Server
	lns   []net.Listener
	hung  map[string]bool
	Nodes []store.Node

	mu   sync.Mutex
	held []net.Conn
	wg   sync.WaitGroup
}

// startFleet opens n endpoints; every hungEvery-th one (when > 0) hangs.
func startFleet(n, hungEvery int, bootID string, keepAlive bool) (*fleet, error) {
	f := &fleet{hung: map[string]bool{}}
	answers := make(map[int][]byte, n)
	f.srv = &http.Server{ReadHeaderTimeout: 30 * time.Second, Handler: http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		if r.URL.Path != protocol.PathHealth {
			rw.Header().Set("Content-Type", "application/json")
			_, _ = rw.Write([]byte("{}"))
			return
		}
		addr, _ := r.Context().Value(http.LocalAddrContextKey).(*net.TCPAddr)
		if addr == nil {
			http.Error(rw, "no local address", http.StatusInternalServerError)
			return
		}
		rw.Header().Set("Content-Type", "application/json")
		_, _ = rw.Write(answers[addr.Port])
	})}
	f.srv.SetKeepAlivesEnabled(keepAlive)
	var healthy []net.Listener
	port := fleetPortBase
	for i := 0; i < n; i++ {
		ln, err := listenFrom(&port)
		if err != nil {
			f.Close()
			return nil, fmt.Errorf("listener %d of %d: %w", i+1, n, err)
		}
		f.lns = append(f.lns, ln)
		name := fmt.Sprintf("w%05d", i)
		lport := ln.Addr().(*net.TCPAddr).Port
		f.Nodes = append(f.Nodes, workerNode(name, ln.Addr().String(), bootID))
		if hungEvery > 0 && i%hungEvery == hungEvery-1 {
			f.hung[name] = true
			f.wg.Add(1)
			go f.hold(ln)
			continue
		}
		body, _ := json.Marshal(protocol.HealthResponse{Node: name, BootID: bootID, Status: protocol.StateScheduling})
		answers[lport] = body
		healthy = append(healthy, ln)
	}
	for _, ln := range healthy {
		go func() { _ = f.srv.Serve(ln) }()
	}
	return f, nil
}

// fleetPortBase starts the port range of fleets: below the kernel's ephemeral
// range, where binding a given port is cheap (asking for port 0 with 10,000
// sockets bound makes the kernel search, which takes a minute).
const fleetPortBase = 11000

// listenFrom binds 127.0.0.1 on the first free port from *port on, below
// 32768, and falls back to a kernel-chosen port.
func listenFrom(port *int) (net.Listener, error) {
	for ; *port < 32768; *port++ {
		ln, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", *port))
		if err == nil {
			*port++
			return ln, nil
		}
	}
	return net.Listen("tcp", "127.0.0.1:0")
}

// hold accepts connections and keeps them open without reading or answering.
func (f *fleet) hold(ln net.Listener) {
	defer f.wg.Done()
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		f.mu.Lock()
		f.held = append(f.held, c)
		f.mu.Unlock()
	}
}

// HungNames lists the hung nodes.
func (f *fleet) HungNames() []string {
	var out []string
	for n := range f.hung {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// Close stops every endpoint and closes held connections.
func (f *fleet) Close() {
	if f.srv != nil {
		_ = f.srv.Close()
	}
	for _, ln := range f.lns {
		_ = ln.Close()
	}
	f.wg.Wait()
	f.mu.Lock()
	for _, c := range f.held {
		_ = c.Close()
	}
	f.held = nil
	f.mu.Unlock()
}

// ---------------------------------------------------------------- /proc

// procStatus returns VmRSS and VmHWM of a process in bytes.
func procStatus(pid int) (rss, hwm int64, err error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, 0, err
	}
	for _, line := range strings.Split(string(data), "\n") {
		var v int64
		switch {
		case strings.HasPrefix(line, "VmRSS:"):
			_, _ = fmt.Sscanf(strings.TrimPrefix(line, "VmRSS:"), "%d", &v)
			rss = v << 10
		case strings.HasPrefix(line, "VmHWM:"):
			_, _ = fmt.Sscanf(strings.TrimPrefix(line, "VmHWM:"), "%d", &v)
			hwm = v << 10
		}
	}
	return rss, hwm, nil
}

// resetPeakRSS makes this process's VmHWM its current resident memory
// (Linux: "5" to clear_refs), so that a peak read after is of what came
// since; where that fails the peak stays the process's whole life's.
func resetPeakRSS() { _ = os.WriteFile("/proc/self/clear_refs", []byte("5"), 0) }

// procCPU returns the CPU time (user + system) a process has used so far.
// /proc/PID/stat counts clock ticks, 100 per second on Linux.
func procCPU(pid int) (time.Duration, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// The command name (field 2) may hold spaces: count fields after its ')'.
	i := strings.LastIndexByte(string(data), ')')
	f := strings.Fields(string(data[i+1:]))
	if len(f) < 13 {
		return 0, fmt.Errorf("short /proc/%d/stat", pid)
	}
	var ut, st int64
	_, _ = fmt.Sscan(f[11], &ut)
	_, _ = fmt.Sscan(f[12], &st)
	return time.Duration(ut+st) * 10 * time.Millisecond, nil
}

func fmtMB(b int64) string { return fmt.Sprintf("%.1f MB", float64(b)/(1<<20)) }

// cpuModel names the CPU for the report header.
func cpuModel() string {
	data, err := os.ReadFile("/proc/cpuinfo")
	if err != nil {
		return "unknown CPU"
	}
	for _, line := range strings.Split(string(data), "\n") {
		if strings.HasPrefix(line, "model name") {
			if i := strings.Index(line, ":"); i >= 0 {
				return strings.TrimSpace(line[i+1:])
			}
		}
	}
	return "unknown CPU"
}
