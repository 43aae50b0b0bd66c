package master

import (
	"context"
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
	if n.ClockSkewMS == nil {
		return 0, false
	}
	return time.Duration(*n.ClockSkewMS) * time.Millisecond, true
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

// noteClockSkew records a node's newly measured clock skew: written when it
// was unknown, when the verdict changes or when it moved by clockSkewStep;
// an event and a log line when the node goes beyond the limit or comes back
// within it. Under fence (nil: unconditionally).
func (m *Master) noteClockSkew(ctx context.Context, n *store.Node, skew time.Duration, fence *store.Fence) {
	ms := skew.Milliseconds()
	was, known := NodeClockSkew(n)
	if known && protocol.ClockSkewed(was) == protocol.ClockSkewed(skew) && (skew-was).Abs() < clockSkewStep {
		return
	}
	if err := store.SetClockSkew(ctx, m.st.DB, n.Name, &ms, fence); err != nil {
		m.log.Error("record clock skew", "node", n.Name, "err", err)
		return
	}
	m.clockSkewChanged(WithActor(ctx, ActorHealthChecker), n.Name, n.ClockSkewMS, skew)
}

// clockSkewChanged logs and records the event of a node whose clock went
// beyond the limit or came back within it; before is the skew stored until
// now (nil: never measured, taken as within). The event's actor is ctx's.
func (m *Master) clockSkewChanged(ctx context.Context, name string, before *int64, skew time.Duration) {
	wasSkewed := before != nil && protocol.ClockSkewed(time.Duration(*before)*time.Millisecond)
	switch isSkewed := protocol.ClockSkewed(skew); {
	case isSkewed && !wasSkewed:
		reason := ClockSkewReason(skew)
		m.log.Warn("node clock skew", "node", name, "skew", skew)
		m.events.record(ctx, "node.clock_skew", store.TargetNode, name, nil,
			reason+" (more than "+protocol.ClockSkewLimit.String()+")")
	case !isSkewed && wasSkewed:
		m.log.Info("node clock back within bounds", "node", name, "skew", skew)
		m.events.record(ctx, "node.clock_ok", store.TargetNode, name, nil,
			fmt.Sprintf("its clock is within %s of the master's again (%s s)", protocol.ClockSkewLimit, ClockSkewSeconds(skew)))
	}
}
