package handlers

import (
	"bytes"
	"errors"
	"net/http"
	"strings"

	"github.com/a-h/templ"
	"github.com/gin-gonic/gin"

	"github.com/schedulemaster-go/schedulemaster/master"
	"github.com/schedulemaster-go/schedulemaster/protocol"
	"github.com/schedulemaster-go/schedulemaster/views"
)

// render renders a component into a buffer first, so a rendering error becomes
// a clean 500 instead of a half-written page.
func (s *server) render(c *gin.Context, status int, comp templ.Component) {
	var buf bytes.Buffer
	if err := comp.Render(c.Request.Context(), &buf); err != nil {
		s.serverError(c, err)
		return
	}
	c.Data(status, "text/html; charset=utf-8", buf.Bytes())
}

// isHX reports whether htmx sent the request (it wants a fragment).
func isHX(c *gin.Context) bool { return c.GetHeader("HX-Request") == "true" }

// wantsJSON reports whether the request came through an API (open or worker).
func wantsJSON(c *gin.Context) bool {
	return strings.HasPrefix(c.Request.URL.Path, "/api/")
}

// serverError is the one path for unexpected failures: it logs and answers 500.
func (s *server) serverError(c *gin.Context, err error) {
	s.log.Error("server error", "method", c.Request.Method, "path", c.Request.URL.Path, "err", err)
	if wantsJSON(c) {
		c.AbortWithStatusJSON(http.StatusInternalServerError, protocol.ErrorResponse{Error: "internal error; see the master's log"})
		return
	}
	c.Data(http.StatusInternalServerError, "text/plain; charset=utf-8", []byte("internal error; see the master's log"))
	c.Abort()
}

// errorStatus maps engine errors to HTTP statuses; 0 means unexpected.
func errorStatus(err error) int {
	var fe protocol.FieldErrors
	switch {
	case errors.As(err, &fe), errors.Is(err, master.ErrInvalid), errors.Is(err, protocol.ErrInvalid):
		return http.StatusBadRequest
	case errors.Is(err, master.ErrNotFound):
		return http.StatusNotFound
	case errors.Is(err, master.ErrDuplicate), errors.Is(err, master.ErrState):
		return http.StatusConflict
	case errors.Is(err, master.ErrWorker):
		return http.StatusBadGateway
	case errors.Is(err, master.ErrUnauthorized):
		return http.StatusUnauthorized
	case errors.Is(err, master.ErrForbidden):
		return http.StatusForbidden
	}
	return 0
}

// userMessage strips the package prefixes of sentinel errors for display.
func userMessage(err error) string {
	msg := err.Error()
	for _, p := range []string{"master: not allowed in this state: ", "master: worker call failed: ", "master: not found: ",
		"master: already exists: ", "master: invalid input: ", "master: unauthorized: ", "master: forbidden: "} {
		if len(msg) >= len(p) && msg[:len(p)] == p {
			return msg[len(p):]
		}
	}
	return msg
}

// apiError answers an API request with {"error": ...} and the mapped status.
func (s *server) apiError(c *gin.Context, err error) {
	status := errorStatus(err)
	if status == 0 {
		s.serverError(c, err)
		return
	}
	body := gin.H{"error": userMessage(err)}
	var fe protocol.FieldErrors
	if errors.As(err, &fe) {
		body["fields"] = fe
	}
	c.AbortWithStatusJSON(status, body)
}

func (s *server) notFound(c *gin.Context) {
	if wantsJSON(c) || c.Request.Method != http.MethodGet {
		c.JSON(http.StatusNotFound, protocol.ErrorResponse{Error: "no such route"})
		return
	}
	s.errorPage(c, http.StatusNotFound, "There is no page at "+c.Request.URL.Path+".")
}

func (s *server) errorPage(c *gin.Context, status int, msg string) {
	s.render(c, status, views.ErrorPage(views.ErrorVM{Layout: s.layout(c, "Error", ""), Status: status, Message: msg}))
	c.Abort()
}
