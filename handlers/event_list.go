package handlers

import (
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/schedulemaster-go/schedulemaster/handlers/form"
	"github.com/schedulemaster-go/schedulemaster/locale"
	"github.com/schedulemaster-go/schedulemaster/master"

	"github.com/gin-gonic/gin"

	"github.com/schedulemaster-go/schedulemaster/protocol"
	"github.com/schedulemaster-go/schedulemaster/views"
)

// eventsPerPage is the page size of the event log in the console.
const eventsPerPage = 50

// eventTargetTypes are the kinds of things the event log names.
var eventTargetTypes = []string{master.TargetNode, master.TargetTask, master.TargetUser, master.TargetToken, master.TargetSettings, master.TargetDelayed,
	master.TargetWorkflow, master.TargetConnection}

// eventActions are suggestions for the action filter (a prefix matches too).
var eventActions = []string{
	"node.", "node.create", "node.edit", "node.connect", "node.enable", "node.disable", "node.delete",
	"node.register", "node.offline", "node.recover", "node.clock_skew", "node.clock_ok",
	"task.", "task.create", "task.edit", "task.start", "task.stop", "task.pause", "task.resume", "task.run", "task.delete",
	"user.", "token.", "settings.",
	"delayed.", "delayed.create", "delayed.cancel", "delayed.fail", "delayed.reassign",
	"workflow.", "workflow.create", "workflow.update", "workflow.delete", "workflow.run", "workflow.cancel", "workflow.rerun", "workflow.end",
	"workflow.pause", "workflow.resume", "workflow.misfire", "workflow.backfill", "task.backfill",
	"backfill.", "backfill.pause", "backfill.resume", "backfill.cancel",
	"connection.", "connection.create", "connection.update", "connection.delete", "connection.test",
}

// eventFilterInput reads the event filters of a query string; bad fields are
// reported by name (the form shows them inline, the API returns them).
func eventFilterInput(c *gin.Context) (master.EventFilter, views.EventFilterVM, protocol.FieldErrors) {
	fvm := views.EventFilterVM{
		Actor: strings.TrimSpace(c.Query("actor")), Action: strings.TrimSpace(c.Query("action")),
		TargetType: strings.TrimSpace(c.Query("target_type")), Target: strings.TrimSpace(c.Query("target")),
		Outcome: strings.TrimSpace(c.Query("outcome")), From: strings.TrimSpace(c.Query("from")), To: strings.TrimSpace(c.Query("to")),
	}
	// A target is typed as a person knows it: a node name, a task's id or a
	// part of its title.
	f := master.EventFilter{Actor: fvm.Actor, Action: fvm.Action, TargetType: fvm.TargetType, TargetMatch: fvm.Target, Outcome: fvm.Outcome}
	fe := protocol.FieldErrors{}
	if len(fvm.Actor) > 128 {
		fe["actor"] = "at most 128 characters"
	}
	if len(fvm.Action) > 64 {
		fe["action"] = "at most 64 characters"
	}
	if len(fvm.Target) > 255 {
		fe["target"] = "at most 255 characters"
	}
	if fvm.TargetType != "" && !contains(eventTargetTypes, fvm.TargetType) {
		fe["target_type"] = "must be one of " + strings.Join(eventTargetTypes, ", ")
	}
	if fvm.Outcome != "" && fvm.Outcome != master.OutcomeOK && fvm.Outcome != master.OutcomeError {
		fe["outcome"] = "must be ok or error"
	}
	for _, p := range []struct {
		field string
		v     string
		dst   *time.Time
	}{{"from", fvm.From, &f.From}, {"to", fvm.To, &f.To}} {
		t, err := form.Time(p.v)
		if err != nil {
			fe[p.field] = err.Error()
			continue
		}
		if t != nil {
			*p.dst = *t
		}
	}
	if fe["from"] == "" && fe["to"] == "" && !f.From.IsZero() && !f.To.IsZero() && !f.From.Before(f.To) {
		fe["to"] = "must be after the start of the range"
	}
	return f, fvm, fe
}

