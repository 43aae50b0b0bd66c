package handlers

import (
	"cmp"
	"net/http"
	"sort"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/schedulemaster-go/schedulemaster/locale"
	"github.com/schedulemaster-go/schedulemaster/master"
	"github.com/schedulemaster-go/schedulemaster/protocol"
	"github.com/schedulemaster-go/schedulemaster/views"
)

// showTask shows a task's definition, status, actions and runs.
func (s *server) showTask(c *gin.Context) {
	vm, err := s.taskVM(c, c.Param("id"), nil)
	if err != nil {
		s.tasksError(c, err)
		return
	}
	vm.Flash = s.takeFlash(c)
	if err := s.taskBackfills(c, &vm); err != nil {
		s.tasksError(c, err)
		return
	}
	s.render(c, http.StatusOK, views.TaskPage(vm))
}

// taskVM loads one task and the page of its runs asked for by ?offset=.
func (s *server) taskVM(c *gin.Context, id string, flash *views.Flash) (views.TaskVM, error) {
	ctx := c.Request.Context()
	stored, err := s.m.Tasks().Get(ctx, id)
	if err != nil {
		return views.TaskVM{}, err
	}
	masked := master.MaskTask(*stored) // secrets are never shown back
	t := &masked
	// The runs panel's counters come from this same read of the task.
	runs, err := s.runsVM(c, t)
	if err != nil {
		return views.TaskVM{}, err
	}
	l := s.layout(c, t.Title, "tasks")
	now := time.Now()
	vm := views.TaskVM{
		Layout: l, Flash: flash, ID: t.ID, Title: t.Title, Description: t.Description, Type: t.Type,
		Status: int(t.Status), StatusName: t.Status.String(),
		Timeout: lc(c).Duration(time.Duration(t.Timeout)), Retries: t.Retries, Overlap: policyText(lc(c), "Overlap", t.Overlap), Routing: routingText(lc(c), t.Routing, t.RoutingKey), Misfire: policyText(lc(c), "Misfire", t.Misfire),
		AtCapacity: policyText(lc(c), "AtCapacity", t.AtCapacity), Params: sortedKV(t.Params),
		Executors: t.Executors, Keepers: t.Keepers, LastResult: t.LastResult, RunCount: runs.RunCount,
		CreatedBy: t.CreatedBy, CreatedAt: utcText(t.CreatedAt), UpdatedAt: utcText(t.UpdatedAt),
		Actions:     roleActions(taskActions(t.Status), currentUser(c).Can(t.ProjectID, master.ActOperate), currentUser(c).Can(t.ProjectID, master.ActEdit)),
		ActionQuery: "?from=detail", ShowActions: currentUser(c).Can(t.ProjectID, master.ActOperate) || currentUser(c).Can(t.ProjectID, master.ActEdit), Runs: runs,
		CanClone: currentUser(c).Can(t.ProjectID, master.ActEdit), Version: t.Version,
	}
	health, err := s.m.Reads().TasksHealth(ctx, []string{t.ID}, master.HealthWindow)
	if err != nil {
		return views.TaskVM{}, err
	}
	vm.Health = taskHealthVM(lc(c), health[t.ID])
	if vm.Selector = t.Selector; len(t.Selected) > 0 {
		nodes, err := s.m.Nodes().List(ctx)
		if err != nil {
			return views.TaskVM{}, err
		}
		status := make(map[string]string, len(nodes))
		for _, n := range nodes {
			status[n.Name] = n.Status.String()
		}
		for _, name := range t.Selected {
			vm.Selected = append(vm.Selected, views.NodeOption{Name: name, StatusName: cmp.Or(status[name], "unknown")})
		}
	}
	vm.Schedule, vm.ScheduleZone = scheduleParts(lc(c), &t.TaskDef)
	vm.LastRun, vm.LastRunAt = lastRunText(lc(c), t, now)
	vm.NextRun, vm.NextRunAt = nextRunText(lc(c), t, now)
	vm.NoExecutor, vm.NoExecutorSince = noExecutor(t)
	switch {
	case t.StartAt != nil && t.EndAt != nil:
		vm.Window = tr(c, "WindowFromTo", "From", utcText(*t.StartAt), "To", utcText(*t.EndAt))
	case t.StartAt != nil:
		vm.Window = tr(c, "WindowFrom", "From", utcText(*t.StartAt))
	case t.EndAt != nil:
		vm.Window = tr(c, "WindowUntil", "To", utcText(*t.EndAt))
	}
	for _, ch := range t.Children {
		link := views.TaskLink{ID: ch, Title: ch}
		if ct, err := s.m.Tasks().Get(ctx, ch); err == nil {
			link.Title = ct.Title
		}
		vm.Children = append(vm.Children, link)
	}
	if h := t.HTTP; h != nil {
		vm.HTTP = &views.TaskHTTPView{Method: h.Method, URL: h.URL, Headers: sortedKV(h.Headers), Body: h.Body, ContentType: h.ContentType}
	}
	if sh := t.Shell; sh != nil {
		vm.Shell = &views.TaskShellView{Command: sh.Command, Args: sh.Args, Env: sortedKV(sh.Env), Dir: sh.Dir}
	}
	vm.Spec = s.taskSpecView(ctx, lc(c), t.Project, &t.TaskDef)
	return vm, nil
}

