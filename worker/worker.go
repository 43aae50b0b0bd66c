// Package worker is the worker engine and its guarded HTTP API (NewHandler,
// on the standard library's ServeMux): connection state and secret, the
// handshake, registration with the master, the gocron runner, the http and
// shell executors, and the run-report journal and its delivery. It speaks to
// the master only in package protocol's terms; it never opens the database and
// needs only the masters' URLs (it fails over along them) and the cluster key.
package worker

import (
	"cmp"
	"context"
	"crypto/ed25519"
	crand "crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"math/rand/v2"
	"net"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-co-op/gocron/v2"
	"github.com/jonboulle/clockwork"

	"github.com/schedulemaster-go/schedulemaster/buildinfo"
	"github.com/schedulemaster-go/schedulemaster/protocol"
)

// Config is the worker's validated configuration (NodeSetting in ScheduleMaster).
type Config struct {
	Identity       string // node name; in manual mode the master may assign it at Connect
	Protocol       string
	IP             string // address the master reaches this worker on
	Port           int
	Priority       int
	MaxConcurrency int
	// MasterURL is one master URL or a comma-separated list of them (every
	// master of the cluster, or one load-balanced URL); see MasterURLs.
	MasterURL    string
	ClusterKey   string
	AutoRegister bool
	WorkerOf     string // manual mode: the only cluster whose masters may connect
	AllowShell   bool
	// AllowTypes lists the task types beyond HTTP and shell this worker
	// runs (--allow-types): none unless its operator allows them, as each
	// reaches systems with credentials the master sends.
	AllowTypes  []string
	DataDir     string
	MachineName string
	// Labels are this worker's own labels (--labels), sent at registration
	// and in every /health answer; task selectors match them (with an
	// admin's labels on top, master side). New validates them.
	Labels protocol.Labels
	// StopTimeout is the drain timeout (--drain-timeout): the grace the
	// runs in progress get when the worker stops, and the bound of an
	// admin's Disable (Shutdown). A run still going after it is killed and
	// reported as killed. Default 30s.
	StopTimeout time.Duration
	// RetryBackoff is the delay before a failed run's first retry; it doubles
	// with every further attempt (default 1s).
	RetryBackoff time.Duration
	// JournalMaxBytes bounds the run journal in DataDir (default
	// DefaultJournalMaxBytes); past it new reports are dropped and counted.
	JournalMaxBytes int64
	// Now is this worker's clock (nil: time.Now): the time it sends the
	// masters (registration, health answers: they measure its clock skew
	// from it) and the one its scheduler fires by. Tests set an OffsetClock
	// to play a machine whose clock is off.
	Now func() time.Time
}

// Host is the ip:port the master should use.
func (c Config) Host() string { return net.JoinHostPort(c.IP, strconv.Itoa(c.Port)) }

// NodeConfig is the configuration the worker announces when it registers.
func (c Config) NodeConfig() protocol.NodeConfig {
	return protocol.NodeConfig{Name: c.Identity, Protocol: c.Protocol, Host: c.Host(), Priority: c.Priority, MaxConcurrency: c.MaxConcurrency}
}

// Worker is one running worker node.
type Worker struct {
	// regFlight is closed when the registration in flight (if any) ends.
	regFlight atomic.Pointer[chan struct{}]

	cfg    Config
	log    *slog.Logger
	client *http.Client
	// pageClient has no timeout of its own: each call carrying tasks has a
	// deadline that grows with them (protocol.PageTimeout).
	pageClient *http.Client
	masters    *masters // every worker-to-master call fails over along it
	bootID     string
	nonces     *protocol.NonceCache
	sched      gocron.Scheduler // made by Run, under mu

	nodeKey ed25519.PrivateKey // proves this node's name to the master

	runner  *runner
	reports *reporter
	groups  *shellGroups // process groups of shell commands in progress
	stop    context.CancelFunc
	life    context.Context // ends when Stop has stopped scheduling: the loops end
	// runs ends when a drain's timeout passes (or with life): the runs
	// still in progress are cancelled and reported killed.
	runs     context.Context
	killRuns context.CancelFunc
	// regCtx ends when Stop begins: registrations in flight end first, so
	// that none can start scheduling again behind Stop's back.
	regCtx  context.Context
	regStop context.CancelFunc
	regMu   sync.Mutex // one re-registration at a time
	lastReg time.Time
	stopped bool           // set by Stop under regMu: no new (re-)registration
	regs    sync.WaitGroup // registrations in flight, waited for by Stop
	// noticesDone is closed when the start notice loop has ended.
	noticesDone chan struct{}
	// started is closed once Run has started the worker; ready once it has
	// also registered (auto mode). stopDone is closed when Stop has ended,
	// with its error in stopErr.
	started  chan struct{}
	ready    chan struct{}
	stopDone chan struct{}
	stopErr  error

	mu         sync.Mutex
	state      lifeState
	secret     string
	node       protocol.NodeConfig
	master     string // cluster name accepted for Connect; from --workerof or registration
	connected  bool
	scheduling bool

	// part is the schedule arriving in parts (a push, a registration's
	// pages), nil when none. partMu also orders single task operations
	// with the parts (noteDirect).
	partMu sync.Mutex
	part   *partSession
}

// maxConnsPerHost bounds the connections tasks keep to one host.
const maxConnsPerHost = 512

// lifeState is where a worker is in its life: built, running, stopped.
type lifeState int

const (
	stateBuilt   lifeState = iota // New returned; Run not called yet
	stateRunning                  // Run has started the loops
	stateStopped                  // Stop has begun; Run no longer starts
)

