// Package master is the master engine: nodes (lifecycle, registration, the
// health checker), users, settings, the leader lease, tasks (input, schedule,
// dispatch to their executors), fire claims, run ingest, notifications, the
// event log, and the client of the worker API. Handlers are thin adapters over
// it. It never imports gin, templ or worker: it speaks to workers in package
// protocol's terms and keeps its state through package store.
package master

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/schedulemaster-go/schedulemaster/protocol"
	"github.com/schedulemaster-go/schedulemaster/store"
)

// HealthConfig tunes the health checker.
type HealthConfig struct {
	Interval    time.Duration // between sweeps (default 10s)
	Timeout     time.Duration // per probe (default 3s)
	MaxFailures int           // consecutive failures before offline (default 3)
	Concurrency int           // probes in flight at once (default 256)
	// OfflineEvery probes offline nodes only every Nth sweep (default 3): slower re-probing.
	OfflineEvery int
	// SampleEvery is how often a node's health history records a successful
	// probe (default 1m); failures and changes are always recorded.
	SampleEvery time.Duration
}

// Config is the master engine's configuration.
type Config struct {
	Identity string // the master's node name
	// Cluster names the cluster of masters (default DefaultCluster): it signs
	// the Connect handshake and answers registrations, so that any master of
	// the cluster may connect any of its workers.
	Cluster string
	// ClusterKey signs registrations and Connect; empty means the stored
	// one, made on the cluster's first start.
	ClusterKey string
	// AdminPassword is the password of user admin, made on the cluster's
	// first start (when there is no user); empty means a random one,
	// logged once.
	AdminPassword string
	// PasswordCost is the bcrypt cost of the password hashes this master
	// makes (0: bcrypt.DefaultCost). Tests lower it: under the race
	// detector one comparison at the default cost takes most of a second.
	PasswordCost int
	// AdvertiseHost is the host:port recorded for the master's own node.
	AdvertiseHost string
	Health        HealthConfig
	// CallTimeout bounds one call to a worker other than a probe (default 10s).
	CallTimeout time.Duration
	// ShutdownWait is how long a worker may take to finish running jobs on Disable.
	ShutdownWait time.Duration
	// RandN returns a uniform number in [0, n); it drives the weighted picks of
	// executors. Tests inject a seeded source (default math/rand/v2).
	RandN func(n int64) int64
	// ClaimGrace is how long a claimant ranked r waits, times r, for a
	// better-ranked executor to claim a fire before it claims it itself
	// (default 150ms): the delay a dead but not yet detected executor adds.
	ClaimGrace time.Duration
	// UnrunClaimMargin is how long past a claimed fire's timeout the leader
	// waits for the winner's report before recording the fire as a misfire
	// naming the node (default DefaultUnrunClaimMargin).
	UnrunClaimMargin time.Duration
	// MisfireWindow is how long the fires of a task with no running executor
	// are gathered into one skipped run while the outage lasts (default 10m):
	// a long outage leaves a record per window, not one per fire.
	MisfireWindow time.Duration
	// Pinned marks the health settings given by flag, env or config file: they
	// win over the stored settings for the life of the process.
	Pinned Pinned
	// Metrics, when set, receive the master's counters and collectors.
	Metrics *Metrics
	// Delayed tunes the firing of delayed tasks (zero: the defaults).
	Delayed DelayedConfig
	// Directory, when set, signs in users with no local password (LDAP):
	// see Accounts.Login for the order.
	Directory PasswordDirectory
	// OIDC, when set, is the group mapping of OIDC sign-in (SignInExternal
	// with MethodOIDC); nil: OIDC sign-in is refused.
	OIDC *GroupRoles
}

// Pinned names the health settings fixed by the process configuration.
type Pinned struct {
	HealthInterval, HealthTimeout, MaxFailures bool
}

func (c *Config) defaults() {
	def := DefaultSettings()
	if c.Health.Interval <= 0 {
		c.Health.Interval = def.HealthInterval
	}
	if c.Health.Timeout <= 0 {
		c.Health.Timeout = def.HealthTimeout
	}
	if c.Health.MaxFailures <= 0 {
		c.Health.MaxFailures = def.MaxFailures
	}
	if c.Health.Concurrency <= 0 {
		c.Health.Concurrency = 256
	}
	if c.Health.OfflineEvery <= 0 {
		c.Health.OfflineEvery = 3
	}
	if c.Health.SampleEvery <= 0 {
		c.Health.SampleEvery = time.Minute
	}
	if c.CallTimeout <= 0 {
		c.CallTimeout = 10 * time.Second
	}
	if c.ShutdownWait <= 0 {
		c.ShutdownWait = 30 * time.Second
	}
	if c.RandN == nil {
		c.RandN = rand.Int64N
	}
	if c.ClaimGrace <= 0 {
		c.ClaimGrace = 150 * time.Millisecond
	}
	if c.Cluster == "" {
		c.Cluster = DefaultCluster
	}
	if c.MisfireWindow <= 0 {
		c.MisfireWindow = 10 * time.Minute
	}
	if c.UnrunClaimMargin <= 0 {
		c.UnrunClaimMargin = DefaultUnrunClaimMargin
	}
}

