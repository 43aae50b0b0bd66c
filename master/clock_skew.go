package master

import (
	"context"
	"database/sql"
	"fmt"
	"math"
	"time"

	"github.com/schedulemaster-go/schedulemaster/protocol"
	"github.com/schedulemaster-go/schedulemaster/store"
)

// clockSkewStep is how much a node's measured skew must move, within the
// same verdict (skewed or not), before it is written again: probes of a
// steady clock jitter by a few milliseconds and would write at every sweep.
const clockSkewStep = 100 * time.Millisecond

// NodeClockSkew is a node's last measured clock skew (positive: its clock is
// ahead of the master's), with known false when it was never measured (a
// master, a worker of an earlier version, a manual worker not yet probed).
func NodeClockSkew(n *Node) (skew time.Duration, known bool) {
	if !n.ClockSkewMS.Valid {
		return 0, false
	}
	return time.Duration(n.ClockSkewMS.Int64) * time.Millisecond, true
}

// NodeClockSkewed reports whether a node's clock is off by more than
// protocol.ClockSkewLimit: the console and the API flag it.
func NodeClockSkewed(n *Node) bool {
	skew, known := NodeClockSkew(n)
	return known && protocol.ClockSkewed(skew)
}

// ClockSkewReason says how far a skewed clock is off, for example "its
// clock is 3.2 s ahead of the master's"; empty within the limit.
func ClockSkewReason(skew time.Duration) string {
	if !protocol.ClockSkewed(skew) {
		return ""
	}
	way := "ahead of"
	if skew < 0 {
		way = "behind"
	}
	return fmt.Sprintf("its clock is %s s %s the master's", ClockSkewSeconds(skew), way)
}

// ClockSkewSeconds is the size of a skew in seconds with one decimal
// ("3.2"), for the reasons that name it.
func ClockSkewSeconds(skew time.Duration) string {
	return fmt.Sprintf("%.1f", math.Abs(skew.Seconds()))
}

// noteClockSkews records the clock skews a sweep measured, in one write
// under fence: a node's is written when it was unknown, when the verdict
// changes or when it moved by clockSkewStep; an event and a log line when a
// node goes beyond the limit or comes back within it.
func (nd *Nodes) noteClockSkews(ctx context.Context, skews map[*store.Node]time.Duration, fence *store.Fence) {
	write := map[string]int64{}
	for n, skew := range skews {
		was, known := NodeClockSkew(n)
		if known && protocol.ClockSkewed(was) == protocol.ClockSkewed(skew) && (skew-was).Abs() < clockSkewStep {
			continue
		}
		write[n.Name] = skew.Milliseconds()
	}
	if len(write) == 0 {
		return
	}
	if err := store.SetClockSkews(ctx, nd.m.st.DB, write, fence); err != nil {
		nd.m.log.Error("record clock skews", "nodes", len(write), "err", err)
		return
	}
	for n, skew := range skews {
		if _, ok := write[n.Name]; ok {
			nd.clockSkewChanged(WithActor(ctx, ActorHealthChecker), n.Name, n.ClockSkewMS, skew)
		}
	}
}

// clockSkewChanged logs and records the event of a node whose clock went
// beyond the limit or came back within it; before is the skew stored until
// now (not valid: never measured, taken as within). The event's actor is ctx's.
func (nd *Nodes) clockSkewChanged(ctx context.Context, name string, before sql.NullInt64, skew time.Duration) {
	wasSkewed := before.Valid && protocol.ClockSkewed(time.Duration(before.Int64)*time.Millisecond)
	switch isSkewed := protocol.ClockSkewed(skew); {
	case isSkewed && !wasSkewed:
		reason := ClockSkewReason(skew)
		nd.m.log.Warn("node clock skew", "node", name, "skew", skew)
		nd.m.events.record(ctx, "node.clock_skew", store.TargetNode, name, nil,
			reason+" (more than "+protocol.ClockSkewLimit.String()+")")
	case !isSkewed && wasSkewed:
		nd.m.log.Info("node clock back within bounds", "node", name, "skew", skew)
		nd.m.events.record(ctx, "node.clock_ok", store.TargetNode, name, nil,
			fmt.Sprintf("its clock is within %s of the master's again (%s s)", protocol.ClockSkewLimit, ClockSkewSeconds(skew)))
	}
}