// New builds a worker with a fresh boot id and secret: it validates the
// configuration and prepares the data dir (node key, report journal, the
// last fires of the previous process) but acts on nothing else. It starts
// no goroutine, kills nothing and calls no master: Run does, and Stop undoes
// it (also when Run was never called).
func New(cfg Config, log *slog.Logger) (*Worker, error) {
	if cfg.StopTimeout <= 0 {
		cfg.StopTimeout = 30 * time.Second
	}
	if cfg.RetryBackoff <= 0 {
		cfg.RetryBackoff = time.Second
	}
	if cfg.MaxConcurrency <= 0 {
		cfg.MaxConcurrency = 20
	}
	if err := cfg.Labels.Validate(); err != nil {
		return nil, fmt.Errorf("worker: %w", err)
	}
	cfg.Labels = maps.Clone(cfg.Labels) // the caller's map may change; ours does not
	var nodeKey ed25519.PrivateKey
	if cfg.DataDir != "" {
		if err := prepareDataDir(cfg.DataDir); err != nil {
			return nil, err
		}
		key, created, err := loadOrCreateNodeKey(cfg.DataDir)
		if err != nil {
			return nil, err
		}
		if created {
			log.Info("created this node's key", "file", filepath.Join(cfg.DataDir, NodeKeyFile))
		}
		nodeKey = key
	} else {
		_, key, err := ed25519.GenerateKey(crand.Reader)
		if err != nil {
			return nil, fmt.Errorf("worker: create node key: %w", err)
		}
		nodeKey = key
		if cfg.AutoRegister {
			log.Warn("no data dir: the node key is kept in memory only; after a restart the master refuses this name " +
				"until an admin presses Reset identity on the node")
		}
	}
	groups, err := newShellGroups(cfg.DataDir, log)
	if err != nil {
		return nil, err
	}
	w := &Worker{
		cfg:         cfg,
		log:         log,
		client:      &http.Client{Timeout: 10 * time.Second},
		pageClient:  &http.Client{},
		masters:     newMasters(cfg.MasterURL, log),
		bootID:      protocol.NewNonce(),
		nonces:      protocol.NewNonceCache(100_000),
		secret:      protocol.NewSecret(),
		nodeKey:     nodeKey,
		node:        cfg.NodeConfig(),
		master:      cfg.WorkerOf,
		groups:      groups,
		noticesDone: make(chan struct{}),
		started:     make(chan struct{}),
		ready:       make(chan struct{}),
		stopDone:    make(chan struct{}),
	}
	// Contexts start nothing: they only give Stop something to cancel.
	w.life, w.stop = context.WithCancel(context.Background())
	w.runs, w.killRuns = context.WithCancel(w.life)
	w.regCtx, w.regStop = context.WithCancel(w.life)
	w.reports = newReporter(cfg.DataDir, cfg.JournalMaxBytes, log, w.postRuns)
	tr := http.DefaultTransport.(*http.Transport).Clone()
	// Many tasks often call one host, and the tasks of a schedule start
	// together: keep a connection for every run the node may have in flight
	// (--maxc) when idle, so that a fire reuses connections instead of
	// dialling. A connection costs about 16 KiB while it lives (two
	// goroutines and their buffers): at most maxConnsPerHost per host keep a
	// node with a large --maxc within its memory budget; beyond them, runs
	// to the same host wait for a free connection (within their timeout).
	tr.MaxIdleConns = 0
	tr.MaxConnsPerHost = maxConnsPerHost
	tr.MaxIdleConnsPerHost = min(max(64, cfg.MaxConcurrency), maxConnsPerHost)
	// Each connection has a read and a write buffer (4 KiB each by default).
	// Answers are read into a pooled buffer and large request bodies are
	// written past the buffer: 1 KiB holds a request's or an answer's
	// headers.
	tr.ReadBufferSize, tr.WriteBufferSize = 1<<10, 1<<10
	// The runner's scheduler is made by Run (gocron starts a goroutine when
	// it makes one).
	client := &http.Client{Transport: tr, CheckRedirect: checkRedirect}
	execs, err := newRegistry(client, cfg.AllowShell, cfg.AllowTypes, log)
	if err != nil {
		return nil, err
	}
	w.runner = &runner{
		now: cfg.Now, log: log, node: w.Name, limit: newLimiter(cfg.MaxConcurrency),
		http: client, execs: execs, reports: w.reports, claim: w.claimFire,
		shell: cfg.AllowShell, backoff: cfg.RetryBackoff, jobs: map[string]*taskJob{}, ctx: w.runs, pgroups: groups,
		stopNote: fmt.Sprintf("the worker stopped and the run was still going at the end of its drain timeout (%s)", cfg.StopTimeout),
	}
	w.runner.fires.health = w.reports.health
	w.runner.fires.load(cfg.DataDir, log)
	w.reports.metrics.watchLimiter(w.runner.limit)
	return w, nil
}

// BootID identifies this process; it changes at every start.
func (w *Worker) BootID() string { return w.bootID }

// Name is the node name, possibly assigned by the master at Connect.
func (w *Worker) Name() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.node.Name
}

// Health reports the worker's identity and state.
func (w *Worker) Health() protocol.HealthResponse {
	w.mu.Lock()
	defer w.mu.Unlock()
	state := protocol.StateWaiting
	switch {
	case w.scheduling:
		state = protocol.StateScheduling
	case w.connected:
		state = protocol.StateIdle
	}
	shell := w.cfg.AllowShell
	build := buildinfo.Get()
	return protocol.HealthResponse{Node: w.node.Name, BootID: w.bootID, Status: state, RunningTasks: w.runner.count(), AllowShell: &shell,
		AllowTypes: allowedTypes(w.runner.registry()), Degraded: w.reports.health.reason(), Labels: w.cfg.Labels, Version: &build, WorkerTimeMS: w.now().UnixMilli()}
}

// CheckSecret reports, in constant time, whether s is the current access secret.
func (w *Worker) CheckSecret(s string) bool {
	w.mu.Lock()
	cur := w.secret
	w.mu.Unlock()
	return protocol.EqualSecret(s, cur)
}

// ConnectHeaders are the handshake headers of a Connect request.
type ConnectHeaders struct {
	Master, NameTo, Timestamp, Nonce, MAC string
}