func sortedKV(m map[string]string) []views.KV {
	out := make([]views.KV, 0, len(m))
	for k, v := range m {
		out = append(out, views.KV{Key: k, Value: v})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Key < out[j].Key })
	return out
}

// editable reports whether a task may be edited: stopped, or running or
// paused (saved in place on its executors).
func editable(t *master.Task) bool { return master.TaskAllows(t.Status, master.TaskEdit) }

// routingText names a task's routing strategy on its page, with the key for hash.
func routingText(lc *locale.Localizer, routing, key string) string {
	if routing == protocol.RoutingHash {
		return lc.T("RoutingHashBy", "Key", key)
	}
	return policyText(lc, "Routing", routing)
}

// policyText names a policy's value (overlap, routing, misfire) in the
// reader's language: message kind + the value in CamelCase, e.g.
// RoutingRoundRobin; a value without a message stays as it is.
func policyText(lc *locale.Localizer, kind, value string) string {
	if value == "" {
		return ""
	}
	id, ok := policyIDs[kind+":"+value]
	if !ok {
		return value
	}
	return lc.T(id)
}

// policyIDs are the messages of the policies' values.
var policyIDs = map[string]string{
	"Routing:weighted": "RoutingWeighted", "Routing:round_robin": "RoutingRoundRobin", "Routing:failover": "RoutingFailover",
	"Routing:least_busy": "RoutingLeastBusy", "Routing:broadcast": "RoutingBroadcast",
	"Overlap:allow": "OverlapAllow", "Overlap:skip": "OverlapSkip", "Overlap:queue": "OverlapQueue",
	"Misfire:skip": "MisfireSkip", "Misfire:run_once": "MisfireRunOnce",
	"AtCapacity:wait": "AtCapacityWait", "AtCapacity:skip": "AtCapacitySkip",
}

// taskBackfills adds the task's backfills and, for an operator, the
// backfill form (in the task's zone) to its page.
func (s *server) taskBackfills(c *gin.Context, vm *views.TaskVM) error {
	ctx := c.Request.Context()
	t, err := s.m.Tasks().Get(ctx, vm.ID)
	if err != nil {
		return err
	}
	loc, err := protocol.LoadTimezone(t.Timezone)
	if err != nil {
		loc = time.UTC
	}
	vm.CanBackfill, vm.BackfillZone = currentUser(c).Can(t.ProjectID, master.ActOperate), loc.String()
	bs, err := s.m.Workflows().Backfills(ctx, "", vm.ID)
	if err != nil {
		return err
	}
	for i := range bs[:min(len(bs), 10)] {
		vm.Backfills = append(vm.Backfills, backfillRow(lc(c), &bs[i], loc))
	}
	return nil
}
