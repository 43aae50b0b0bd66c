package store

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/uptrace/bun"
)

// Event outcomes.
const (
	OutcomeOK    = "ok"
	OutcomeError = "error"
)

// Event target types.
const (
	TargetNode     = "node"
	TargetTask     = "task"
	TargetUser     = "user"
	TargetToken    = "token"
	TargetSettings = "settings"
	TargetProject  = "project"
	TargetWorkflow = "workflow"
)

// Column bounds of the events table (characters).
const (
	maxEventActor  = 128
	maxEventAction = 64
	maxEventType   = 16
	maxEventTarget = 255
	maxEventMaster = 64
	// MaxEventDetail is the longest detail kept; longer ones are cut.
	MaxEventDetail = 1000
)

// Event is one line of the event log: who did what to which node, task, user,
// token or setting, and how it ended.
type Event struct {
	bun.BaseModel `bun:"table:events"`

	ID         int64     `bun:"id,pk,autoincrement"`
	At         time.Time `bun:"at"`
	Actor      string    `bun:"actor"`
	Action     string    `bun:"action"`
	TargetType string    `bun:"target_type"`
	Target     string    `bun:"target"`
	Outcome    string    `bun:"outcome"`
	Detail     string    `bun:"detail"`
	// Master is the identity of the master that recorded the event ("" for
	// events older than several masters).
	Master string `bun:"master"`
	// ProjectID is the project of the task, delayed task or token the event
	// is about; 0 (NULL) for cluster events (nodes, users, settings).
	ProjectID int64 `bun:"project_id,nullzero"`
}

// clip cuts s to at most n characters (not bytes), marking a cut with "…".
func clip(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return string(r[:n-1]) + "…"
}

// AddEvent appends e to the event log. Over-long fields are cut to their
// column size; an empty outcome is "ok" and a zero time is now.
func AddEvent(ctx context.Context, db bun.IDB, e *Event) error {
	prepareEvent(e)
	if _, err := db.NewInsert().Model(e).Exec(ctx); err != nil {
		return fmt.Errorf("store: add event: %w", err)
	}
	return nil
}

// prepareEvent cuts an event's fields to their columns and fills defaults.
func prepareEvent(e *Event) {
	if e.At.IsZero() {
		e.At = time.Now()
	}
	e.At = e.At.UTC()
	if e.Outcome != OutcomeError {
		e.Outcome = OutcomeOK
	}
	if strings.TrimSpace(e.Actor) == "" {
		e.Actor = "system"
	}
	e.Actor = clip(e.Actor, maxEventActor)
	e.Action = clip(e.Action, maxEventAction)
	e.TargetType = clip(e.TargetType, maxEventType)
	e.Target = clip(e.Target, maxEventTarget)
	e.Master = clip(e.Master, maxEventMaster)
	e.Detail = clip(strings.ToValidUTF8(e.Detail, "?"), MaxEventDetail)
}

// EventFilter narrows ListEvents; zero fields match everything.
type EventFilter struct {
	Actor      string // exact
	Action     string // prefix: "node." or "node.connect"
	TargetType string // exact
	Target     string // exact
	// TargetMatch is what a person types to find a target: its exact id or
	// name, or a part of a task's title (case-insensitive).
	TargetMatch string
	Outcome     string // "ok" or "error"
	From        time.Time
	To          time.Time // exclusive
	// Projects limits the list to events of these projects, and to cluster
	// events when Cluster is set too; nil: every event.
	Projects []int64
	Cluster  bool
	// After starts the page after this event (keyset paging by at and id;
	// Offset is then ignored).
	After  *Cursor
	Limit  int // default 50
	Offset int
	// CountLimit stops counting the matching rows past this many (0: count
	// them all), so a list over a large estate stays cheap; the total is then
	// at most CountLimit.
	CountLimit int
}

// escapeLikeBang escapes a LIKE pattern for "ESCAPE '!'", which both SQLite
// and MySQL read the same way (a backslash is not an escape in SQLite).
func escapeLikeBang(s string) string {
	return strings.NewReplacer(`!`, `!!`, `%`, `!%`, `_`, `!_`).Replace(s)
}