// Connect verifies the handshake, adopts the configuration sent and returns a new
// secret; the previous secret stops working at once.
func (w *Worker) Connect(h ConnectHeaders, req protocol.ConnectRequest, now time.Time) (protocol.ConnectResponse, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if h.NameTo == "" || h.Timestamp == "" || h.Nonce == "" || h.MAC == "" {
		return protocol.ConnectResponse{}, fmt.Errorf("%w: missing handshake headers", protocol.ErrHandshake)
	}
	if err := protocol.CheckTimestamp(h.Timestamp, now); err != nil {
		return protocol.ConnectResponse{}, err
	}
	// Nothing about this worker's cluster may leak before the sender proves
	// it holds the cluster key: an outsider gets the same answer whatever
	// name it tries. A MAC made for the cluster named in sm_master proves the
	// key too, so such a sender may learn that this worker is not its own.
	// Any master of the cluster signs with the cluster's name, so any of
	// them may connect.
	ours := w.master != "" && protocol.EqualMAC(h.MAC, protocol.ConnectMAC(w.cfg.ClusterKey, w.master, h.NameTo, h.Timestamp, h.Nonce))
	theirs := !ours && h.Master != "" && h.Master != w.master &&
		protocol.EqualMAC(h.MAC, protocol.ConnectMAC(w.cfg.ClusterKey, h.Master, h.NameTo, h.Timestamp, h.Nonce))
	if !ours && !theirs {
		return protocol.ConnectResponse{}, fmt.Errorf("%w: bad signature (wrong cluster key or cluster name)", protocol.ErrHandshake)
	}
	if !w.nonces.Use(h.Nonce, now) {
		return protocol.ConnectResponse{}, fmt.Errorf("%w: nonce already used", protocol.ErrHandshake)
	}
	if w.master == "" {
		return protocol.ConnectResponse{}, fmt.Errorf("%w: this worker has no --workerof cluster", protocol.ErrHandshake)
	}
	if theirs || (h.Master != "" && h.Master != w.master) {
		return protocol.ConnectResponse{}, fmt.Errorf("%w: this worker belongs to another cluster", protocol.ErrHandshake)
	}
	if req.Node.Name != h.NameTo {
		return protocol.ConnectResponse{}, fmt.Errorf("%w: body names node %q, header %q", protocol.ErrInvalid, req.Node.Name, h.NameTo)
	}
	if w.cfg.Identity != "" && w.cfg.Identity != h.NameTo {
		return protocol.ConnectResponse{}, fmt.Errorf("%w: this worker is %q, not %q", protocol.ErrHandshake, w.cfg.Identity, h.NameTo)
	}
	if err := req.Node.Validate(); err != nil {
		return protocol.ConnectResponse{}, fmt.Errorf("worker: connect config: %w", err)
	}
	w.node = req.Node
	w.runner.limit.setMax(req.Node.MaxConcurrency)
	w.secret = protocol.NewSecret()
	w.connected = true
	w.log.Info("connected to master", "cluster", w.master, "node", w.node.Name)
	return protocol.ConnectResponse{Node: w.node.Name, Secret: w.secret, BootID: w.bootID}, nil
}

// Startup starts scheduling the given tasks; it replaces the task set of a
// worker that already schedules. A task that cannot be scheduled is logged and
// reported; the others run. Before Run has started the worker it waits for
// it (until ctx ends); after Stop it fails with ErrNotRunning.
func (w *Worker) Startup(ctx context.Context, req protocol.StartupRequest) error {
	if err := w.waitStarted(ctx); err != nil {
		return err
	}
	w.partMu.Lock()
	defer w.partMu.Unlock()
	if err := w.beginScheduling(ctx); err != nil {
		return err
	}
	// This push gives every task: a session in progress is superseded, and
	// the body is a session of one part.
	ps := w.newPartSession("")
	ps.downNoticed, ps.runningSince = req.DownNoticed, req.RunningSince
	w.handDown(req.DownNoticed, req.DownSince)
	return w.applyPart(ps, req.Tasks, true)
}

// waitStarted waits until Run has started the worker; ErrNotRunning after
// Stop or when ctx ends first.
func (w *Worker) waitStarted(ctx context.Context) error {
	select {
	case <-w.started:
		return nil
	case <-w.stopDone:
		return ErrNotRunning
	case <-ctx.Done():
		return fmt.Errorf("%w: %w", ErrNotRunning, ctx.Err())
	}
}

// beginScheduling starts the scheduler once the worker runs: a push of
// tasks makes it schedule.
func (w *Worker) beginScheduling(ctx context.Context) error {
	if err := w.waitStarted(ctx); err != nil {
		return err
	}
	w.mu.Lock()
	if w.state != stateRunning {
		w.mu.Unlock()
		return ErrNotRunning
	}
	if !w.scheduling {
		w.sched.Start()
		w.scheduling = true
	}
	w.mu.Unlock()
	return nil
}

// handDown splits the counting of missed fires with a master that saw this
// node down (see protocol.StartupRequest.DownSince).
func (w *Worker) handDown(noticed bool, since *time.Time) {
	switch {
	case noticed && since != nil && !since.IsZero():
		// The master saw this node down from since on and records what
		// its tasks missed from then: this worker counts the fires before.
		w.runner.fires.handOver(*since)
	case noticed:
		// An older master records all of it: counting the previous process's
		// last fires too would record it twice.
		w.runner.fires.retain(map[string]bool{})
	}
}

// Shutdown stops scheduling and waits (bounded by StopTimeout) for running jobs.
func (w *Worker) Shutdown(ctx context.Context) error { return w.shutdown(ctx, false) }

// shutdown is Shutdown; keep keeps the tasks' last fires for the next
// process (the process stops; a master stopping this node's scheduling
// decides to skip those fires, like stopping a task).
func (w *Worker) shutdown(ctx context.Context, keep bool) error {
	// What a push or a registration in progress brings later is not
	// applied: this node schedules nothing until told again.
	w.endPartSession()
	w.mu.Lock()
	if !w.scheduling {
		w.mu.Unlock()
		return nil
	}
	w.scheduling = false
	w.mu.Unlock()
	w.runner.clear(keep)
	if err := w.sched.StopJobsWithContext(ctx); err != nil {
		return fmt.Errorf("worker: stop jobs: %w", err)
	}
	if err := w.runner.waitBackground(ctx); err != nil {
		return fmt.Errorf("worker: stop catch-up runs: %w", err)
	}
	w.log.Info("scheduling stopped")
	return nil
}

