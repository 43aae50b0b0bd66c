package master

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/schedulemaster-go/schedulemaster/store"
)

// leaseState is the cluster lease as this master holds it: the epoch it won
// and until when (local monotonic clock) it may act as leader.
type leaseState struct {
	epoch int64
	until time.Time
}

// leaseTTL is how long a renewal holds the lease: three health intervals,
// so one or two missed ticks do not cost the leadership.
func (m *Master) leaseTTL() time.Duration { return 3 * m.HealthConfig().Interval }

// IsLeader reports whether this master holds the cluster lease now: only the
// leader sweeps health, runs retention and re-pushes tasks after its election.
func (m *Master) IsLeader() bool { return m.LeaderEpoch() > 0 }

// LeaderEpoch is the epoch under which this master leads, 0 when it does not.
func (m *Master) LeaderEpoch() int64 {
	s := m.lease.Load()
	if s == nil || !time.Now().Before(s.until) {
		return 0
	}
	return s.epoch
}

// fence is the condition of this master's writes as leader, nil when it does
// not lead.
func (m *Master) fence() *store.Fence {
	epoch := m.LeaderEpoch()
	if epoch == 0 {
		return nil
	}
	return &store.Fence{Lease: store.ClusterLease, Holder: m.cfg.Identity, Epoch: epoch}
}

// Leader names the master holding the cluster lease, "" when it has expired
// (a failover is under way). Every master answers the same, from the database.
func (m *Master) Leader(ctx context.Context) (string, error) {
	l, err := store.GetLease(ctx, m.st.DB, store.ClusterLease)
	if err != nil {
		return "", err
	}
	if !l.ExpiresAt.After(time.Now()) {
		return "", nil
	}
	return l.Holder, nil
}

// maintainLease renews the cluster lease when this master holds it, or takes
// it over when it has expired. It reports whether this master has just been
// elected, so the caller does what a new leader does first (re-push tasks).
func (m *Master) maintainLease(ctx context.Context) (elected bool) {
	m.leaseMu.Lock()
	defer m.leaseMu.Unlock()
	now, ttl := time.Now(), m.leaseTTL()
	if cur := m.lease.Load(); cur != nil {
		err := store.RenewLease(ctx, m.st.DB, store.ClusterLease, m.cfg.Identity, cur.epoch, now, ttl)
		if err == nil {
			m.lease.Store(&leaseState{epoch: cur.epoch, until: now.Add(ttl)})
			return false
		}
		if !errors.Is(err, store.ErrConflict) {
			// Keep the state: it lapses by itself at until if the database stays away.
			m.log.Error("renew the cluster lease", "err", err)
			return false
		}
		m.lease.Store(nil)
		m.log.Warn("lost the cluster lease: another master took it over", "epoch", cur.epoch)
	}
	l, err := store.GetLease(ctx, m.st.DB, store.ClusterLease)
	if err != nil {
		m.log.Error("read the cluster lease", "err", err)
		return false
	}
	// The first attempt of a process may take the lease from its own name: the
	// holder is a previous process of this master (killed, so it did not
	// release it), and waiting for the expiry would only delay health sweeps.
	ownStale := !m.leaseTried
	m.leaseTried = true
	if l.ExpiresAt.After(now) && !(ownStale && l.Holder == m.cfg.Identity) {
		return false
	}
	epoch, err := store.TakeLease(ctx, m.st.DB, store.ClusterLease, m.cfg.Identity, l.Epoch, ownStale, now, ttl)
	if err != nil {
		if !errors.Is(err, store.ErrConflict) {
			m.log.Error("take the cluster lease", "err", err)
		}
		return false // another master won it
	}
	m.lease.Store(&leaseState{epoch: epoch, until: now.Add(ttl)})
	m.log.Info("leader: took the cluster lease", "epoch", epoch, "previous", l.Holder)
	return true
}

// heartbeat records that this master is alive on its own node row.
func (m *Master) heartbeat(ctx context.Context) {
	if m.clash.Load() != nil {
		if err := m.registerSelf(ctx); err != nil {
			m.log.Error("master heartbeat: register self", "err", err)
		}
		if m.clash.Load() != nil {
			return // still taken: said once, checked every interval
		}
	}
	err := store.HeartbeatMaster(ctx, m.st.DB, m.cfg.Identity, m.bootID, time.Now())
	m.fenced.Store(errors.Is(err, store.ErrConflict))
	if errors.Is(err, store.ErrConflict) {
		m.log.Error("master heartbeat: the node row of this identity belongs to another master process", "identity", m.cfg.Identity)
	} else if err != nil {
		m.log.Error("master heartbeat", "err", err)
	}
}

// leaseLoop heartbeats and keeps the lease every health interval, apart from
// the sweeps so that a long sweep never lets the lease lapse. A master elected
// here re-pushes the running workers' tasks, as the old leader may have died
// between a change and its push.
func (m *Master) leaseLoop(ctx context.Context) {
	for {
		t := time.NewTimer(m.HealthConfig().Interval)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		m.heartbeat(ctx)
		if m.maintainLease(ctx) {
			m.goBackground(m.repushTasks)
		}
	}
}