// eventQuery is the filters (and page) as a query string.
func eventQuery(f views.EventFilterVM, offset int) url.Values {
	q := url.Values{}
	for _, kv := range [][2]string{{"actor", f.Actor}, {"action", f.Action}, {"target_type", f.TargetType},
		{"target", f.Target}, {"outcome", f.Outcome}, {"from", f.From}, {"to", f.To}} {
		if kv[1] != "" {
			q.Set(kv[0], kv[1])
		}
	}
	if offset > 0 {
		q.Set("offset", strconv.Itoa(offset))
	}
	return q
}

// listEvents shows the event log, filtered and paginated, newest first.
func (s *server) listEvents(c *gin.Context) {
	f, fvm, fe := eventFilterInput(c)
	offset := 0
	if v := c.Query("offset"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			fe["offset"] = "must be a number >= 0"
		}
		offset = max(n, 0)
	}
	vm := views.EventsVM{
		Layout: s.layout(c, tr(c, "EventsTitle"), "events"), Filter: fvm, Filtered: fvm != (views.EventFilterVM{}),
		Actions: eventActions, TargetTypes: eventTargetTypes,
	}
	if len(fe) > 0 {
		vm.Errors = fe
		s.render(c, http.StatusBadRequest, views.EventsPage(vm))
		return
	}
	f.Limit, f.Offset = eventsPerPage, offset
	// The console shows the current project's events and, to who may read
	// every project, the cluster's.
	f.Projects, f.Cluster = s.currentProjectIDs(c), true
	ctx := c.Request.Context()
	evs, total, err := s.m.Reads().ListEventsFor(ctx, f, isAdmin(c))
	if err != nil {
		s.serverError(c, err)
		return
	}
	titles, err := s.m.Reads().TaskTitles(ctx, eventTaskIDs(evs))
	if err != nil {
		s.serverError(c, err)
		return
	}
	nodes, err := s.m.Nodes().List(ctx)
	if err != nil {
		s.serverError(c, err)
		return
	}
	known := map[string]bool{}
	for _, n := range nodes {
		known[n.Name] = n.Type == master.TypeWorker
	}
	now := time.Now()
	for i := range evs {
		vm.Rows = append(vm.Rows, eventRow(lc(c), &evs[i], now, titles, known))
	}
	vm.Total, vm.Capped = total, total == master.ListCountCap
	if len(evs) > 0 {
		vm.First, vm.Last = offset+1, offset+len(evs)
	}
	if offset > 0 {
		vm.PrevURL = withQuery("/events", eventQuery(fvm, max(offset-eventsPerPage, 0)))
	}
	if offset+len(evs) < total {
		vm.NextURL = withQuery("/events", eventQuery(fvm, offset+eventsPerPage))
	}
	s.render(c, http.StatusOK, views.EventsPage(vm))
}

func eventTaskIDs(evs []master.Event) []string {
	var ids []string
	seen := map[string]bool{}
	for _, e := range evs {
		if e.TargetType == master.TargetTask && e.Target != "" && !seen[e.Target] {
			seen[e.Target] = true
			ids = append(ids, e.Target)
		}
	}
	return ids
}

// eventRow renders one event; nodes maps node names to "has an edit page".
func eventRow(lc *locale.Localizer, e *master.Event, now time.Time, titles map[string]string, nodes map[string]bool) views.EventRow {
	r := views.EventRow{
		ID: e.ID, At: utcText(e.At), AtISO: e.At.UTC().Format(time.RFC3339), Ago: ago(lc, e.At, now),
		Actor: e.Actor, Action: e.Action, TargetType: e.TargetType, Target: e.Target, TargetName: e.Target,
		Outcome: e.Outcome, Detail: e.Detail, Master: e.Master,
		ActorURL:  withQuery("/events", eventQuery(views.EventFilterVM{Actor: e.Actor}, 0)),
		TargetURL: withQuery("/events", eventQuery(views.EventFilterVM{TargetType: e.TargetType, Target: e.Target}, 0)),
	}
	r.Meaning, r.OutcomeText = eventMeaning(e.Action, e.Outcome)
	switch e.TargetType {
	case master.TargetTask:
		if title, ok := titles[e.Target]; ok {
			r.TargetTitle, r.TargetName = title, title
			r.ObjectURL = "/tasks/" + url.PathEscape(e.Target)
		}
	case master.TargetDelayed:
		if e.Target != "" {
			r.ObjectURL = "/delayed/" + url.PathEscape(e.Target)
		}
	case master.TargetConnection:
		if e.Target != "" && e.Action != "connection.delete" {
			r.ObjectURL = "/connections/" + url.PathEscape(e.Target)
		}
	case master.TargetNode:
		if nodes[e.Target] {
			r.ObjectURL = "/nodes/" + url.PathEscape(e.Target) + "/edit"
		}
	}
	return r
}

