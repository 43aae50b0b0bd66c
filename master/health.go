package master

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/schedulemaster-go/schedulemaster/protocol"
	"github.com/schedulemaster-go/schedulemaster/store"
	"github.com/uptrace/bun"
)

// SweepResult counts what one health sweep did.
type SweepResult struct {
	Probed, Healthy, Failed, WentOffline, Recovered int
	Took                                            time.Duration
}

// probeTargets picks the nodes a sweep probes: every worker that is not offline,
// and, on slow sweeps, offline workers an admin or registration wanted up.
func probeTargets(nodes []store.Node, includeOffline bool) []store.Node {
	out := make([]store.Node, 0, len(nodes))
	for _, n := range nodes {
		if n.Type != store.TypeWorker {
			continue
		}
		if n.Status != store.StatusOffline || (includeOffline && n.DesiredStatus != store.StatusOffline) {
			out = append(out, n)
		}
	}
	return out
}

// healthProber is the leader's health sweep duty: it probes the workers with
// a bounded pool, counts failures toward taking a node offline, brings back
// nodes that answer again (recover), takes masters with a stale heartbeat
// offline and keeps the health history. Its periodic pass is run by the
// master's sweeper.
type healthProber struct {
	db      bun.IDB
	log     *slog.Logger
	client  *Client
	lease   *leaseKeeper
	events  *eventLog
	metrics *Metrics
	// health is the health configuration in force.
	health func() HealthConfig
	// recover brings back a node that answers again (Master.recover).
	recover func(ctx context.Context, name string, h protocol.HealthResponse, fence *store.Fence) bool
	// noteLabels records the labels a worker declared in its answer
	// (Master.noteDeclaredLabels).
	noteLabels func(ctx context.Context, n *store.Node, labels protocol.Labels)
	// noteSkews records the workers' clock skews a sweep measured
	// (Master.noteClockSkews).
	noteSkews func(ctx context.Context, skews map[*store.Node]time.Duration, fence *store.Fence)

	sweeps  atomic.Int64  // sweeps made, pacing the prunes
	samples healthSampler // when each node's health was last recorded
}

// Sweep probes the nodes once (see healthProber.sweep): the leader's health
// job runs it at every interval; tests and tools may run it now.
func (m *Master) Sweep(ctx context.Context) SweepResult { return m.prober.sweep(ctx) }