// StartTask schedules a task (idempotent: a started task is updated in place).
func (w *Worker) StartTask(spec protocol.TaskSpec) error {
	if err := w.waitScheduling(); err != nil {
		return err
	}
	w.partMu.Lock()
	defer w.partMu.Unlock()
	if err := w.runner.start(spec); err != nil {
		return err
	}
	w.noteDirect(spec.ID, opStarted)
	return nil
}

// waitScheduling is nil when the worker schedules, after waiting briefly
// for a registration in flight; else ErrNotScheduling.
func (w *Worker) waitScheduling() error {
	if !w.isScheduling() {
		// The master may push a task the moment it has recorded this node
		// running, while the registration's answer (and with it the
		// schedule) is still on its way: wait for it, briefly.
		if ch := w.regFlight.Load(); ch != nil {
			select {
			case <-*ch:
			case <-time.After(registrationWait):
			}
		}
		if !w.isScheduling() {
			return ErrNotScheduling
		}
	}
	return nil
}

// registrationWait bounds how long a pushed task waits for a registration
// in flight: well within the master's call timeout.
const registrationWait = 3 * time.Second

// StopTask removes a task; stopping a task that is not here is fine. During
// a schedule arriving in parts, a later part does not start it again.
func (w *Worker) StopTask(id string) {
	w.partMu.Lock()
	defer w.partMu.Unlock()
	w.stopTaskLocked(id)
}

// stopTaskLocked is StopTask under partMu.
func (w *Worker) stopTaskLocked(id string) {
	w.runner.stop(id)
	w.noteDirect(id, opStopped)
}

// PauseTask keeps a task's schedule and skips its runs until ResumeTask.
func (w *Worker) PauseTask(id string) error { return w.setPaused(id, true) }

// ResumeTask lets a paused task run again.
func (w *Worker) ResumeTask(id string) error { return w.setPaused(id, false) }

// setPaused is PauseTask or ResumeTask.
func (w *Worker) setPaused(id string, paused bool) error {
	w.partMu.Lock()
	defer w.partMu.Unlock()
	return w.setPausedLocked(id, paused)
}

// setPausedLocked is setPaused under partMu. While a schedule arrives in
// parts, a task not here yet comes with a later part: it comes paused (or
// not) as this call says.
func (w *Worker) setPausedLocked(id string, paused bool) error {
	err := w.runner.setPaused(id, paused)
	if err != nil && (w.part == nil || !errors.Is(err, ErrUnknownTask)) {
		return err
	}
	op := opResumed
	if paused {
		op = opPaused
	}
	w.noteDirect(id, op)
	return nil
}

// RunOnce runs a task now, once, outside its schedule. A task not scheduled
// here needs its definition in the request. Once Stop has begun (the worker
// drains) it fails with ErrNotRunning.
func (w *Worker) RunOnce(req protocol.RunOnceRequest) error {
	w.mu.Lock()
	stopping := w.state == stateStopped
	w.mu.Unlock()
	if stopping {
		return ErrNotRunning // draining: no new run starts
	}
	if req.CatchUp != nil {
		if err := req.CatchUp.Validate(); err != nil {
			return err
		}
	}
	if req.Workflow != nil {
		return w.runStep(req)
	}
	spec, ok := w.runner.get(req.ID)
	if !ok {
		if req.Task == nil {
			return fmt.Errorf("%w: %s (send its definition to run it once)", ErrUnknownTask, req.ID)
		}
		spec = *req.Task
		spec.Normalize()
		if err := spec.Validate(time.Now().Add(-24 * time.Hour)); err != nil {
			return fmt.Errorf("task %s: %w", spec.ID, err)
		}
		if spec.ID != req.ID {
			return fmt.Errorf("%w: body names task %q and %q", protocol.ErrInvalid, req.ID, spec.ID)
		}
	}
	if err := checkRunnable(w.runner.registry(), &spec); err != nil {
		return err
	}
	w.runner.runOnce(runOnceSpec(spec, req.Task), req.CatchUp)
	return nil
}

// runStep runs a workflow step's task once, as the request defines it,
// with the step's params and the first attempt's id the master chose. A
// step this worker already started (sent again) is not started twice.
func (w *Worker) runStep(req protocol.RunOnceRequest) error {
	wf := req.Workflow
	if err := wf.Validate(); err != nil {
		return err
	}
	id, ok := parseRunID(wf.RunID)
	if !ok {
		return fmt.Errorf("%w: workflow step run id %q is not a UUID", protocol.ErrInvalid, wf.RunID)
	}
	if req.Task == nil || req.Task.ID != req.ID {
		return fmt.Errorf("%w: a workflow step's run carries its task's definition", protocol.ErrInvalid)
	}
	spec := *req.Task
	spec.Normalize()
	if err := spec.Validate(time.Now().Add(-24 * time.Hour)); err != nil {
		return fmt.Errorf("task %s: %w", spec.ID, err)
	}
	if err := checkRunnable(w.runner.registry(), &spec); err != nil {
		return err
	}
	if !w.runner.steps.first(id) {
		w.log.Info("workflow step sent again: already started here", "workflow_run", wf.Run, "step", wf.Step, "run", wf.RunID)
		return nil
	}
	w.runner.runOnceAs(runOnceSpec(withStepParams(spec, wf), req.Task), nil, id, &stepRef{wfRun: wf.Run, name: wf.Step})
	return nil
}

// RunProgress returns a run in progress on this worker (by report id) with
// its output so far; false when no such run is in progress here.
func (w *Worker) RunProgress(id string) (protocol.RunProgress, bool) {
	return w.runner.live.progress(id)
}