// Event meanings, which colour the log: an action that went wrong or a node
// lost is bad, one that takes something out of service a warning, one that
// brings something into service good, the rest information.
const (
	meaningGood = "good"
	meaningWarn = "warn"
	meaningBad  = "bad"
	meaningInfo = "info"
)

// eventMeaning says what an event means for an operator, and the word its
// badge shows: "error" for a failed action, what happened for the health
// checker's transitions (a node going offline is no "ok"), else "ok".
func eventMeaning(action, outcome string) (meaning, label string) {
	if outcome == master.OutcomeError {
		return meaningBad, "error"
	}
	switch action {
	case "node.offline":
		return meaningBad, "offline"
	case "node.recover":
		return meaningGood, "recovered"
	case "node.clock_skew":
		return meaningWarn, "clock skew"
	case "node.clock_ok":
		return meaningGood, "ok"
	case "node.create", "node.connect", "node.enable", "node.register", "task.create", "task.start", "task.resume",
		"user.create", "user.enable":
		return meaningGood, "ok"
	case "node.disable", "node.delete", "node.reset_identity", "task.stop", "task.pause", "task.delete",
		"user.disable", "user.password_reset", "token.revoke":
		return meaningWarn, "ok"
	}
	return meaningInfo, "ok"
}

// apiEvent is an event in the open API; fields may be added, never renamed.
type apiEvent struct {
	ID         int64     `json:"id"`
	At         time.Time `json:"at"`
	Actor      string    `json:"actor"`
	Action     string    `json:"action"`
	TargetType string    `json:"target_type"`
	Target     string    `json:"target"`
	Outcome    string    `json:"outcome"`
	Detail     string    `json:"detail"`
	Master     string    `json:"master"` // the master that recorded it
}

// apiListEvents answers GET /api/v1/events?actor=&action=&target_type=&target=&outcome=&from=&to=&limit=&offset=
// with {"items": [...], "total": N}, newest first. target is a target's exact
// name or id, or a part of a task's title. from and to are RFC 3339 (or
// 2006-01-02T15:04, UTC); to is excluded.
func (s *server) apiListEvents(c *gin.Context) {
	limit, offset, err := pageParams(c)
	if err != nil {
		s.apiError(c, err)
		return
	}
	f, _, fe := eventFilterInput(c)
	if len(fe) > 0 {
		s.apiError(c, fe)
		return
	}
	f.Limit, f.Offset = limit, offset
	if f.Projects, err = s.apiProjectFilter(c); err != nil {
		s.apiError(c, err)
		return
	}
	if f.After, err = afterParam(c); err != nil {
		s.apiError(c, err)
		return
	}
	evs, total, err := s.m.Reads().ListEventsFor(c.Request.Context(), f, isAdmin(c))
	if err != nil {
		s.serverError(c, err)
		return
	}
	items := make([]apiEvent, len(evs))
	for i, e := range evs {
		items[i] = apiEvent{ID: e.ID, At: e.At.UTC(), Actor: e.Actor, Action: e.Action, TargetType: e.TargetType,
			Target: e.Target, Outcome: e.Outcome, Detail: e.Detail, Master: e.Master}
	}
	c.JSON(http.StatusOK, pageAnswer(items, total, f.Limit, func(e apiEvent) (time.Time, string) { return e.At, strconv.FormatInt(e.ID, 10) }))
}

// isAdmin reports whether the caller is an admin: only admins see personal
// data (e-mail addresses) in the event log.
func isAdmin(c *gin.Context) bool {
	p := currentUser(c)
	return p != nil && p.ClusterAdmin()
}