// sweep probes the nodes once, concurrently with a bounded pool, records the
// outcomes and takes masters with a stale heartbeat offline. It is the
// leader's duty: a master that does not hold the cluster lease tries to take
// it and, failing that, sweeps nothing. Every write is fenced by the lease
// epoch, so a leader paused past its lease changes nothing when it resumes.
// The health job runs it in singleton mode so sweeps never overlap.
func (p *healthProber) sweep(ctx context.Context) SweepResult {
	start := time.Now()
	hc := p.health()
	fence := p.lease.fence()
	if fence == nil {
		p.lease.maintain(ctx)
		if fence = p.lease.fence(); fence == nil {
			return SweepResult{}
		}
	}
	nodes, err := store.ListNodes(ctx, p.db)
	if err != nil {
		p.log.Error("health sweep: list nodes", "err", err)
		return SweepResult{}
	}
	// The master is alive if it sweeps.
	p.lease.heartbeat(ctx)
	p.lease.markStaleMasters(ctx, nodes, fence)
	n := p.sweeps.Add(1)
	if n%100 == 1 {
		// Fire claims matter for minutes; keep a day for inspection.
		if err := store.DeleteOldClaims(ctx, p.db, start.Add(-24*time.Hour)); err != nil {
			p.log.Error("health sweep: delete old fire claims", "err", err)
		}
	}
	targets := probeTargets(nodes, n%int64(hc.OfflineEvery) == 1 || hc.OfflineEvery == 1)

	var (
		mu sync.Mutex
		// healthy nodes by the reason to record: "" or a degraded worker's.
		healthy = map[string][]string{}
		res     = SweepResult{Probed: len(targets)}
		wg      sync.WaitGroup
		// Hung workers hold a slot for a whole timeout: scale the pool with the
		// fleet so a sweep stays near one timeout long.
		sem = make(chan struct{}, max(hc.Concurrency, len(targets)/4))
		// Health history and probe metrics, written once at the end.
		samples = &probeSamples{p: p}
		// Labels of the workers that answered, recorded at the end.
		labels = map[*store.Node]protocol.Labels{}
		// Clock skews of the workers that sent their time, likewise.
		skews = map[*store.Node]time.Duration{}
	)
	for i := range targets {
		node := &targets[i]
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			probeStart := time.Now()
			h, err := p.client.Health(ctx, node, hc.Timeout)
			received := time.Now()
			// A manual worker started without --identity answers with no name
			// until it is connected; after a restart that is how it comes back.
			if err == nil && h.Node != node.Name && !(h.Node == "" && h.Status == protocol.StateWaiting) {
				err = Errorf(KindWorker, "%s answered as node %q", node.Host, h.Node)
			}
			if err == nil && h.BootID == "" {
				err = Errorf(KindWorker, "%s answered without a boot id", node.Host)
			}
			samples.add(node, time.Since(probeStart), err)
			if err == nil && h.Labels != nil {
				mu.Lock()
				labels[node] = h.Labels
				mu.Unlock()
			}
			if err == nil && h.WorkerTimeMS != 0 {
				// The worker read its clock between the request and the answer.
				skew := protocol.ClockSkew(time.UnixMilli(h.WorkerTimeMS), probeStart, received)
				mu.Lock()
				skews[node] = skew
				mu.Unlock()
			}
			switch {
			case err != nil && node.Status == store.StatusOffline:
				// Still down: nothing to count.
			case err != nil:
				off, ferr := store.RecordProbeFailure(ctx, p.db, node.Name, hc.MaxFailures, shortReason(err), fence)
				mu.Lock()
				res.Failed++
				if off {
					res.WentOffline++
				}
				mu.Unlock()
				if ferr != nil {
					p.log.Error("health sweep: record failure", "node", node.Name, "err", ferr)
				} else if off {
					p.log.Warn("node offline: health checks failed", "node", node.Name, "failures", hc.MaxFailures, "err", err)
					p.events.record(WithActor(ctx, ActorHealthChecker), "node.offline", store.TargetNode, node.Name, nil,
						fmt.Sprintf("offline after %d failed health checks: %s", hc.MaxFailures, shortReason(err)))
				}
			case node.Status != store.StatusOffline && h.BootID == node.BootID:
				reason := degradedReason(h)
				p.noteDegraded(node, reason)
				mu.Lock()
				healthy[reason] = append(healthy[reason], node.Name)
				res.Healthy++
				mu.Unlock()
			default:
				// Offline node answering again, or a restarted worker (new boot id).
				if p.recover(ctx, node.Name, h, fence) {
					mu.Lock()
					res.Recovered++
					mu.Unlock()
				}
			}
		}()
	}
	wg.Wait()
	samples.flush(ctx, n)
	for node, l := range labels {
		p.noteLabels(ctx, node, l)
	}
	if p.noteSkews != nil {
		p.noteSkews(ctx, skews, fence)
	}
	seen := time.Now()
	for reason, names := range healthy {
		if err := store.MarkSeenWithReason(ctx, p.db, names, seen, reason, fence); err != nil {
			p.log.Error("health sweep: mark seen", "err", err)
		}
	}
	res.Took = time.Since(start)
	return res
}

// degradedPrefix starts the reason of a node that answers but is degraded
// (its health answer's degraded field), for example "degraded: data
// directory full: runs.spool: ...".
const degradedPrefix = "degraded: "

// NodeDegraded reports whether a node's reason says that it answers but is
// degraded (its data dir is full, for example): the console shows a badge.
func NodeDegraded(reason string) bool { return strings.HasPrefix(reason, degradedPrefix) }

// degradedReason is the node reason a healthy answer asks for: empty, or
// the worker's degraded reason, bounded like every stored reason.
func degradedReason(h protocol.HealthResponse) string {
	if h.Degraded == "" {
		return ""
	}
	s := degradedPrefix + h.Degraded
	if len(s) > 400 {
		s = s[:400]
	}
	return s
}