// Master runs the master engine.
type Master struct {
	cfg    Config
	st     *store.Store
	log    *slog.Logger
	client *Client
	nonces *protocol.NonceCache
	bootID string
	locks  keyedMutex

	// lease keeps this master's node row alive and the cluster lease.
	lease *leaseKeeper
	// logins is the shared login throttle; accounts the users, sessions and tokens.
	logins   *loginThrottle
	accounts *Accounts
	// reads are the read-only queries pages and the API show.
	reads *Reads
	// claims decides fire claims; runs stores the run reports.
	claims   *claimer
	unrun    *unrunClaims
	ingester *runIngest
	// newNames are the times of this master's recent registrations of new
	// node names (admitNewName).
	newNames nameRate

	// settings holds the settings in force and the health configuration.
	settings *settingsKeeper

	notify *notifier
	// delayed is the delayed-task service: its input, firing, runs and
	// notifications.
	delayed *DelayedTasks

	// shards and duties: broadcast shards re-pushed and misfires accounted
	// when executors change (task_schedule.go, misfire.go).
	shards   shardState
	duties   duties
	misfires *misfireAccountant
	metrics  *Metrics      // nil: none
	prober   *healthProber // the health sweep
	// ingest merges concurrent batches of run reports into shared
	// transactions (see storeRuns).
	ingest ingestGroup
	// runLists bounds the run lists read at once (runs_query.go).
	runLists slots
	// readCache keeps the aggregate counts of a large estate (read_cache.go).
	readCache *readCache

	// sweeper runs sweepPass every health interval; retainer runs the
	// retention duty every hour.
	sweeper   *periodic
	retention *retention
	retainer  *periodic

	events *eventLog

	// The domains (domains.go), set first in New: the services below take
	// their methods.
	tasks      *Tasks
	nodes      *Nodes
	projects   *Projects
	pools      *Pools
	runsDomain *Runs
	workflows  *Workflows
	// connections is the connection domain (connections.go).
	connections *Connections

	// life is the background work: Stop cancels and waits for it before
	// the caller closes the database.
	life *lifecycle
}

// New builds a master engine over an open store.
func New(cfg Config, st *store.Store, log *slog.Logger) *Master {
	cfg.defaults()
	m := &Master{
		cfg:    cfg,
		st:     st,
		log:    log,
		client: NewClient(cfg.CallTimeout),
		nonces: protocol.NewNonceCache(100_000),
		bootID: protocol.NewNonce(),
	}
	m.tasks, m.nodes, m.projects, m.pools, m.runsDomain = &Tasks{m}, &Nodes{m}, &Projects{m}, &Pools{m}, &Runs{m}
	m.life = newLifecycle()
	m.connections = &Connections{m: m}
	m.client.attach = m.connections.attach
	m.workflows = &Workflows{m: m}
	m.workflows.runner = newWorkflowRunner(m)
	m.workflows.scheduler = newWorkflowScheduler(m)
	m.readCache = newReadCache(m.life)
	m.events = &eventLog{db: st.DB, master: cfg.Identity, log: log, life: m.life}
	m.logins = newLoginThrottle(st.DB, log, m.life, cfg.PasswordCost)
	m.reads = &Reads{db: st.DB, runLists: &m.runLists, getTask: m.tasks.Get, cache: m.readCache}
	m.settings = newSettingsKeeper(st.DB, log, m.events, cfg.Health, cfg.Pinned, func(d time.Duration) { m.sweeper.Reschedule(d) })
	m.accounts = &Accounts{db: st.DB, log: log, events: m.events, logins: m.logins, life: m.life, directory: cfg.Directory, oidcRoles: cfg.OIDC,
		settings: m.settings}
	m.lease = newLeaseKeeper(leaseConfig{DB: st.DB, Identity: cfg.Identity, Host: cfg.AdvertiseHost, BootID: m.bootID,
		Log: log, Events: m.events, Interval: func() time.Duration { return m.HealthConfig().Interval },
		Elected: func() { m.life.goBackground(m.tasks.repushTasks) }})
	m.sweeper = newPeriodic("health-check", cfg.Health.Interval, 0, m.sweepPass, log)
	m.retention = &retention{db: st.DB, log: log, leads: m.IsLeader, days: func() int { return m.settings.inForce().RunRetentionDays }}
	m.retainer = newPeriodic("run-retention", time.Hour, time.Minute, m.retentionPass, log)
	m.notify = newNotifier(m)
	m.misfires = &misfireAccountant{db: st.DB, identity: cfg.Identity, window: cfg.MisfireWindow, events: m.events, log: log,
		locks: &m.locks, getTask: m.tasks.Get, runOnce: m.tasks.runOnce}
	m.delayed = &DelayedTasks{counts: m.readCache, db: st.DB, dialect: st.Dialect, log: log, cfg: &m.cfg, events: m.events, lease: m.lease,
		settings: m.settings, life: m.life, notify: m.notify, runLists: &m.runLists}
	m.metrics = cfg.Metrics
	m.ingester = &runIngest{db: st.DB, dialect: st.Dialect, log: log, life: m.life, events: m.events, metrics: m.metrics,
		notify: m.notify, delayed: m.delayed, runLists: &m.runLists, group: &m.ingest, getTask: m.tasks.Get, runTask: m.tasks.Run,
		stepsReported: m.workflows.runner.stepsReported}
	m.claims = &claimer{db: st.DB, log: log, life: m.life, metrics: m.metrics, grace: cfg.ClaimGrace}
	m.unrun = &unrunClaims{db: st.DB, log: log, events: m.events, margin: cfg.UnrunClaimMargin}
	m.prober = &healthProber{db: st.DB, log: log, client: m.client, lease: m.lease, events: m.events, metrics: m.metrics,
		health: m.HealthConfig, recover: m.recover, noteLabels: m.nodes.noteDeclaredLabels,
		noteSkews: m.nodes.noteClockSkews}
	m.metrics.attach(m)
	return m
}

