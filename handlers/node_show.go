package handlers

import (
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/schedulemaster-go/schedulemaster/master"
	"github.com/schedulemaster-go/schedulemaster/protocol"
	"github.com/schedulemaster-go/schedulemaster/views"
)

// nodeRecentRuns is how many runs the node page lists.
const nodeRecentRuns = 20

// nodeHealthPoints bounds the samples the node page's chart plots: a day at
// one a minute, and room for failures.
const nodeHealthPoints = 3000

// nodeTaskLimit bounds the tasks the node page lists.
const nodeTaskLimit = 500

// showNode shows one node: its state, the tasks it executes, its recent runs
// and its health history. htmx gets the live part only.
func (s *server) showNode(c *gin.Context) {
	if isHX(c) {
		s.nodeLive(c)
		return
	}
	s.renderNodePage(c, http.StatusOK, c.Param("name"), nil)
}

// renderNodePage shows the node page with status; edit, when not nil,
// changes the view model first (the labels form's error).
func (s *server) renderNodePage(c *gin.Context, status int, name string, edit func(*views.NodePageVM)) {
	live, n, err := s.nodeLiveVM(c, name)
	if err != nil {
		s.tasksError(c, err)
		return
	}
	l := s.layout(c, tr(c, "TitleNode", "Name", n.Name), "nodes")
	vm := views.NodePageVM{Layout: l, Name: n.Name, ShowActions: l.Admin, Flash: s.takeFlash(c),
		CanEdit:    n.Type == master.TypeWorker && n.Mode != master.ModePending && master.NodeAllows(n.Status, master.NodeEdit),
		CanApprove: n.Mode == master.ModePending || len(master.PendingLabels(n)) > 0, CanLabel: n.Type == master.TypeWorker,
		LabelsForm: labelsText(master.AdminLabels(n)), Live: live}
	if edit != nil {
		edit(&vm)
	}
	s.render(c, status, views.NodePage(vm))
}

// labelsText writes labels for the labels field: "k=v, k=v", by key.
func labelsText(l protocol.Labels) string {
	return strings.ReplaceAll(l.String(), ",", ", ")
}

// nodeLabelRows are a node's labels in force, each with where it comes from.
func nodeLabelRows(n *master.Node) []views.NodeLabelRow {
	declared, admin := master.DeclaredLabels(n), master.AdminLabels(n)
	inForce := master.NodeLabels(n)
	rows := make([]views.NodeLabelRow, 0, len(inForce))
	for _, k := range slices.Sorted(maps.Keys(inForce)) {
		r := views.NodeLabelRow{Key: k, Value: inForce[k], From: "worker"}
		if v, ok := admin[k]; ok {
			r.From = "admin"
			if w, ok := declared[k]; ok && w != v {
				r.Overrides = k + "=" + w
			}
		}
		rows = append(rows, r)
	}
	// Declared labels that wait for an admin's approval select nothing.
	pending := master.PendingLabels(n)
	for _, k := range slices.Sorted(maps.Keys(pending)) {
		rows = append(rows, views.NodeLabelRow{Key: k, Value: pending[k], From: "pending"})
	}
	return rows
}

// nodeLive is the live fragment of the node page.
func (s *server) nodeLive(c *gin.Context) {
	live, _, err := s.nodeLiveVM(c, c.Param("name"))
	if err != nil {
		s.tasksError(c, err)
		return
	}
	s.render(c, http.StatusOK, views.NodeLive(live))
}