// noteDegraded logs a node going degraded or recovering, once per change
// (the stored reason is the state before this sweep).
func (p *healthProber) noteDegraded(n *store.Node, reason string) {
	was := strings.HasPrefix(n.Reason, degradedPrefix)
	switch {
	case reason != "" && !was:
		p.log.Warn("node degraded", "node", n.Name, "reason", reason)
	case reason == "" && was:
		p.log.Info("node no longer degraded", "node", n.Name)
	}
}

// shortReason keeps the stored reason readable and bounded.
func shortReason(err error) string {
	s := Message(err)
	if len(s) > 400 {
		s = s[:400]
	}
	return s
}

// recover brings back a node that answers again: an offline node the admin or
// its registration wanted up, or a node whose boot id changed (it restarted and
// lost its in-memory schedule). Auto workers re-register by themselves after a
// restart; the master reconnects manual ones and re-pushes running tasks.
// The status changes are the leader's writes, under fence.
func (m *Master) recover(ctx context.Context, name string, h protocol.HealthResponse, fence *store.Fence) bool {
	defer m.locks.lock(name)()
	n, err := store.GetNode(ctx, m.st.DB, name)
	if err != nil {
		return false
	}
	restarted := h.BootID != n.BootID
	if !restarted && n.Status != store.StatusOffline {
		return false // someone else recovered it meanwhile
	}
	want := n.DesiredStatus
	if n.Mode == store.ModeAuto {
		if restarted {
			// Its secret died with the old process; it registers again on start.
			if n.Status != store.StatusOffline {
				err := store.TransitionNode(ctx, m.st.DB, name, store.Transition{
					From: []store.NodeStatus{n.Status}, To: store.StatusOffline, IfBootID: &n.BootID, Fence: fence,
					Reason: ptr("worker restarted; waiting for it to register again"),
				})
				if err != nil && !errors.Is(err, store.ErrConflict) {
					m.log.Error("recover: mark restarted worker", "node", name, "err", err)
				}
				if err == nil {
					m.events.record(WithActor(ctx, ActorHealthChecker), "node.offline", store.TargetNode, name, nil,
						"worker restarted; waiting for it to register again")
				}
			}
			return false
		}
		if err := m.nodes.pushState(ctx, n, want); err != nil {
			m.log.Warn("recover: worker answers but refused its state", "node", name, "err", err)
			return false
		}
	} else {
		resp, err := m.client.Connect(ctx, n, m.cfg.Cluster, m.cfg.ClusterKey)
		if err != nil {
			m.log.Warn("recover: reconnect failed", "node", name, "err", err)
			return false
		}
		n.Secret, n.BootID = resp.Secret, resp.BootID
		if err := m.nodes.pushState(ctx, n, want); err != nil {
			m.log.Warn("recover: worker reconnected but refused its state", "node", name, "err", err)
			return false
		}
	}
	err = store.TransitionNode(ctx, m.st.DB, name, store.Transition{
		From: []store.NodeStatus{n.Status}, To: want, Secret: &n.Secret, BootID: &n.BootID, Reason: ptr(""), Seen: time.Now(),
		Fence: fence,
	})
	if err != nil {
		m.log.Error("recover: update node", "node", name, "err", err)
		return false
	}
	if restarted {
		// A new process: the old one's runs in progress died with it.
		if _, err := store.LoseRunsOf(ctx, m.st.DB, name, "the worker restarted during this run"); err != nil {
			m.log.Error("recover: mark the runs of a restarted worker lost", "node", name, "err", err)
		}
	}
	m.log.Info("node recovered", "node", name, "status", want.String(), "restarted", restarted)
	m.events.record(WithActor(ctx, ActorHealthChecker), "node.recover", store.TargetNode, name, nil,
		fmt.Sprintf("answers again; back to %s (restarted: %t)", want, restarted))
	return true
}

// pushState makes the worker schedule (running) or not (idle).
func (nd *Nodes) pushState(ctx context.Context, n *store.Node, want store.NodeStatus) error {
	if want == store.StatusRunning {
		return nd.m.tasks.pushTasks(ctx, n)
	}
	return nd.m.client.Shutdown(ctx, n, nd.m.cfg.ShutdownWait)
}