// Identity is the master's node name.
func (m *Master) Identity() string { return m.cfg.Identity }

// DefaultCluster is the cluster name when none is configured: the default
// master identity of single-master setups, so that their workers' --workerof
// keeps working.
const DefaultCluster = "master"

// Cluster is the name of this master's cluster, the name workers know it by.
func (m *Master) Cluster() string { return m.cfg.Cluster }

// BootID identifies this master process.
func (m *Master) BootID() string { return m.bootID }

// ClusterKey is the key workers use to register and the master to connect.
func (m *Master) ClusterKey() string { return m.cfg.ClusterKey }

// HealthConfig returns the health checker settings in force.
func (m *Master) HealthConfig() HealthConfig { return *m.settings.health.Load() }

// Start registers the master as a node, tries to become the leader, and
// starts the heartbeat and the health checker. An identity whose node a live
// master heartbeats gives ErrIdentityInUse.
func (m *Master) Start(ctx context.Context) error {
	key, err := ensureClusterKey(ctx, m.st.DB, m.cfg.ClusterKey, m.log)
	if err != nil {
		return err
	}
	m.cfg.ClusterKey = key
	if created, err := ensureFirstAdmin(ctx, m.st.DB, m.cfg.AdminPassword, m.log); err != nil {
		return fmt.Errorf("master: first admin: %w", err)
	} else if created {
		m.events.record(ctx, "user.create", store.TargetUser, FirstAdmin, nil, "role admin, first start")
	}
	if err := m.settings.load(ctx); err != nil {
		return err
	}
	// SQLite has one master per file (the binary locks it), so a fresh row
	// there is a killed predecessor: it must not delay a restart.
	elected, err := m.lease.Start(ctx, m.st.Dialect != store.SQLite)
	if err != nil {
		return err
	}
	// Elected now, the first sweep runs as leader at once, as a lone master did.
	hc := m.HealthConfig()
	if err := m.sweeper.Start(); err != nil {
		m.lease.Stop(ctx)
		return err
	}
	if err := m.retainer.Start(); err != nil {
		m.sweeper.Stop()
		m.lease.Stop(ctx)
		return err
	}
	if err := m.workflows.runner.reconciler.Start(); err != nil {
		m.retainer.Stop()
		m.sweeper.Stop()
		m.lease.Stop(ctx)
		return err
	}
	if err := m.workflows.scheduler.Start(); err != nil {
		m.workflows.runner.reconciler.Stop()
		m.retainer.Stop()
		m.sweeper.Stop()
		m.lease.Stop(ctx)
		return err
	}
	m.life.goBackground(m.delayed.delayedLoop) // acts while this master leads
	if elected {
		m.life.goBackground(m.tasks.repushTasks)
	}
	m.log.Info("health checker started", "interval", hc.Interval, "timeout", hc.Timeout, "max_failures", hc.MaxFailures,
		"leader", m.IsLeader())
	return nil
}