// KillRun kills a run in progress on this worker (by report id): its HTTP
// request is abandoned or its shell command's process group killed, and it
// is reported as killed, not retried. by names who asked, for its output.
// False when no such run is in progress here.
func (w *Worker) KillRun(id, by string) bool {
	if !w.runner.live.kill(id, by) {
		return false
	}
	w.log.Info("run killed", "run", id, "by", by)
	return true
}

func (w *Worker) isScheduling() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.scheduling
}

// authHeaders are the sm_node/sm_secret headers of worker-to-master calls.
func (w *Worker) authHeaders() map[string]string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return map[string]string{protocol.HeaderNode: w.node.Name, protocol.HeaderSecret: w.secret}
}

// claimFire asks the master whether this node runs the given fire; run is
// the report id the fire's first report will carry.
func (w *Worker) claimFire(ctx context.Context, taskID string, fire time.Time, run runID) (bool, error) {
	body, err := json.Marshal(protocol.ClaimRequest{TaskID: taskID, FireAt: fire, RunID: run.String()})
	if err != nil {
		return false, err
	}
	ctx, cancel := context.WithTimeout(ctx, protocol.ClaimTimeout)
	defer cancel()
	for {
		var resp protocol.ClaimResponse
		err := w.hedgedPost(ctx, w.masters.claimHedge, protocol.PathMasterClaim, w.authHeaders(), body, &resp)
		if err == nil {
			return resp.Won, nil
		}
		w.maybeReregister(err)
		// A fire further ahead of the master's clock than it decides
		// (this clock runs fast) is claimed again when the master says,
		// if that is within the claim's timeout.
		var se *protocol.StatusError
		if !errors.As(err, &se) || se.Status != http.StatusTooEarly {
			return false, err
		}
		if dl, ok := ctx.Deadline(); se.RetryAfter <= 0 || (ok && time.Until(dl) <= se.RetryAfter) {
			return false, fmt.Errorf("%w: %w", errClaimTooEarly, err)
		}
		t := time.NewTimer(se.RetryAfter)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return false, fmt.Errorf("%w: %w", errClaimTooEarly, err)
		}
	}
}

// postRuns delivers one batch of run reports. A 400 or 413 means the master
// cannot read the batch at all (errBatchRefused); the reporter then splits it.
func (w *Worker) postRuns(ctx context.Context, runs []protocol.RunReport) (protocol.RunsResponse, error) {
	body, err := json.Marshal(protocol.RunsRequest{Runs: runs})
	if err != nil {
		return protocol.RunsResponse{}, fmt.Errorf("worker: encode run reports: %w", err)
	}
	var resp protocol.RunsResponse
	if err := w.hedgedPost(ctx, w.masters.reportHedge, protocol.PathMasterRuns, w.authHeaders(), body, &resp); err != nil {
		w.maybeReregister(err)
		var se *protocol.StatusError
		if errors.As(err, &se) && (se.Status == http.StatusBadRequest || se.Status == http.StatusRequestEntityTooLarge ||
			se.Status == http.StatusUnprocessableEntity) {
			return protocol.RunsResponse{}, fmt.Errorf("%w: %w", errBatchRefused, err)
		}
		return protocol.RunsResponse{}, err
	}
	return resp, nil
}

// ReportStats counts the run reports this worker gave up on, and the size of
// its journal.
func (w *Worker) ReportStats() ReportStats { return w.reports.stats() }

// maybeReregister makes an auto worker that the master no longer knows (a 401
// on its calls) register again, at most once a minute.
func (w *Worker) maybeReregister(err error) {
	if !w.cfg.AutoRegister || !errors.Is(err, errMasterUnauthorized) {
		return
	}
	w.regMu.Lock()
	if w.stopped || time.Since(w.lastReg) < time.Minute {
		w.regMu.Unlock()
		return
	}
	w.lastReg = time.Now()
	w.regs.Add(1)
	w.regMu.Unlock()
	go func() {
		defer w.regs.Done()
		ctx, cancel := context.WithTimeout(w.regCtx, 30*time.Second)
		defer cancel()
		if err := w.register(ctx); err != nil {
			w.log.Warn("re-registration failed", "err", err)
		}
	}()
}

// Run starts the worker and keeps it running until ctx ends or Stop is
// called. It kills the shell commands a crashed predecessor left running
// (reporting their runs as killed), starts the scheduler, the delivery of
// run reports, the saving of last fires and the start notices, and, when
// auto-registration is on, registers with a master, retrying with backoff
// (a manual worker waits for Connect). Ready tells when that is done.
//
// Shutdown is one path: when ctx ends, Run calls Stop itself (bounded by
// StopTimeout plus StopSlack for the last reports and the offline call);
// when Stop is called, Run returns once it has ended. Run returns ErrStopped
// after Stop and ErrRunning when Run was called already.
func (w *Worker) Run(ctx context.Context) error {
	if err := w.start(); err != nil {
		return err
	}
	select {
	case <-ctx.Done():
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), w.cfg.StopTimeout+StopSlack)
		defer cancel()
		return w.Stop(sctx)
	case <-w.stopDone: // Stop was called
		return nil
	}
}

