package handlers

import (
	"errors"
	"net/http"
	"net/url"
	"sort"

	"github.com/gin-gonic/gin"

	"github.com/schedulemaster-go/schedulemaster/handlers/form"
	"github.com/schedulemaster-go/schedulemaster/master"
	"github.com/schedulemaster-go/schedulemaster/protocol"
	"github.com/schedulemaster-go/schedulemaster/views"
)

// apiCreateDelayed answers POST /api/v1/delayed: 201 with the new task, or
// 200 with the pending one of the same source_app, topic and content_key.
func (s *server) apiCreateDelayed(c *gin.Context) {
	var in master.DelayedInput
	if !bindJSON(c, &in) {
		return
	}
	d, created, err := s.m.Delayed().CreateDelayed(c.Request.Context(), in, currentUser(c).Name)
	if err != nil {
		s.apiError(c, err)
		return
	}
	status := http.StatusOK
	if created {
		status = http.StatusCreated
	}
	s.answerDelayed(c, status, d)
}

// showNewDelayed shows the empty delayed task form.
func (s *server) showNewDelayed(c *gin.Context) {
	vm := views.DelayedFormVM{Layout: s.layout(c, tr(c, "DelayedNew"), "delayed"), DelayedFields: views.DelayedFields{Retries: "0", ContentType: master.ContentJSON}}
	s.renderDelayedForm(c, http.StatusOK, vm)
}

// createDelayed creates a delayed task from the console form and shows it,
// or shows the form again with inline errors and what was typed.
func (s *server) createDelayed(c *gin.Context) {
	fields, in := form.Delayed(postForm(c))
	if p := s.currentProject(c); p != nil {
		in.Project = p.Name
	}
	vm := views.DelayedFormVM{Layout: s.layout(c, tr(c, "DelayedNew"), "delayed"), DelayedFields: fields}
	d, created, err := s.m.Delayed().CreateDelayed(c.Request.Context(), in, currentUser(c).Name)
	if err == nil {
		msg := tr(c, "FlashDelayedCreated", "At", utcText(d.DueAt))
		if !created {
			msg = tr(c, "FlashDelayedExists", "Status", views.DelayedStatusName(c.Request.Context(), d.Status))
		}
		s.setFlash(c, true, msg)
		c.Redirect(http.StatusSeeOther, "/delayed/"+url.PathEscape(d.ID))
		return
	}
	status := http.StatusUnprocessableEntity
	var fe protocol.FieldErrors
	if !errors.As(err, &fe) {
		if status = errorStatus(err); status == 0 {
			s.serverError(c, err)
			return
		}
		vm.FormError = refusal(c, err)
	}
	if len(fe) > 0 {
		vm.Errors = fe
	}
	s.renderDelayedForm(c, status, vm)
}

// renderDelayedForm fills the executor choices and shows the form.
func (s *server) renderDelayedForm(c *gin.Context, status int, vm views.DelayedFormVM) {
	nodes, err := s.m.Nodes().List(c.Request.Context())
	if err != nil {
		s.serverError(c, err)
		return
	}
	checked := map[string]bool{}
	for _, e := range c.PostFormArray("executors") {
		checked[e] = true
	}
	for _, n := range nodes {
		if n.Type == master.TypeWorker {
			vm.Executors = append(vm.Executors, views.NodeOption{Name: n.Name, StatusName: n.Status.String(), Checked: checked[n.Name]})
		}
	}
	for k, v := range vm.Errors {
		if !views.DelayedFormSpec.Knows(k) {
			vm.OtherErrors = append(vm.OtherErrors, k+": "+v)
		}
	}
	sort.Strings(vm.OtherErrors)
	s.render(c, status, views.DelayedFormPage(vm))
}
