package master

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/uptrace/bun"

	"github.com/schedulemaster-go/schedulemaster/store"
)

// leaseState is the cluster lease as this master holds it: the epoch it won
// and until when (local monotonic clock) it may act as leader.
type leaseState struct {
	epoch int64
	until time.Time
}

// leaseKeeper is the duty that keeps this master's node row alive and the
// cluster lease held or contested: every health interval it heartbeats and
// renews or takes the lease, apart from the sweeps so that a long sweep never
// lets the lease lapse. Only the leader sweeps health, runs retention and
// re-pushes tasks after its election.
type leaseKeeper struct {
	db       bun.IDB
	identity string
	host     string // advertised host:port of the master's node row
	bootID   string
	log      *slog.Logger
	events   *eventLog
	// interval is the health interval in force: the lease lasts three of them.
	interval func() time.Duration
	// elected runs when this master has just taken the lease (re-push tasks).
	elected func()

	state atomic.Pointer[leaseState]
	// mu serialises the attempts to renew or take the lease; tried says
	// whether this process has made one.
	mu    sync.Mutex
	tried bool
	// fenced is set while the heartbeat finds the node row held by another
	// master process: this one must not be sent traffic (see ready).
	fenced atomic.Bool
	// clash says why this master has no node row: a worker registered its
	// name first (nil when there is none).
	clash atomic.Pointer[string]

	cancel context.CancelFunc
	done   chan struct{}
}

// leaseConfig is what a leaseKeeper needs.
type leaseConfig struct {
	DB       bun.IDB
	Identity string
	Host     string
	BootID   string
	Log      *slog.Logger
	Events   *eventLog
	Interval func() time.Duration
	Elected  func()
}

// newLeaseKeeper builds the lease duty; Start runs it.
func newLeaseKeeper(c leaseConfig) *leaseKeeper {
	return &leaseKeeper{db: c.DB, identity: c.Identity, host: c.Host, bootID: c.BootID, log: c.Log, events: c.Events,
		interval: c.Interval, elected: c.Elected}
}

// ttl is how long a renewal holds the lease: three health intervals, so one
// or two missed ticks do not cost the leadership.
func (l *leaseKeeper) ttl() time.Duration { return 3 * l.interval() }

// epoch is the epoch under which this master leads, 0 when it does not.
func (l *leaseKeeper) epoch() int64 {
	s := l.state.Load()
	if s == nil || !time.Now().Before(s.until) {
		return 0
	}
	return s.epoch
}

// fence is the condition of this master's writes as leader, nil when it does
// not lead.
func (l *leaseKeeper) fence() *store.Fence {
	epoch := l.epoch()
	if epoch == 0 {
		return nil
	}
	return &store.Fence{Lease: store.ClusterLease, Holder: l.identity, Epoch: epoch}
}

// holder names the master holding the cluster lease, "" when it has expired
// (a failover is under way). Every master answers the same, from the database.
func (l *leaseKeeper) holder(ctx context.Context) (string, error) {
	ls, err := store.GetLease(ctx, l.db, store.ClusterLease)
	if err != nil {
		return "", err
	}
	if !ls.ExpiresAt.After(time.Now()) {
		return "", nil
	}
	return ls.Holder, nil
}

// Start begins the duty: the node row is checked and written, the lease
// contested once at once (elected reports whether this master won it, so
// the first sweep runs as leader, as a lone master's did), then the loop
// runs until Stop. checkFree refuses an identity a live master heartbeats.
func (l *leaseKeeper) Start(ctx context.Context, checkFree bool) (elected bool, err error) {
	if checkFree {
		if err := l.checkIdentityFree(ctx); err != nil {
			return false, err
		}
	}
	if err := l.registerSelf(ctx); err != nil {
		return false, err
	}
	elected = l.maintain(ctx)
	lctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	l.cancel, l.done = cancel, make(chan struct{})
	go l.loop(lctx)
	return elected, nil
}

// Stop ends the loop, then gives the lease up so that another master takes
// over at its next tick instead of after the expiry.
func (l *leaseKeeper) Stop(ctx context.Context) {
	if l.cancel != nil {
		l.cancel()
		<-l.done
	}
	l.release(ctx)
}