// ListEvents returns a page of events, newest first, and the total matching.
func ListEvents(ctx context.Context, db bun.IDB, f EventFilter) ([]Event, int, error) {
	events := []Event{}
	q := db.NewSelect().Model(&events)
	if f.Actor != "" {
		q = q.Where("actor = ?", f.Actor)
	}
	if f.Action != "" {
		q = q.Where("action LIKE ? ESCAPE '!'", escapeLikeBang(f.Action)+"%")
	}
	if f.TargetType != "" {
		q = q.Where("target_type = ?", f.TargetType)
	}
	if f.Target != "" {
		q = q.Where("target = ?", f.Target)
	}
	if f.TargetMatch != "" {
		like := "%" + escapeLikeBang(strings.ToLower(f.TargetMatch)) + "%"
		q = q.WhereGroup(" AND ", func(q *bun.SelectQuery) *bun.SelectQuery {
			return q.Where("target = ?", f.TargetMatch).
				WhereOr("target_type = ? AND target IN (SELECT id FROM tasks WHERE "+titleLike(db)+")", TargetTask, like)
		})
	}
	if f.Outcome != "" {
		q = q.Where("outcome = ?", f.Outcome)
	}
	if f.Projects != nil {
		q = q.WhereGroup(" AND ", func(q *bun.SelectQuery) *bun.SelectQuery {
			q = q.Where("1 = 0")
			if len(f.Projects) > 0 {
				q = q.WhereOr("project_id IN (?)", bun.In(f.Projects))
			}
			if f.Cluster {
				q = q.WhereOr("project_id IS NULL")
			}
			return q
		})
	}
	if !f.From.IsZero() {
		q = q.Where("at >= ?", f.From.UTC())
	}
	if !f.To.IsZero() {
		q = q.Where("at < ?", f.To.UTC())
	}
	if f.Limit <= 0 {
		f.Limit = 50
	}
	// The total counts the filter's events; a cursor only moves the page.
	counted := q.Clone()
	if f.After != nil {
		id, err := strconv.ParseInt(f.After.ID, 10, 64)
		if err != nil {
			return nil, 0, fmt.Errorf("event cursor id %q: %w", f.After.ID, ErrBadCursor)
		}
		q, f.Offset = after(q, f.After, "at", "id", false, id), 0
	}
	q, empty, err := pageAt[int64](ctx, q, "at DESC, id DESC", f.Limit, f.Offset, false)
	if err == nil && !empty {
		err = q.Scan(ctx)
	}
	if err != nil {
		return nil, 0, fmt.Errorf("store: list events: %w", err)
	}
	for i := range events {
		events[i].At = events[i].At.UTC()
	}
	total, known := pageTotal(f.Offset, len(events), f.Limit, f.After != nil)
	if !known {
		var err error
		if total, err = countUpTo(ctx, db, counted, f.CountLimit); err != nil {
			return nil, 0, fmt.Errorf("store: count events: %w", err)
		}
	}
	return events, total, nil
}

// TaskTitles returns the titles of the tasks with these ids, deleted ones
// included, so that a log or a list can name them.
func TaskTitles(ctx context.Context, db bun.IDB, ids []string) (map[string]string, error) {
	return TaskTitlesIn(ctx, db, ids, nil)
}

// TaskTitlesIn is TaskTitles for the tasks of these projects (nil: all).
func TaskTitlesIn(ctx context.Context, db bun.IDB, ids []string, projects []int64) (map[string]string, error) {
	out := map[string]string{}
	if len(ids) == 0 {
		return out, nil
	}
	var rows []struct {
		ID    string `bun:"id"`
		Title string `bun:"title"`
	}
	if err := inProjects(db.NewSelect().Table("tasks").Column("id", "title").Where("id IN (?)", bun.In(ids)), "project_id", projects).Scan(ctx, &rows); err != nil {
		return nil, fmt.Errorf("store: task titles: %w", err)
	}
	for _, r := range rows {
		out[r.ID] = r.Title
	}
	return out, nil
}
