package handlers

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"sort"
	"strings"
	"time"

	"github.com/gin-gonic/gin"

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
	d, created, err := s.m.CreateDelayed(c.Request.Context(), in, currentUser(c).Name)
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
	vm := views.DelayedFormVM{Layout: s.layout(c, "New delayed task", "delayed"), Retries: "0", ContentType: master.ContentJSON}
	s.renderDelayedForm(c, http.StatusOK, vm)
}

// createDelayed creates a delayed task from the console form and shows it,
// or shows the form again with inline errors and what was typed.
func (s *server) createDelayed(c *gin.Context) {
	vm := views.DelayedFormVM{
		Layout: s.layout(c, "New delayed task", "delayed"), SourceApp: c.PostForm("source_app"), Topic: c.PostForm("topic"),
		ContentKey: c.PostForm("content_key"), Delay: strings.TrimSpace(c.PostForm("delay")), At: strings.TrimSpace(c.PostForm("at")),
		NotifyURL: c.PostForm("notify_url"), ContentType: strings.TrimSpace(c.PostForm("content_type")),
		NotifyBody: c.PostForm("notify_body"), Retries: strings.TrimSpace(c.PostForm("retries")), Keepers: c.PostForm("keepers"),
	}
	in := master.DelayedInput{
		SourceApp: vm.SourceApp, Topic: vm.Topic, ContentKey: vm.ContentKey, At: formTimeUTC(vm.At),
		NotifyURL: vm.NotifyURL, NotifyBody: vm.NotifyBody, ContentType: vm.ContentType,
		Executors: c.PostFormArray("executors"), Keepers: splitList(vm.Keepers),
	}
	if vm.Delay != "" {
		in.Delay, _ = json.Marshal(vm.Delay)
	}
	if vm.Retries != "" {
		if err := json.Unmarshal([]byte(vm.Retries), &in.Retries); err != nil {
			in.Retries = -1 // refused by the engine with the other fields' errors, nothing made
		}
	}
	d, created, err := s.m.CreateDelayed(c.Request.Context(), in, currentUser(c).Name)
	if err == nil {
		msg := "Delayed task created: it is sent at " + utcText(d.DueAt) + "."
		if !created {
			msg = "A delayed task with this source app, topic and content key is " + d.Status + " already: here it is, unchanged."
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
		vm.FormError = master.Message(err)
	}
	if len(fe) > 0 {
		vm.Errors = fe
	}
	s.renderDelayedForm(c, status, vm)
}

// formTimeUTC turns a datetime-local value (read as UTC) into RFC 3339;
// anything else is passed on as typed, for the engine to name.
func formTimeUTC(v string) string {
	for _, layout := range []string{"2006-01-02T15:04:05", "2006-01-02T15:04"} {
		if t, err := time.ParseInLocation(layout, v, time.UTC); err == nil {
			return t.Format(time.RFC3339)
		}
	}
	return v
}

// renderDelayedForm fills the executor choices and shows the form.
func (s *server) renderDelayedForm(c *gin.Context, status int, vm views.DelayedFormVM) {
	nodes, err := s.m.ListNodes(c.Request.Context())
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
	known := map[string]bool{}
	for _, f := range views.DelayedFormFields {
		known[f] = true
	}
	for k, v := range vm.Errors {
		if !known[k] {
			vm.OtherErrors = append(vm.OtherErrors, k+": "+v)
		}
	}
	sort.Strings(vm.OtherErrors)
	s.render(c, status, views.DelayedFormPage(vm))
}