// loop heartbeats and keeps the lease every health interval. A master
// elected here calls elected, as the old leader may have died between a
// change and its push.
func (l *leaseKeeper) loop(ctx context.Context) {
	defer close(l.done)
	for {
		t := time.NewTimer(l.interval())
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		l.heartbeat(ctx)
		if l.maintain(ctx) && l.elected != nil {
			l.elected()
		}
	}
}

// maintain renews the cluster lease when this master holds it, or takes it
// over when it has expired. It reports whether this master has just been
// elected.
func (l *leaseKeeper) maintain(ctx context.Context) (elected bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	now, ttl := time.Now(), l.ttl()
	if cur := l.state.Load(); cur != nil {
		err := store.RenewLease(ctx, l.db, store.ClusterLease, l.identity, cur.epoch, now, ttl)
		if err == nil {
			l.state.Store(&leaseState{epoch: cur.epoch, until: now.Add(ttl)})
			return false
		}
		if !errors.Is(err, store.ErrConflict) {
			// Keep the state: it lapses by itself at until if the database stays away.
			l.log.Error("renew the cluster lease", "err", err)
			return false
		}
		l.state.Store(nil)
		l.log.Warn("lost the cluster lease: another master took it over", "epoch", cur.epoch)
	}
	ls, err := store.GetLease(ctx, l.db, store.ClusterLease)
	if err != nil {
		l.log.Error("read the cluster lease", "err", err)
		return false
	}
	// The first attempt of a process may take the lease from its own name: the
	// holder is a previous process of this master (killed, so it did not
	// release it), and waiting for the expiry would only delay health sweeps.
	ownStale := !l.tried
	l.tried = true
	if ls.ExpiresAt.After(now) && !(ownStale && ls.Holder == l.identity) {
		return false
	}
	epoch, err := store.TakeLease(ctx, l.db, store.ClusterLease, l.identity, ls.Epoch, ownStale, now, ttl)
	if err != nil {
		if !errors.Is(err, store.ErrConflict) {
			l.log.Error("take the cluster lease", "err", err)
		}
		return false // another master won it
	}
	l.state.Store(&leaseState{epoch: epoch, until: now.Add(ttl)})
	l.log.Info("leader: took the cluster lease", "epoch", epoch, "previous", ls.Holder)
	return true
}

// heartbeat records that this master is alive on its own node row.
func (l *leaseKeeper) heartbeat(ctx context.Context) {
	if l.clash.Load() != nil {
		if err := l.registerSelf(ctx); err != nil {
			l.log.Error("master heartbeat: register self", "err", err)
		}
		if l.clash.Load() != nil {
			return // still taken: said once, checked every interval
		}
	}
	err := store.HeartbeatMaster(ctx, l.db, l.identity, l.bootID, time.Now())
	l.fenced.Store(errors.Is(err, store.ErrConflict))
	if errors.Is(err, store.ErrConflict) {
		l.log.Error("master heartbeat: the node row of this identity belongs to another master process", "identity", l.identity)
	} else if err != nil {
		l.log.Error("master heartbeat", "err", err)
	}
}

// release gives the lease up, if this master holds it.
func (l *leaseKeeper) release(ctx context.Context) {
	l.mu.Lock()
	defer l.mu.Unlock()
	cur := l.state.Swap(nil)
	if cur == nil {
		return
	}
	if err := store.ReleaseLease(ctx, l.db, store.ClusterLease, l.identity, cur.epoch); err != nil {
		l.log.Error("release the cluster lease", "err", err)
	}
}

// checkIdentityFree refuses to start under an identity whose node row a live
// master process heartbeats: two masters sharing one row would hide each
// other's death.
func (l *leaseKeeper) checkIdentityFree(ctx context.Context) error {
	n, err := store.GetNode(ctx, l.db, l.identity)
	if errors.Is(err, store.ErrNotFound) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("master: check identity: %w", err)
	}
	stale := l.ttl()
	if n.Type != store.TypeMaster || n.Status == store.StatusOffline || n.BootID == l.bootID ||
		n.LastSeen.IsZero() || time.Since(n.LastSeen) >= stale {
		return nil
	}
	return fmt.Errorf("%w: master %q heartbeat %s ago from %s (boot id %s); give this master another --identity, or wait %s after that one stops",
		ErrIdentityInUse, l.identity, time.Since(n.LastSeen).Round(time.Millisecond), n.Host, n.BootID, stale)
}

