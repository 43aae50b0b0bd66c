package handlers

import (
	"errors"
	"net/http"

	"github.com/gin-gonic/gin"

	"github.com/schedulemaster-go/schedulemaster/protocol"
	"github.com/schedulemaster-go/schedulemaster/views"
)

// listWorkflows shows the Workflows page: the workflows one may read.
func (s *server) listWorkflows(c *gin.Context) {
	query := c.Query("q")
	ws, err := s.m.Workflows().List(c.Request.Context(), query)
	vm := views.WorkflowsVM{Layout: s.layout(c, tr(c, "NavWorkflows"), "workflows"), Flash: s.takeFlash(c), Query: query}
	var fe protocol.FieldErrors
	if errors.As(err, &fe) {
		vm.QueryError, err = fe["q"], nil
	}
	if err != nil {
		s.tasksError(c, err)
		return
	}
	for _, w := range ws {
		row := views.WorkflowRow{ID: w.ID, Title: w.Title, Key: w.Key, Steps: len(w.Steps), Updated: utcText(w.UpdatedAt),
			Manual: w.Schedule == nil || w.Schedule.Kind == "", Paused: w.Paused}
		if w.NextFire != nil {
			row.NextFire = utcText(*w.NextFire)
		}
		if w.LastRun != nil {
			row.LastRunID, row.LastRunStatus, row.LastRunAt = w.LastRun.ID, w.LastRun.Status, utcText(w.LastRun.StartedAt)
		}
		vm.Items = append(vm.Items, row)
	}
	s.render(c, http.StatusOK, views.WorkflowsPage(vm))
}
