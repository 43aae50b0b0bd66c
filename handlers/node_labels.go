package handlers

import (
	"errors"
	"net/http"

	"github.com/gin-gonic/gin"

	"github.com/schedulemaster-go/schedulemaster/handlers/form"
	"github.com/schedulemaster-go/schedulemaster/protocol"
	"github.com/schedulemaster-go/schedulemaster/views"
)

// apiNodeLabelsBody is the body of PUT /api/v1/nodes/{name}/labels.
type apiNodeLabelsBody struct {
	Labels protocol.Labels `json:"labels"`
}

// apiSetNodeLabels answers PUT /api/v1/nodes/{name}/labels: the node's admin
// labels become the body's ({} removes them), which win over the labels its
// worker declares; the answer is the node.
func (s *server) apiSetNodeLabels(c *gin.Context) {
	var b apiNodeLabelsBody
	if !bindJSON(c, &b) {
		return
	}
	if b.Labels == nil {
		s.apiError(c, protocol.FieldErrors{"labels": `is required: an object of "key": "value" pairs; {} removes the admin labels`})
		return
	}
	name := c.Param("name")
	n, err := s.m.Nodes().SetLabels(c.Request.Context(), name, b.Labels)
	if err != nil {
		s.apiError(c, err)
		return
	}
	s.log.Info("node labels set", "node", name, "labels", b.Labels.String(), "user", currentUser(c).Name)
	c.JSON(http.StatusOK, toAPINode(n))
}

// labelsFit refuses (400, changing nothing) labels that break the label
// rules before a node is created or edited, so that a create or edit never
// half succeeds; true when they are absent or valid.
func (s *server) labelsFit(c *gin.Context, l protocol.Labels) bool {
	if err := l.Validate(); err != nil {
		s.apiError(c, protocol.FieldErrors{"labels": err.Error()})
		return false
	}
	return true
}

// setNodeLabels saves the node page's admin labels form ("key=value,
// key=value"; empty removes them), or shows the page again with the error
// under the field and what was typed.
func (s *server) setNodeLabels(c *gin.Context) {
	name := c.Param("name")
	typed := c.PostForm("labels")
	labels, msg := form.Labels(typed)
	if msg == "" {
		_, err := s.m.Nodes().SetLabels(c.Request.Context(), name, labels)
		if err == nil {
			s.log.Info("node labels set", "node", name, "labels", labels.String(), "user", currentUser(c).Name)
			done := tr(c, "FlashLabelsRemoved", "Name", name)
			if len(labels) > 0 {
				done = tr(c, "FlashLabelsSet", "Name", name, "Labels", labels.String())
			}
			s.setFlash(c, true, done)
			c.Redirect(http.StatusSeeOther, nodePath(name))
			return
		}
		var fe protocol.FieldErrors
		switch st := errorStatus(err); {
		case errors.As(err, &fe):
			msg = fe["labels"]
		case st == http.StatusNotFound:
			s.tasksError(c, err)
			return
		case st != 0: // a master: said at the top of its page
			s.renderNodePage(c, st, name, func(vm *views.NodePageVM) {
				vm.Flash = &views.Flash{Message: refusal(c, err)}
			})
			return
		default:
			s.serverError(c, err)
			return
		}
	}
	s.renderNodePage(c, http.StatusUnprocessableEntity, name, func(vm *views.NodePageVM) {
		vm.LabelsForm, vm.LabelsError = typed, msg
	})
}