// markStaleMasters takes offline, as leader, every other master whose
// heartbeat is older than the lease: it died without marking itself offline.
func (l *leaseKeeper) markStaleMasters(ctx context.Context, nodes []store.Node, fence *store.Fence) {
	cutoff := time.Now().Add(-l.ttl())
	for _, n := range nodes {
		if n.Type != store.TypeMaster || n.Name == l.identity || n.Status == store.StatusOffline || !n.LastSeen.Before(cutoff) {
			continue
		}
		reason := "master heartbeat stale since " + n.LastSeen.UTC().Format(time.RFC3339)
		err := store.MarkMasterStale(ctx, l.db, n.Name, cutoff, reason, fence)
		if errors.Is(err, store.ErrConflict) {
			continue // it heartbeat meanwhile, or this master lost the lease
		}
		if err != nil {
			l.log.Error("health sweep: mark stale master offline", "node", n.Name, "err", err)
			continue
		}
		l.log.Warn("master offline: heartbeat stale", "node", n.Name, "last_seen", n.LastSeen)
		l.events.record(WithActor(ctx, ActorHealthChecker), "node.offline", store.TargetNode, n.Name, nil, reason)
	}
}

// readyTimeout bounds the database ping of a readiness probe.
const readyTimeout = 2 * time.Second

// ready says whether this master should be sent traffic: nil when its
// database answers within readyTimeout and no other master process holds its
// identity; else an error whose sentence says which.
func (l *leaseKeeper) ready(ctx context.Context, ping func(context.Context) error) error {
	if msg := l.clash.Load(); msg != nil {
		return Errorf(KindState, "%s", *msg)
	}
	if l.fenced.Load() {
		return Errorf(KindState, "master %s is fenced: another master process heartbeats its identity", l.identity)
	}
	ctx, cancel := context.WithTimeout(ctx, readyTimeout)
	defer cancel()
	if err := ping(ctx); err != nil {
		if errors.Is(err, context.DeadlineExceeded) || ctx.Err() != nil {
			// A hang, not a refusal: the connection is open, no answer comes.
			return wrapf(KindState, err, "the database is unreachable (no answer within %s); retrying", readyTimeout)
		}
		return wrapf(KindState, err, "the database is unreachable; retrying")
	}
	return nil
}

// registerSelf writes this master's node row. When a worker registered the
// name first (case-insensitively), the master still starts: it says why the
// name clashes, in its log, the event log and /ready, and takes its row as
// soon as an admin deletes that worker node (heartbeat retries).
func (l *leaseKeeper) registerSelf(ctx context.Context) error {
	self := &store.Node{
		Name: l.identity, Type: store.TypeMaster, Protocol: "http", Host: l.host,
		BootID: l.bootID, Priority: 0, MaxConcurrency: 1, MachineName: hostname(),
	}
	err := store.UpsertRegisteredNode(ctx, l.db, self)
	if err == nil {
		if l.clash.Swap(nil) != nil {
			l.log.Info("master identity free again: node row taken", "identity", l.identity)
		}
		return nil
	}
	if !errors.Is(err, store.ErrConflict) && !errors.Is(err, store.ErrDuplicate) {
		return fmt.Errorf("master: register self: %w", err)
	}
	other, gerr := store.GetNodeFold(ctx, l.db, l.identity)
	if gerr != nil || other.Type == store.TypeMaster {
		return fmt.Errorf("master: register self: %w", err)
	}
	msg := fmt.Sprintf("the name %s is taken by worker node %s (at %s://%s): workers and masters never share a name; delete that node or start this master with another --identity",
		l.identity, other.Name, other.Protocol, other.Host)
	if old := l.clash.Swap(&msg); old == nil {
		l.log.Error("master identity clash: this master serves, but has no node row", "identity", l.identity, "problem", msg)
		l.events.record(ctx, "master.identity_clash", store.TargetNode, other.Name, Errorf(KindDuplicate, "%s", msg), "")
	}
	return nil
}
