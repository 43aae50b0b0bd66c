package master

import (
	"context"
	"errors"
	"log/slog"
	"regexp"
	"strings"
	"time"

	"github.com/uptrace/bun"

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

// ListEvents returns a page of the event log, newest first, and the total,
// counted up to ListCountCap unless f says otherwise.
// Whoever asks sees the events of the projects it may read, and the
// cluster's events (nodes, users, settings) when it may read every project.
func (r *Reads) ListEvents(ctx context.Context, f store.EventFilter) ([]store.Event, int, error) {
	if readable := readableProjects(ctx); readable != nil {
		f.Projects, f.Cluster = restrictProjects(ctx, f.Projects), false
	}
	f.CountLimit = countLimit(f.CountLimit)
	evs, total, err := store.ListEvents(ctx, r.db, f)
	if errors.Is(err, store.ErrBadCursor) {
		return nil, 0, Errorf(KindInvalid, "after must be the next cursor a previous page answered with")
	}
	return evs, total, err
}

// ListEventsFor is ListEvents as shown to a person: for anyone but an admin
// (admin false) every e-mail address in an event's actor, target and detail
// is replaced by HiddenEmail, since viewers see no personal data.
func (r *Reads) ListEventsFor(ctx context.Context, f store.EventFilter, admin bool) ([]store.Event, int, error) {
	evs, total, err := r.ListEvents(ctx, f)
	if err != nil || admin {
		return evs, total, err
	}
	for i := range evs {
		e := &evs[i]
		e.Actor, e.Target, e.Detail = HideEmails(e.Actor), HideEmails(e.Target), HideEmails(e.Detail)
	}
	return evs, total, nil
}

// HiddenEmail stands for an e-mail address a viewer may not see.
const HiddenEmail = "[e-mail hidden]"

// emailLike matches what may be an e-mail address in free text.
var emailLike = regexp.MustCompile(`[^\s<>"',;:()\[\]]+@[^\s<>"',;:()\[\]]+`)

// HideEmails replaces every e-mail address in s with HiddenEmail.
func HideEmails(s string) string {
	if !strings.Contains(s, "@") {
		return s
	}
	return emailLike.ReplaceAllString(s, HiddenEmail)
}

// eventLog records what people, workers and the engine's duties did: every
// part of the engine writes through it, so every action leaves an event the
// same way.
type eventLog struct {
	db     bun.IDB
	master string // the identity of the master that recorded it
	log    *slog.Logger
	// life ends the writes a request outlives when the engine stops.
	life *lifecycle
}

// record writes an action to the event log without ever failing the action.
func (l *eventLog) record(ctx context.Context, action, targetType, target string, err error, detail string) {
	e := &store.Event{
		At: time.Now(), Actor: ActorFrom(ctx), Action: action, TargetType: targetType, Target: target,
		Outcome: store.OutcomeOK, Detail: detail, Master: l.master, ProjectID: eventProjectFrom(ctx),
	}
	if err != nil {
		e.Outcome = store.OutcomeError
		if detail != "" {
			e.Detail = detail + ": " + Message(err)
		} else {
			e.Detail = Message(err)
		}
	}
	// The action happened even if its request is gone: write with a fresh
	// deadline (the engine's Stop still ends it).
	wctx, cancel := l.life.detached(ctx, 5*time.Second)
	defer cancel()
	if werr := store.AddEvent(wctx, l.db, e); werr != nil {
		l.log.Error("event log: record failed", "action", action, "target", target, "actor", e.Actor, "err", werr)
	}
}

// recordAll writes the events of one action on many items (a bulk action,
// a batch) in one transaction, stamped with this master, without ever
// failing the action; what names the action in the log of a failure.
func (l *eventLog) recordAll(ctx context.Context, what string, evs []store.Event) {
	if len(evs) == 0 {
		return
	}
	for i := range evs {
		evs[i].Master = l.master
	}
	wctx, cancel := l.life.detached(ctx, 30*time.Second)
	defer cancel()
	if err := store.AddEvents(wctx, l.db, evs); err != nil {
		l.log.Error("event log: record failed", "action", what, "events", len(evs), "err", err)
	}
}
