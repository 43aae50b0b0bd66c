package handlers

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"

	"github.com/gin-gonic/gin"

	"github.com/schedulemaster-go/schedulemaster/master"
	"github.com/schedulemaster-go/schedulemaster/views"
)

// versionRow shows one version of task id in the history.
func versionRow(id string, v *master.TaskVersion, canEdit bool) views.TaskVersionRow {
	base := "/tasks/" + url.PathEscape(id) + "/versions/" + strconv.Itoa(v.Version)
	r := views.TaskVersionRow{Version: v.Version, SavedAt: utcText(v.CreatedAt), SavedBy: v.CreatedBy, Via: v.Via, Note: v.Note,
		Current: v.Current, ViewURL: base}
	if v.Version > 1 {
		r.DiffURL = base + "?with=" + strconv.Itoa(v.Version-1)
	}
	if canEdit && !v.Current {
		r.RestoreAt = base + "/restore"
	}
	return r
}

// showTaskVersions shows a task's history.
func (s *server) showTaskVersions(c *gin.Context) {
	ctx := c.Request.Context()
	id := c.Param("id")
	t, err := s.m.Tasks().Get(ctx, id)
	if err != nil {
		s.tasksError(c, err)
		return
	}
	before, _, err := versionsPageParams(c)
	if err != nil {
		s.tasksError(c, err)
		return
	}
	vs, more, err := s.m.Tasks().Versions(ctx, id, before, 0)
	if err != nil {
		s.tasksError(c, err)
		return
	}
	canEdit := currentUser(c).Can(t.ProjectID, master.ActEdit)
	vm := views.TaskVersionsVM{Layout: s.layout(c, tr(c, "TaskHistoryHeading", "Title", t.Title), "tasks"), Flash: s.takeFlash(c),
		ID: id, Title: t.Title}
	inForce, _ := s.m.Settings()
	vm.Kept = inForce.TaskVersionsKept
	for i := range vs {
		vm.Items = append(vm.Items, versionRow(id, &vs[i], canEdit))
	}
	if n := nextBefore(vs, more); n > 0 {
		vm.OlderURL = "/tasks/" + id + "/versions?before=" + strconv.Itoa(n)
	}
	s.render(c, http.StatusOK, views.TaskVersionsPage(vm))
}

// showTaskVersion shows one version and what changed from ?with= (the
// version before it when absent).
func (s *server) showTaskVersion(c *gin.Context) {
	ctx := c.Request.Context()
	id := c.Param("id")
	n, err := versionParam(c)
	if err != nil {
		s.tasksError(c, err)
		return
	}
	t, err := s.m.Tasks().Get(ctx, id)
	if err != nil {
		s.tasksError(c, err)
		return
	}
	v, err := s.m.Tasks().Version(ctx, id, n)
	if err != nil {
		s.tasksError(c, err)
		return
	}
	canEdit := currentUser(c).Can(t.ProjectID, master.ActEdit)
	vm := views.TaskVersionVM{Layout: s.layout(c, tr(c, "TaskVersionHeading", "N", strconv.Itoa(n), "Title", t.Title), "tasks"),
		ID: id, Title: t.Title, Version: versionRow(id, v, canEdit)}
	from := n - 1
	w := c.Query("with")
	if w != "" {
		if from, err = strconv.Atoi(w); err != nil || from < 1 {
			s.tasksError(c, master.Errorf(master.KindInvalid, "with must be a version number"))
			return
		}
	}
	if from >= 1 && from != n {
		changes, err := s.m.Tasks().Diff(ctx, id, from, n)
		switch {
		case w == "" && master.KindOf(err) == master.KindNotFound:
			// The version before is no longer kept (this one is, for a
			// run that ran it): the version alone.
		case err != nil:
			s.tasksError(c, err)
			return
		default:
			vm.From = from
			for _, ch := range changes {
				vm.Changes = append(vm.Changes, views.FieldChangeRow{Field: ch.Field, From: ch.From, To: ch.To, Secret: ch.Secret})
			}
		}
	}
	js, err := json.MarshalIndent(v.Definition, "", "  ")
	if err != nil {
		s.serverError(c, err)
		return
	}
	vm.Definition = string(js)
	s.render(c, http.StatusOK, views.TaskVersionPage(vm))
}

// restoreTaskVersion makes a version the task's definition again and goes
// back to the task with what happened.
func (s *server) restoreTaskVersion(c *gin.Context) {
	id := c.Param("id")
	n, err := versionParam(c)
	if err != nil {
		s.tasksError(c, err)
		return
	}
	t, err := s.m.Tasks().Restore(c.Request.Context(), id, n, "")
	if k := master.KindOf(err); k == master.KindForbidden || k == master.KindNotFound {
		s.tasksError(c, err)
		return
	}
	if err != nil {
		s.setFlash(c, false, refusal(c, err))
		c.Redirect(http.StatusSeeOther, fmt.Sprintf("/tasks/%s/versions", url.PathEscape(id)))
		return
	}
	s.log.Info("task version restored", "task", id, "version", n, "now", t.Version, "user", currentUser(c).Name)
	s.setFlash(c, true, tr(c, "FlashTaskRestored", "N", strconv.Itoa(n), "Now", strconv.Itoa(t.Version)))
	c.Redirect(http.StatusSeeOther, "/tasks/"+url.PathEscape(id))
}
