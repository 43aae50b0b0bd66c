package master

import (
	"context"
	"time"

	"github.com/schedulemaster-go/schedulemaster/store"
)

// Actors of the transitions the master makes by itself.
const (
	ActorHealthChecker = "health-checker"
)

// workerActor names a worker acting on its own node (registration, graceful stop).
func workerActor(ctx context.Context, name string) context.Context {
	return WithActor(ctx, "worker "+name)
}

// ListEvents returns a page of the event log, newest first, and the total.
func (m *Master) ListEvents(ctx context.Context, f store.EventFilter) ([]store.Event, int, error) {
	return store.ListEvents(ctx, m.st.DB, f)
}

// event records an action in the event log without ever failing the action.
func (m *Master) event(ctx context.Context, action, targetType, target string, err error, detail string) {
	e := &store.Event{
		At: time.Now(), Actor: ActorFrom(ctx), Action: action, TargetType: targetType, Target: target,
		Outcome: store.OutcomeOK, Detail: detail, Master: m.cfg.Identity,
	}
	if err != nil {
		e.Outcome = store.OutcomeError
		if detail != "" {
			e.Detail = detail + ": " + Message(err)
		} else {
			e.Detail = Message(err)
		}
	}
	// The action happened even if its request is gone: write with a fresh deadline.
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if werr := store.AddEvent(wctx, m.st.DB, e); werr != nil {
		m.log.Error("event log: record failed", "action", action, "target", target, "actor", e.Actor, "err", werr)
	}
}