// sweepPass is one pass of the periodic duties: settings on every master,
// then, on the leader only, the health sweep and the duties that follow the
// fleet's state.
func (m *Master) sweepPass() {
	done, ok := m.life.track()
	if !ok {
		return
	}
	defer done()
	m.PollSettings(m.life.ctx) // every master, leader or not
	if !m.IsLeader() {
		m.unrun.reset() // read again from the start should it lead again
		return          // the leader sweeps for the cluster
	}
	m.Sweep(m.life.ctx)
	m.nodes.prunePendingNodes(WithActor(m.life.ctx, ActorHealthChecker))
	m.nodes.pruneOfflineWorkers(WithActor(m.life.ctx, ActorHealthChecker))
	m.pools.reconcilePools(m.life.ctx)
	// Then the duties that follow the fleet's state: broadcast shards and
	// the fires of tasks with no running executor.
	m.tasks.reshard(m.life.ctx)
	m.tasks.AccountMisfires(m.life.ctx)
	m.RecordUnrunClaims(m.life.ctx)
}

// RecordUnrunClaims records as misfires, naming the node, the fires whose
// claim's winner reported no run within the task's timeout plus
// Config.UnrunClaimMargin (see unrunClaims); it returns how many. The
// leader runs it after every health sweep.
func (m *Master) RecordUnrunClaims(ctx context.Context) int {
	n, err := m.unrun.pass(ctx, time.Now())
	if err != nil {
		m.log.Warn("unrun claims not checked", "err", err)
	}
	return n
}

// retentionPass is one pass of the retention duty, counted as background work.
func (m *Master) retentionPass() {
	done, ok := m.life.track()
	if !ok {
		return
	}
	defer done()
	m.retention.pass(m.life.ctx)
}

// Stop cancels the background work (health sweeps, retention, re-push, child
// runs, notifications, claim decisions), waits until all of it has ended,
// releases the cluster lease if it holds it and marks the master's own node
// offline. After Stop returns the master touches
// the database no more, so the caller may close it.
func (m *Master) Stop(ctx context.Context) {
	again := m.life.stop(func() {
		m.sweeper.Stop()
		m.retainer.Stop()
		m.workflows.runner.reconciler.Stop()
		m.workflows.scheduler.Stop()
	})
	if again {
		return
	}
	if dropped := m.notify.dropped.Load(); dropped > 0 {
		m.log.Warn("failure notifications dropped because the queue was full", "dropped", dropped)
	}
	m.lease.Stop(ctx)
	reason := "master stopped"
	if err := store.TransitionNode(ctx, m.st.DB, m.cfg.Identity, store.Transition{
		From: []store.NodeStatus{store.StatusIdle, store.StatusRunning}, To: store.StatusOffline, Reason: &reason,
	}); err != nil && !errors.Is(err, store.ErrConflict) && !errors.Is(err, store.ErrNotFound) {
		m.log.Error("mark master offline", "err", err)
	}
}

// keyedMutex serialises actions on one node inside this process, so a worker
// call and the database update that follows it are never interleaved with
// another action on the same node. Conditional updates guard across processes.
type keyedMutex struct {
	mu sync.Mutex
	m  map[string]*keyedEntry
}

type keyedEntry struct {
	mu   sync.Mutex
	refs int
}

func (k *keyedMutex) lock(key string) func() {
	k.mu.Lock()
	if k.m == nil {
		k.m = map[string]*keyedEntry{}
	}
	e := k.m[key]
	if e == nil {
		e = &keyedEntry{}
		k.m[key] = e
	}
	e.refs++
	k.mu.Unlock()
	e.mu.Lock()
	return func() {
		e.mu.Unlock()
		k.mu.Lock()
		e.refs--
		if e.refs == 0 {
			delete(k.m, key)
		}
		k.mu.Unlock()
	}
}

// IsLeader reports whether this master holds the cluster lease now: only the
// leader sweeps health, runs retention and re-pushes tasks after its election.
func (m *Master) IsLeader() bool { return m.lease.epoch() > 0 }

// LeaderEpoch is the epoch under which this master leads, 0 when it does not.
func (m *Master) LeaderEpoch() int64 { return m.lease.epoch() }

// Leader names the master holding the cluster lease, "" when it has expired
// (a failover is under way). Every master answers the same, from the database.
func (m *Master) Leader(ctx context.Context) (string, error) { return m.lease.holder(ctx) }

// Ready says whether this master should be sent traffic: nil when its
// database answers within a short time, has every migration of this build
// and no other master process holds its identity; else an error whose
// sentence says which. Migrations a newer build applied do not count
// against it: in a rolling upgrade the old masters serve on until replaced.
func (m *Master) Ready(ctx context.Context) error {
	if err := m.lease.ready(ctx, m.st.DB.PingContext); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, readyTimeout)
	defer cancel()
	st, err := m.st.MigrationStatus(ctx)
	if err != nil {
		return wrapf(KindState, err, "the database's migrations cannot be read; retrying")
	}
	if p := st.Pending(); len(p) > 0 {
		return Errorf(KindState, "the database lacks %d migration(s) of this build (first: %s): run \"schedulemaster migrate\" or restart this master", len(p), p[0])
	}
	return nil
}