// nodeLiveVM reads everything the node page shows, at one moment.
func (s *server) nodeLiveVM(c *gin.Context, name string) (views.NodeLiveVM, *master.Node, error) {
	ctx := c.Request.Context()
	n, err := s.m.Nodes().Get(ctx, name)
	if err != nil {
		return views.NodeLiveVM{}, nil, err
	}
	now := time.Now()
	leader, err := s.m.Leader(ctx)
	if err != nil {
		return views.NodeLiveVM{}, nil, err
	}
	vm := views.NodeLiveVM{
		Name: n.Name, Type: n.Type, Mode: n.Mode, Host: n.Protocol + "://" + n.Host, StatusName: n.Status.String(),
		Leader: n.Type == master.TypeMaster && n.Name == leader, Priority: n.Priority, MaxConcurrency: n.MaxConcurrency,
		LastSeen: ago(lc(c), n.LastSeen, now), Failures: n.Failures, Reason: n.Reason, MachineName: n.MachineName,
		Degraded:     n.Status != master.StatusOffline && master.NodeDegraded(n.Reason),
		ClockSkew:    clockSkewText(lc(c), n),
		Labels:       nodeLabelRows(n),
		RunsURL:      withQuery("/runs", runListQuery(views.RunFilterVM{Node: n.Name}, 0)),
		RowsURL:      nodePath(n.Name) + "/live",
		PollInterval: s.poll, UpdatedAt: now.UTC().Format("15:04:05") + " UTC",
	}
	if !n.LastSeen.IsZero() {
		vm.LastSeenAt = n.LastSeen.UTC().Format(time.RFC3339)
	}
	tasks, _, err := s.m.Tasks().List(ctx, master.TaskFilter{Node: n.Name, Limit: nodeTaskLimit})
	if err != nil {
		return views.NodeLiveVM{}, nil, err
	}
	for i := range tasks {
		t := &tasks[i]
		last, _ := lastRunText(lc(c), t, now)
		vm.Tasks = append(vm.Tasks, views.NodeTaskRow{ID: t.ID, Title: t.Title, Schedule: scheduleText(lc(c), &t.TaskDef),
			StatusName: t.Status.String(), LastResult: t.LastResult, LastRun: last})
	}
	runs, _, err := s.m.Reads().SearchRuns(ctx, master.RunFilter{Node: n.Name, Limit: nodeRecentRuns, CountLimit: 1})
	if err != nil {
		return views.NodeLiveVM{}, nil, err
	}
	if vm.Runs, err = s.runListRows(c, runs); err != nil {
		return views.NodeLiveVM{}, nil, err
	}
	since := now.Add(-master.NodeHealthRetention)
	samples, err := s.m.Nodes().Health(ctx, n.Name, since, nodeHealthPoints)
	if err != nil {
		return views.NodeLiveVM{}, nil, err
	}
	vm.Chart, vm.Health = healthChart(lc(c), samples, now)
	return vm, n, nil
}

// nodePath is the node page's path.
func nodePath(name string) string { return "/nodes/" + url.PathEscape(name) }

// apiHealthSample is one health check in the open API; fields may be added,
// never renamed.
type apiHealthSample struct {
	At        time.Time `json:"at"`
	LatencyMS int64     `json:"latency_ms"`
	OK        bool      `json:"ok"`
	Error     string    `json:"error"`
}

// apiNodeDetail is one node with its health history, oldest first.
type apiNodeDetail struct {
	apiNode
	Health []apiHealthSample `json:"health"`
}

// apiNodeHealthWindow is how far back GET /api/v1/nodes/{name} shows the
// health history unless ?health_since= says otherwise.
const apiNodeHealthWindow = time.Hour

// apiNodeWithHealth answers a node with its health checks since
// ?health_since= (RFC 3339, default an hour ago; a day is kept).
func (s *server) apiNodeWithHealth(c *gin.Context, n *master.Node) {
	since := time.Now().Add(-apiNodeHealthWindow)
	if v := c.Query("health_since"); v != "" {
		t, err := parseRunTime(v, true)
		if err != nil {
			s.apiError(c, protocol.FieldErrors{"health_since": err.Error()})
			return
		}
		since = t
	}
	samples, err := s.m.Nodes().Health(c.Request.Context(), n.Name, since, nodeHealthPoints)
	if err != nil {
		s.apiError(c, err)
		return
	}
	out := apiNodeDetail{apiNode: toAPINode(n), Health: make([]apiHealthSample, len(samples))}
	for i, h := range samples {
		out.Health[i] = apiHealthSample{At: h.At.UTC(), LatencyMS: h.LatencyMS, OK: h.OK, Error: h.Reason}
	}
	c.JSON(http.StatusOK, out)
}