// start is the starting half of Run.
func (w *Worker) start() error {
	opts := []gocron.SchedulerOption{gocron.WithStopTimeout(w.cfg.StopTimeout), gocron.WithLocation(time.UTC)}
	if w.cfg.Now != nil {
		opts = append(opts, gocron.WithClock(schedClock{Clock: clockwork.NewRealClock(), now: w.cfg.Now}))
	}
	sched, err := gocron.NewScheduler(opts...)
	if err != nil {
		return fmt.Errorf("worker: create scheduler: %w", err)
	}
	w.mu.Lock()
	switch w.state {
	case stateRunning:
		w.mu.Unlock()
		_ = sched.Shutdown()
		return ErrRunning
	case stateStopped:
		w.mu.Unlock()
		_ = sched.Shutdown()
		return ErrStopped
	}
	// From here Stop waits for the loops below: they start whatever it does.
	w.state = stateRunning
	w.sched, w.runner.sched = sched, sched
	w.mu.Unlock()
	// Commands a crashed predecessor left running are killed before this
	// process runs any, and their runs reported as killed.
	for _, rep := range w.groups.reap(time.Now()) {
		w.reports.add(rep)
	}
	// From here until a clean stop says so, a restart finds "running".
	w.runner.fires.markStopFile(false, time.Time{})
	go w.reports.run(w.life)
	go w.runner.saveFires(w.life)
	go w.runner.noticeLoop(w.life, w.noticesDone)
	close(w.started)
	if !w.cfg.AutoRegister {
		w.log.Info("manual mode: waiting for the master to connect", "workerof", w.cfg.WorkerOf)
		close(w.ready)
		return nil
	}
	w.regMu.Lock()
	if w.stopped {
		w.regMu.Unlock()
		return nil
	}
	w.regs.Add(1)
	w.regMu.Unlock()
	go func() {
		defer w.regs.Done()
		if w.registerLoop(w.regCtx) {
			close(w.ready)
		}
	}()
	return nil
}

// Ready is closed once Run has started the worker and, when
// auto-registration is on, registered it with a master.
func (w *Worker) Ready() <-chan struct{} { return w.ready }

// registerLoop registers with the master, retrying with backoff until it
// succeeds (true) or ctx ends.
func (w *Worker) registerLoop(ctx context.Context) bool {
	delay := 500 * time.Millisecond
	for attempt := 1; ; attempt++ {
		err := w.register(ctx)
		if err == nil {
			return true
		}
		if ctx.Err() != nil {
			return false
		}
		w.log.Warn("registration with the master failed; retrying", "attempt", attempt, "in", delay.Round(time.Millisecond), "err", err)
		jitter := time.Duration(rand.Int64N(int64(delay)/4 + 1))
		select {
		case <-ctx.Done():
			return false
		case <-time.After(delay + jitter):
		}
		delay = min(delay*2, 30*time.Second)
	}
}

// register registers with a master and schedules the node's tasks it
// answers with: the first page, then (More) the pages after it, fetched
// one after another (pullTasks). The session that takes them begins before
// the registration is sent, so that a task operation a master sends once
// it has recorded this node is never undone by a page read before it.
func (w *Worker) register(ctx context.Context) error {
	w.partMu.Lock()
	ps := w.newPartSession("register " + protocol.NewNonce())
	w.partMu.Unlock()
	// While the registration is in flight, a task pushed by a master that
	// has recorded it waits for it (StartTask), until the answer's tasks
	// are scheduled.
	flight := make(chan struct{})
	w.regFlight.Store(&flight)
	landed := false
	land := func() {
		if !landed {
			landed = true
			close(flight)
			w.regFlight.CompareAndSwap(&flight, nil)
		}
	}
	defer land()
	resp, used, node, err := w.registerCall(ctx, true)
	var se *protocol.StatusError
	if errors.As(err, &se) && se.Status == http.StatusBadRequest && strings.Contains(se.Msg, `unknown field "parts"`) {
		// A master of an earlier version: it answers with every task.
		w.log.Info("the master takes no registration in parts (an earlier version): registering again for every task in one answer", "url", used)
		resp, used, node, err = w.registerCall(ctx, false)
		resp.More = false // such a master has no pages to fetch
	}
	if err != nil {
		w.dropPartSession(ps)
		return err
	}
	if len(resp.Tasks) > protocol.MaxTaskBatch && resp.More {
		w.dropPartSession(ps)
		return fmt.Errorf("worker: registration answer of %s: %d tasks in a part: at most %d", used, len(resp.Tasks), protocol.MaxTaskBatch)
	}
	w.partMu.Lock()
	current, overflow := w.part == ps, ps.overflow
	if current {
		if err := w.beginScheduling(ctx); err != nil {
			w.part = nil
			w.partMu.Unlock()
			return err
		}
		ps.downNoticed, ps.runningSince = resp.DownNoticed, resp.RunningSince
		w.handDown(resp.DownNoticed, resp.DownSince)
		// A task that cannot be scheduled is logged; the node still registers.
		_ = w.applyPart(ps, resp.Tasks, !resp.More)
	}
	w.partMu.Unlock()
	land()
	w.mu.Lock()
	w.master = resp.Master
	if w.cfg.WorkerOf != "" {
		w.master = w.cfg.WorkerOf
	}
	w.connected = true
	w.mu.Unlock()
	if w.cfg.WorkerOf != "" && resp.Master != w.cfg.WorkerOf {
		w.log.Warn("the master's cluster is not the one --workerof names: its masters cannot Connect this worker",
			"cluster", resp.Master, "workerof", w.cfg.WorkerOf)
	}
	w.log.Info("registered with the master", "cluster", resp.Master, "url", used, "node", node, "tasks", len(resp.Tasks), "more", resp.More)
	if overflow {
		return errors.New("worker: too many task operations while the registration was in flight; register again")
	}
	if !current {
		// A master's push (or a Shutdown) came while the answer was on its
		// way: it decides this node's schedule, not the answer.
		w.log.Info("a master's push came during the registration: the answer's tasks are left to it")
		return nil
	}
	if resp.More {
		return w.pullTasks(ps, resp.After)
	}
	return nil
}

