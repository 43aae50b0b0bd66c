package handlers

import (
	"maps"
	"net/http"
	"slices"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/schedulemaster-go/schedulemaster/locale"
	"github.com/schedulemaster-go/schedulemaster/master"
	"github.com/schedulemaster-go/schedulemaster/protocol"
	"github.com/schedulemaster-go/schedulemaster/store"
	"github.com/schedulemaster-go/schedulemaster/views"
)

// showBackfill shows a backfill: its window, state and progress, its runs,
// and Pause, Resume and Cancel for operators; it follows the backfill live
// while it runs.
func (s *server) showBackfill(c *gin.Context) {
	vm, err := s.backfillVM(c)
	if err != nil {
		s.tasksError(c, err)
		return
	}
	vm.Layout, vm.Flash = s.layout(c, tr(c, "BackfillHeading", "Title", vm.Title), "workflows"), s.takeFlash(c)
	s.render(c, http.StatusOK, views.BackfillPage(vm))
}

// backfillLive answers the backfill page's poll with its live part.
func (s *server) backfillLive(c *gin.Context) {
	vm, err := s.backfillVM(c)
	if err != nil {
		s.tasksError(c, err)
		return
	}
	s.render(c, http.StatusOK, views.BackfillLive(vm))
}

// backfillStatuses are the statuses of a backfill's runs in the order its
// progress counts them.
var backfillStatuses = []string{store.WorkflowQueued, store.WorkflowRunning, store.WorkflowSuccess, store.WorkflowFailed,
	store.WorkflowTimeout, store.WorkflowCancelled, store.WorkflowSkipped}

func (s *server) backfillVM(c *gin.Context) (views.BackfillVM, error) {
	ctx := c.Request.Context()
	b, err := s.m.Workflows().Backfill(ctx, c.Param("id"))
	if err != nil {
		return views.BackfillVM{}, err
	}
	loc := time.UTC
	if b.WorkflowID != "" {
		if w, err := s.m.Workflows().Get(ctx, b.WorkflowID); err == nil {
			loc = workflowZone(w)
		}
	} else if t, err := s.m.Tasks().Get(ctx, b.TaskID); err == nil {
		if l, err := protocol.LoadTimezone(t.Timezone); err == nil {
			loc = l
		}
	}
	operate := currentUser(c).Can(b.ProjectID, master.ActOperate)
	row := backfillRow(lc(c), b, loc)
	vm := views.BackfillVM{ID: b.ID, Title: b.Title, WorkflowID: b.WorkflowID, TaskID: b.TaskID, State: b.State,
		From: zoneTime(&b.From, loc), To: zoneTime(&b.To, loc), MaxConcurrent: b.MaxConcurrent, Order: b.Order,
		CreatedBy: b.CreatedBy, CreatedAt: utcText(b.CreatedAt), Total: b.Total, Ended: row.Ended,
		CanPause: operate && b.State == store.BackfillRunning, CanResume: operate && b.State == store.BackfillPaused,
		CanCancel: operate && (b.State == store.BackfillRunning || b.State == store.BackfillPaused)}
	if b.EndedAt != nil {
		vm.EndedAt = utcText(*b.EndedAt)
	}
	if b.State == store.BackfillRunning {
		vm.LiveURL, vm.Poll = "/backfills/"+b.ID+"/live", s.poll
	}
	for _, st := range backfillStatuses {
		if n := b.Progress[st]; n > 0 {
			vm.Progress = append(vm.Progress, views.StatusCount{Status: st, N: n})
		}
	}
	for _, st := range slices.Sorted(maps.Keys(b.Progress)) {
		if n := b.Progress[st]; !slices.Contains(backfillStatuses, st) && n > 0 {
			vm.Progress = append(vm.Progress, views.StatusCount{Status: st, N: n})
		}
	}
	for i := range b.Runs {
		vm.Runs = append(vm.Runs, workflowRunRow(&b.Runs[i]))
	}
	listed := 0
	for _, n := range b.Progress {
		listed += n
	}
	vm.RunsCut = len(b.Runs) < listed-b.Progress[store.WorkflowQueued]
	return vm, nil
}

// backfillRow is a backfill in a workflow's list: its window in loc and how
// many of its runs ended.
func backfillRow(lc *locale.Localizer, b *master.Backfill, loc *time.Location) views.BackfillRow {
	ended := b.Total - b.Progress[store.WorkflowQueued] - b.Progress[store.WorkflowRunning]
	return views.BackfillRow{ID: b.ID, State: b.State, CreatedAt: utcText(b.CreatedAt), CreatedBy: b.CreatedBy,
		Window: windowText(lc, &b.From, &b.To, loc), Total: b.Total, Ended: max(ended, 0)}
}
