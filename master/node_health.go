package master

import (
	"context"
	"sync"
	"time"

	"github.com/schedulemaster-go/schedulemaster/store"
)

// NodeHealthRetention is how long a node's health history is kept.
const NodeHealthRetention = 24 * time.Hour

// healthPruneEvery: the leader prunes the health history every this many
// sweeps (about every 5 minutes at the default 10 s interval).
const healthPruneEvery = 30

// healthPruneBatch is how many old samples one delete removes.
const healthPruneBatch = 5000

// healthSampler remembers, on the leader, when each node's health was last
// recorded and how, so that a fleet of healthy nodes costs one row per node
// per SampleEvery while failures and recoveries are never missed. A new
// leader starts empty and records every node at its first sweep.
type healthSampler struct {
	mu   sync.Mutex
	last map[string]healthMark
}

type healthMark struct {
	at time.Time
	ok bool
}

// keep decides whether a probe of node is recorded: the node's first, one
// whose outcome differs from the last recorded, any failure of a node not yet
// offline (each counts toward taking it offline), or the first after every.
func (s *healthSampler) keep(node *store.Node, ok bool, now time.Time, every time.Duration) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.last == nil {
		s.last = map[string]healthMark{}
	}
	mark, seen := s.last[node.Name]
	if seen && mark.ok == ok && now.Sub(mark.at) < every && (ok || node.Status == store.StatusOffline) {
		return false
	}
	s.last[node.Name] = healthMark{at: now, ok: ok}
	return true
}

// forget drops the marks older than before: deleted nodes, or nodes no
// longer probed.
func (s *healthSampler) forget(before time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for name, mark := range s.last {
		if mark.at.Before(before) {
			delete(s.last, name)
		}
	}
}

// probeSamples gathers one sweep's health samples, written with one
// multi-row insert at its end.
type probeSamples struct {
	p    *healthProber
	mu   sync.Mutex
	rows []store.HealthSample
}

// add records the probe of node that took took and ended with err in the
// metrics, and in the health history when the sampler keeps it. Safe for
// concurrent use by the sweep's probes.
func (ps *probeSamples) add(node *store.Node, took time.Duration, err error) {
	ps.p.metrics.probe(took, err)
	now := time.Now()
	if !ps.p.samples.keep(node, err == nil, now, ps.p.health().SampleEvery) {
		return
	}
	row := store.HealthSample{Node: node.Name, At: now.UTC(), LatencyMS: took.Milliseconds(), OK: err == nil}
	if err != nil {
		row.Reason = shortReason(err)
		if len(row.Reason) > store.MaxHealthReason {
			row.Reason = row.Reason[:store.MaxHealthReason]
		}
	}
	ps.mu.Lock()
	ps.rows = append(ps.rows, row)
	ps.mu.Unlock()
}

// flush stores the sweep's samples and, every healthPruneEvery sweeps,
// deletes the history older than NodeHealthRetention.
func (ps *probeSamples) flush(ctx context.Context, sweep int64) {
	ps.mu.Lock()
	rows := ps.rows
	ps.rows = nil
	ps.mu.Unlock()
	if err := store.InsertHealthSamples(ctx, ps.p.db, rows); err != nil {
		ps.p.log.Error("health sweep: record health history", "samples", len(rows), "err", err)
	}
	if sweep%healthPruneEvery != 1 {
		return
	}
	now := time.Now()
	ps.p.samples.forget(now.Add(-2 * max(ps.p.health().SampleEvery, time.Hour)))
	total := 0
	for ctx.Err() == nil {
		n, err := store.DeleteHealthBefore(ctx, ps.p.db, now.Add(-NodeHealthRetention), healthPruneBatch)
		total += n
		if err != nil {
			ps.p.log.Error("health sweep: prune health history", "err", err)
			break
		}
		if n < healthPruneBatch {
			break
		}
	}
	if total > 0 {
		ps.p.log.Info("health history pruned", "samples", total)
	}
}

// Health returns a node's health history since since (at most the
// retention), oldest first, at most limit samples (the newest). A node
// that does not exist is not found.
func (nd *Nodes) Health(ctx context.Context, name string, since time.Time, limit int) ([]store.HealthSample, error) {
	if _, err := nd.Get(ctx, name); err != nil {
		return nil, err
	}
	return store.NodeHealth(ctx, nd.m.st.DB, name, since, limit)
}