// registerCall sends one registration; parts asks for the tasks in parts.
// It returns the answer, the URL of the master that answered (or failed
// last) and the node name registered.
func (w *Worker) registerCall(ctx context.Context, parts bool) (protocol.RegisterResponse, string, string, error) {
	w.mu.Lock()
	req := protocol.RegisterRequest{Node: w.node, MachineName: w.cfg.MachineName, Secret: w.secret, BootID: w.bootID,
		NodeKey: hex.EncodeToString(w.nodeKey.Public().(ed25519.PublicKey)), Labels: w.cfg.Labels, Parts: parts}
	w.mu.Unlock()
	if parts {
		// A master of an earlier version refuses the field (as it does Parts).
		req.WorkerTimeMS = w.now().UnixMilli()
	}
	body, err := json.Marshal(req)
	if err != nil {
		return protocol.RegisterResponse{}, "", req.Node.Name, err
	}
	ts := strconv.FormatInt(w.now().Unix(), 10)
	nonce := protocol.NewNonce()
	headers := map[string]string{
		protocol.HeaderNode:      req.Node.Name,
		protocol.HeaderTimestamp: ts,
		protocol.HeaderNonce:     nonce,
		protocol.HeaderSignature: protocol.RegisterMAC(w.cfg.ClusterKey, req.Node.Name, ts, nonce, body),
		// The cluster key lets a machine join; only this node's key lets it
		// take its own name again.
		protocol.HeaderNodeSignature: protocol.SignRegistration(w.nodeKey, req.Node.Name, ts, nonce, body),
	}
	var resp protocol.RegisterResponse
	client, limit := w.client, int64(protocol.MaxStartupBody)
	if parts {
		// One page at most: the call's deadline is a page's.
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, protocol.PageTimeout(protocol.MaxTaskBatch))
		defer cancel()
		client, limit = w.pageClient, protocol.MaxTaskBatchBody
	}
	used, err := w.callWith(ctx, client, protocol.PathMasterRegister, headers, body, limit, &resp)
	return resp, used, req.Node.Name, err
}

// dropPartSession ends session ps if it is still the current one.
func (w *Worker) dropPartSession(ps *partSession) {
	w.partMu.Lock()
	if w.part == ps {
		w.part = nil
	}
	w.partMu.Unlock()
}

// Pacing of pullTasks' retries of a page that failed in a way another try
// may fix (no master answered, or a 5xx).
const (
	pullFirstRetry = 500 * time.Millisecond
	pullMaxRetry   = 30 * time.Second
)

// pullTasks fetches the pages after a registration answer's, one after
// another from after on, and schedules each in session ps, until the last
// one, or until ps is superseded (a master's push, a Shutdown: they decide)
// or Stop begins. The next page is fetched while the current one is
// scheduled: two pages held at most. A page that fails is tried again
// (along the masters, with backoff); a refusal (a 4xx, a bad answer) ends
// the session, keeping what it scheduled, and is returned: the caller
// registers again.
func (w *Worker) pullTasks(ps *partSession, after string) error {
	ctx, cancel := context.WithCancel(w.regCtx) // not the registration's: a page may come long after it
	defer cancel()
	type fetched struct {
		page protocol.TasksPageResponse
		err  error
	}
	pages := make(chan fetched)
	go func() {
		defer close(pages)
		cursor, delay := after, pullFirstRetry
		for {
			page, retry, err := w.fetchPage(ctx, cursor)
			if err != nil && retry {
				if w.sessionGone(ps) {
					return
				}
				w.log.Warn("fetching this node's tasks failed; retrying", "after", cursor, "in", delay, "err", err)
				select {
				case <-ctx.Done():
					return
				case <-time.After(delay):
				}
				delay = min(delay*2, pullMaxRetry)
				continue
			}
			delay = pullFirstRetry
			select {
			case pages <- fetched{page, err}:
			case <-ctx.Done():
				return
			}
			if err != nil || !page.More || page.After <= cursor {
				return
			}
			cursor = page.After
		}
	}()
	for n := 1; ; {
		f, ok := <-pages
		if !ok {
			if w.sessionGone(ps) {
				w.log.Info("a master's push came while this node's tasks were fetched: the rest is left to it", "pages", n)
				return nil
			}
			w.dropPartSession(ps)
			return fmt.Errorf("worker: fetch this node's tasks: %w", cmp.Or(ctx.Err(), ErrNotRunning))
		}
		if f.err != nil {
			w.dropPartSession(ps)
			return fmt.Errorf("worker: fetch this node's tasks after part %d: %w", n, f.err)
		}
		n++
		w.partMu.Lock()
		if w.part != ps {
			overflow := ps.overflow
			w.partMu.Unlock()
			if overflow {
				return errors.New("worker: too many task operations while the schedule arrived in parts; register again")
			}
			w.log.Info("a master's push came while this node's tasks were fetched: the rest is left to it", "pages", n)
			return nil
		}
		_ = w.applyPart(ps, f.page.Tasks, !f.page.More)
		w.partMu.Unlock()
		if !f.page.More {
			w.log.Info("this node's tasks fetched", "parts", n)
			return nil
		}
		if f.page.After <= after {
			w.dropPartSession(ps)
			return fmt.Errorf("worker: the master's part %d does not move the cursor past %q", n, after)
		}
		after = f.page.After
	}
}

// sessionGone reports whether session ps is no longer the current one.
func (w *Worker) sessionGone(ps *partSession) bool {
	w.partMu.Lock()
	defer w.partMu.Unlock()
	return w.part != ps
}

// fetchPage asks a master for a page of this node's tasks after the cursor
// after (protocol.PathMasterTasks), within a page's deadline. retry says
// the failure is one another try may fix (no master answered in time, or a
// 5xx), not a refusal.
func (w *Worker) fetchPage(ctx context.Context, after string) (_ protocol.TasksPageResponse, retry bool, _ error) {
	body, err := json.Marshal(protocol.TasksPageRequest{After: after, Limit: protocol.MaxTaskBatch})
	if err != nil {
		return protocol.TasksPageResponse{}, false, err
	}
	cctx, cancel := context.WithTimeout(ctx, protocol.PageTimeout(protocol.MaxTaskBatch))
	defer cancel()
	var page protocol.TasksPageResponse
	base, err := w.callRaw(cctx, w.pageClient, protocol.PathMasterTasks, w.authHeaders(), body, protocol.MaxTaskBatchBody, &page)
	if err != nil {
		return page, ctx.Err() == nil && failsOver(cctx, err), callError(err, base, base+protocol.PathMasterTasks)
	}
	if len(page.Tasks) > protocol.MaxTaskBatch {
		return page, false, fmt.Errorf("worker: master at %s answered %d tasks in a page: at most %d", base, len(page.Tasks), protocol.MaxTaskBatch)
	}
	return page, false, nil
}