// releaseLease gives the lease up on Stop so another master takes over at its
// next tick instead of after the expiry.
func (m *Master) releaseLease(ctx context.Context) {
	m.leaseMu.Lock()
	defer m.leaseMu.Unlock()
	cur := m.lease.Swap(nil)
	if cur == nil {
		return
	}
	if err := store.ReleaseLease(ctx, m.st.DB, store.ClusterLease, m.cfg.Identity, cur.epoch); err != nil {
		m.log.Error("release the cluster lease", "err", err)
	}
}

// checkIdentityFree refuses to start under an identity whose node row a live
// master process heartbeats: two masters sharing one row would hide each
// other's death.
func (m *Master) checkIdentityFree(ctx context.Context) error {
	n, err := store.GetNode(ctx, m.st.DB, m.cfg.Identity)
	if errors.Is(err, store.ErrNotFound) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("master: check identity: %w", err)
	}
	stale := m.leaseTTL()
	if n.Type != store.TypeMaster || n.Status == store.StatusOffline || n.BootID == m.bootID ||
		n.LastSeen.IsZero() || time.Since(n.LastSeen) >= stale {
		return nil
	}
	return fmt.Errorf("%w: master %q heartbeat %s ago from %s (boot id %s); give this master another --identity, or wait %s after that one stops",
		ErrIdentityInUse, m.cfg.Identity, time.Since(n.LastSeen).Round(time.Millisecond), n.Host, n.BootID, stale)
}

// markStaleMasters takes offline, as leader, every other master whose
// heartbeat is older than the lease: it died without marking itself offline.
func (m *Master) markStaleMasters(ctx context.Context, nodes []store.Node, fence *store.Fence) {
	cutoff := time.Now().Add(-m.leaseTTL())
	for _, n := range nodes {
		if n.Type != store.TypeMaster || n.Name == m.cfg.Identity || n.Status == store.StatusOffline || !n.LastSeen.Before(cutoff) {
			continue
		}
		reason := "master heartbeat stale since " + n.LastSeen.UTC().Format(time.RFC3339)
		err := store.MarkMasterStale(ctx, m.st.DB, n.Name, cutoff, reason, fence)
		if errors.Is(err, store.ErrConflict) {
			continue // it heartbeat meanwhile, or this master lost the lease
		}
		if err != nil {
			m.log.Error("health sweep: mark stale master offline", "node", n.Name, "err", err)
			continue
		}
		m.log.Warn("master offline: heartbeat stale", "node", n.Name, "last_seen", n.LastSeen)
		m.event(WithActor(ctx, ActorHealthChecker), "node.offline", store.TargetNode, n.Name, nil, reason)
	}
}

// readyTimeout bounds the database ping of a readiness probe.
const readyTimeout = 2 * time.Second

// Ready says whether this master should be sent traffic: nil when its
// database answers within readyTimeout and no other master process holds its
// identity; else an error whose sentence says which.
func (m *Master) Ready(ctx context.Context) error {
	if msg := m.clash.Load(); msg != nil {
		return Errorf(KindState, "%s", *msg)
	}
	if m.fenced.Load() {
		return Errorf(KindState, "master %s is fenced: another master process heartbeats its identity", m.cfg.Identity)
	}
	ctx, cancel := context.WithTimeout(ctx, readyTimeout)
	defer cancel()
	if err := m.st.DB.PingContext(ctx); err != nil {
		return wrapf(KindState, err, "the database is unreachable; retrying")
	}
	return nil
}

// registerSelf writes this master's node row. When a worker registered the
// name first (case-insensitively), the master still starts: it says why the
// name clashes, in its log, the event log and /ready, and takes its row as
// soon as an admin deletes that worker node (heartbeat retries).
func (m *Master) registerSelf(ctx context.Context) error {
	self := &store.Node{
		Name: m.cfg.Identity, Type: store.TypeMaster, Protocol: "http", Host: m.cfg.AdvertiseHost,
		BootID: m.bootID, Priority: 0, MaxConcurrency: 1, MachineName: hostname(),
	}
	err := store.UpsertRegisteredNode(ctx, m.st.DB, self)
	if err == nil {
		if m.clash.Swap(nil) != nil {
			m.log.Info("master identity free again: node row taken", "identity", m.cfg.Identity)
		}
		return nil
	}
	if !errors.Is(err, store.ErrConflict) && !errors.Is(err, store.ErrDuplicate) {
		return fmt.Errorf("master: register self: %w", err)
	}
	other, gerr := store.GetNodeFold(ctx, m.st.DB, m.cfg.Identity)
	if gerr != nil || other.Type == store.TypeMaster {
		return fmt.Errorf("master: register self: %w", err)
	}
	msg := fmt.Sprintf("the name %s is taken by worker node %s (at %s://%s): workers and masters never share a name; delete that node or start this master with another --identity",
		m.cfg.Identity, other.Name, other.Protocol, other.Host)
	if old := m.clash.Swap(&msg); old == nil {
		m.log.Error("master identity clash: this master serves, but has no node row", "identity", m.cfg.Identity, "problem", msg)
		m.event(ctx, "master.identity_clash", store.TargetNode, other.Name, Errorf(KindDuplicate, "%s", msg), "")
	}
	return nil
}
