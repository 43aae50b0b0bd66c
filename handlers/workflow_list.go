package handlers

import (
	"net/http"

	"github.com/gin-gonic/gin"

	"github.com/schedulemaster-go/schedulemaster/views"
)

// listWorkflows shows the Workflows page: the workflows one may read.
func (s *server) listWorkflows(c *gin.Context) {
	ws, err := s.m.Workflows().List(c.Request.Context())
	if err != nil {
		s.tasksError(c, err)
		return
	}
	vm := views.WorkflowsVM{Layout: s.layout(c, tr(c, "NavWorkflows"), "workflows"), Flash: s.takeFlash(c)}
	for _, w := range ws {
		row := views.WorkflowRow{ID: w.ID, Title: w.Title, Key: w.Key, Steps: len(w.Steps), Updated: utcText(w.UpdatedAt),
			Manual: w.Schedule == nil || w.Schedule.Kind == "", Paused: w.Paused}
		if w.NextFire != nil {
			row.NextFire = utcText(*w.NextFire)
		}
		vm.Items = append(vm.Items, row)
	}
	s.render(c, http.StatusOK, views.WorkflowsPage(vm))
}