// Stop stops the worker: registrations in flight end, then it drains (see
// drain: no new fire is taken, the runs in progress get StopTimeout, the
// drain timeout, and those still going are then killed and reported as
// killed), the last reports are delivered or kept in the journal, the last
// fires are saved and, when connected, a master (any one of the list that
// answers) is told this node goes offline. It is the graceful part of
// SIGTERM handling and the one way down: Run calls it when its ctx ends.
// Give it StopTimeout + StopSlack.
//
// Stop is safe at any time: before Run (it releases what New prepared; a
// later Run returns ErrStopped), twice or concurrently (the later calls wait
// for the first, until their ctx ends, and return its error).
func (w *Worker) Stop(ctx context.Context) error {
	w.mu.Lock()
	prev := w.state
	w.state = stateStopped
	w.mu.Unlock()
	if prev == stateStopped {
		select {
		case <-w.stopDone:
			return w.stopErr
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	w.stopErr = w.stopAll(ctx, prev == stateRunning)
	close(w.stopDone)
	return w.stopErr
}

// stopAll is Stop's work; started tells whether Run started the loops.
func (w *Worker) stopAll(ctx context.Context, started bool) error {
	// End registrations first, so that none starts scheduling again.
	w.regMu.Lock()
	w.stopped = true
	w.regMu.Unlock()
	w.regStop()
	w.regs.Wait()
	w.drain(ctx)
	// Then deliver or spool the last reports and save the last fires.
	w.stop()
	// No run goes on now: close the executors' pooled connections.
	if err := w.runner.registry().Close(); err != nil {
		w.log.Warn("close task type connections", "err", err)
	}
	if started {
		<-w.reports.done
		<-w.noticesDone
		if w.runner.fires.done != nil {
			<-w.runner.fires.done
		}
		defer w.sched.Shutdown()
	} else {
		w.reports.close() // what is journaled stays for the next process
	}
	w.mu.Lock()
	connected, name, secret := w.connected, w.node.Name, w.secret
	w.connected = false
	w.mu.Unlock()
	if !connected {
		return nil
	}
	if err := w.tellOffline(ctx, name, secret); err != nil {
		return fmt.Errorf("worker: tell the master we go offline: %w", err)
	}
	return nil
}

// post sends a JSON body to a master and decodes a JSON answer into out.
func (w *Worker) post(ctx context.Context, path string, headers map[string]string, body []byte, out any) error {
	_, err := w.call(ctx, path, headers, body, out)
	return err
}

// call is post that also returns the base URL of the master that answered
// (or failed last). It starts at the master in use and fails over along the
// list on connection errors and 5xx answers.
func (w *Worker) call(ctx context.Context, path string, headers map[string]string, body []byte, out any) (string, error) {
	return w.callWith(ctx, w.client, path, headers, body, protocol.MaxStartupBody, out)
}

// callWith is call with the given client and answer size limit.
func (w *Worker) callWith(ctx context.Context, client *http.Client, path string, headers map[string]string, body []byte, limit int64, out any) (string, error) {
	base, err := w.callRaw(ctx, client, path, headers, body, limit, out)
	return base, callError(err, base, base+path)
}

// callRaw is callWith with the error as protocol.Call returned it.
func (w *Worker) callRaw(ctx context.Context, client *http.Client, path string, headers map[string]string, body []byte, limit int64, out any) (string, error) {
	var base string
	err := w.masters.do(ctx, func(b string) error {
		base = b
		return protocol.Call(ctx, client, http.MethodPost, b+path, headers, body, limit, out)
	})
	return base, err
}

// hedgedPost is post for calls that are harmless twice (a claim, a batch of
// run reports): the next master is asked too when the current one has not
// answered within delay (masters.hedge), and the first good answer is
// decoded into out.
func (w *Worker) hedgedPost(ctx context.Context, delay time.Duration, path string, headers map[string]string, body []byte, out any) error {
	var mu sync.Mutex
	answers := map[string]json.RawMessage{} // per master: attempts run at once
	base, err := w.masters.hedge(ctx, delay, func(actx context.Context, b string) error {
		var raw json.RawMessage
		err := protocol.Call(actx, w.client, http.MethodPost, b+path, headers, body, protocol.MaxStartupBody, &raw)
		if err == nil {
			mu.Lock()
			answers[b] = raw
			mu.Unlock()
		}
		return err
	})
	if err == nil && out != nil {
		mu.Lock()
		raw := answers[base]
		mu.Unlock()
		if derr := json.Unmarshal(raw, out); derr != nil {
			err = &protocol.CallError{Op: protocol.OpDecode, Err: derr}
		}
	}
	return callError(err, base, base+path)
}

// callError words a failed call to the master at base.
func callError(err error, base, url string) error {
	var se *protocol.StatusError
	var ce *protocol.CallError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &se) && se.Status == http.StatusUnauthorized:
		return fmt.Errorf("worker: master at %s answered 401: %w", base, errMasterUnauthorized)
	case errors.As(err, &se):
		return fmt.Errorf("worker: master at %s %w", base, se)
	case errors.As(err, &ce) && ce.Op == protocol.OpRequest:
		return fmt.Errorf("worker: request %s: %w", url, ce.Err)
	case errors.As(err, &ce) && ce.Op == protocol.OpSend:
		return fmt.Errorf("worker: master at %s unreachable: %w", base, ce.Err)
	case errors.As(err, &ce) && ce.Op == protocol.OpRead:
		return fmt.Errorf("worker: read answer of %s: %w", url, ce.Err)
	case errors.As(err, &ce):
		return fmt.Errorf("worker: decode answer of %s: %w", url, ce.Err)
	}
	return fmt.Errorf("worker: %s: %w", url, err)
}

var errMasterUnauthorized = errors.New("the master does not know this node or its secret")
