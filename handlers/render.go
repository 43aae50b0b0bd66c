package handlers

import (
	"bytes"
	"errors"
	"net/http"
	"net/url"
	"strconv"
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

// serverError is the one path for unexpected failures: it logs and answers
// 500, or 503 when the database did not answer within the request's deadline.
func (s *server) serverError(c *gin.Context, err error) {
	// An engine refusal that reached here is the caller's, not the
	// master's: it answers its own status and logs nothing.
	if st := errorStatus(err); st != 0 && st != http.StatusServiceUnavailable {
		if wantsJSON(c) {
			s.apiError(c, err)
		} else {
			s.errorPage(c, st, master.Message(err))
		}
		return
	}
	if timedOut(c, err) {
		s.unavailable(c, err)
		return
	}
	s.log.Error("server error", "method", c.Request.Method, "path", c.Request.URL.Path, "err", err)
	if wantsJSON(c) {
		c.AbortWithStatusJSON(http.StatusInternalServerError, protocol.ErrorResponse{Error: "internal error; see the master's log"})
		return
	}
	c.Data(http.StatusInternalServerError, "text/plain; charset=utf-8", []byte("internal error; see the master's log"))
	c.Abort()
}

// errorStatus maps the kind of an engine refusal to an HTTP status; 0 means
// unexpected.
func errorStatus(err error) int {
	switch master.KindOf(err) {
	case master.KindInvalid:
		return http.StatusBadRequest
	case master.KindNotFound:
		return http.StatusNotFound
	case master.KindDuplicate, master.KindState:
		return http.StatusConflict
	case master.KindWorker:
		return http.StatusBadGateway
	case master.KindUnauthorized:
		return http.StatusUnauthorized
	case master.KindForbidden:
		return http.StatusForbidden
	case master.KindLimited, master.KindBusy:
		return http.StatusTooManyRequests
	case master.KindTooLarge:
		return http.StatusRequestEntityTooLarge
	case master.KindUnavailable:
		return http.StatusServiceUnavailable
	case master.KindTooEarly:
		return http.StatusTooEarly
	}
	return 0
}

// apiError answers an API request with {"error": ...} and the mapped status.
// The body has the refusal's sentence; the log keeps its cause.
func (s *server) apiError(c *gin.Context, err error) {
	status := errorStatus(err)
	if status == 0 || status == http.StatusServiceUnavailable {
		s.serverError(c, err)
		return
	}
	if status == http.StatusBadGateway {
		s.log.Warn("worker call failed", "method", c.Request.Method, "path", c.Request.URL.Path, "err", err)
	}
	if wait := master.RetryAfter(err); wait > 0 {
		c.Header("Retry-After", strconv.Itoa(int(wait.Seconds())+1))
	}
	body := gin.H{"error": master.Message(err)}
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
	s.errorPage(c, http.StatusNotFound, tr(c, "ErrNoPage", "Path", c.Request.URL.Path))
}

func (s *server) errorPage(c *gin.Context, status int, msg string) {
	back, label := backLink(c)
	msg = views.Refusal(c.Request.Context(), msg)
	s.render(c, status, views.ErrorPage(views.ErrorVM{Layout: s.layout(c, tr(c, "ErrorTitle"), ""), Status: status, Message: msg,
		BackURL: back, BackLabel: label}))
	c.Abort()
}

// consoleSections name the console's pages by their first path segment:
// the message of "Back to ...".
var consoleSections = map[string]string{
	"dashboard": "BackToDashboard", "nodes": "BackToNodes", "tasks": "BackToTasks", "runs": "BackToTasks", "events": "BackToEvents",
	"users": "BackToUsers", "settings": "BackToSettings", "tokens": "BackToTokens", "account": "BackToAccount",
	"pools": "BackToPools", "workflows": "BackToWorkflows", "connections": "BackToConnections",
}

// backLink is where an error page leads back to: the page the user came from
// (a same-origin Referer, path only), else the section of the refused page,
// else the dashboard.
func backLink(c *gin.Context) (string, string) {
	here := c.Request.URL.Path
	if ref, err := url.Parse(c.GetHeader("Referer")); err == nil && ref.Host == c.Request.Host &&
		strings.HasPrefix(ref.Path, "/") && !strings.HasPrefix(ref.Path, "//") && ref.Path != here && ref.Path != "/login" {
		back := ref.EscapedPath()
		if ref.RawQuery != "" {
			back += "?" + ref.RawQuery
		}
		return back, tr(c, sectionName(ref.Path))
	}
	seg, _, _ := strings.Cut(strings.TrimPrefix(here, "/"), "/")
	if name, ok := consoleSections[seg]; ok && seg != "runs" && here != "/"+seg {
		return "/" + seg, tr(c, name)
	}
	return "/dashboard", tr(c, "BackToDashboard")
}

// sectionName is the "Back to" message of the console section of a path.
func sectionName(path string) string {
	seg, _, _ := strings.Cut(strings.TrimPrefix(path, "/"), "/")
	if name, ok := consoleSections[seg]; ok {
		return name
	}
	return "BackToConsole"
}

// fail answers a refused or failed request: the API's JSON error, else an
// error page with the refusal's status and sentence; anything unexpected
// goes the one server-error way.
func (s *server) fail(c *gin.Context, err error) {
	if wantsJSON(c) {
		s.apiError(c, err)
		return
	}
	status := errorStatus(err)
	if status == 0 || status == http.StatusServiceUnavailable {
		s.serverError(c, err)
		return
	}
	if isHX(c) {
		c.Data(status, "text/plain; charset=utf-8", []byte(refusal(c, err)))
		c.Abort()
		return
	}
	s.errorPage(c, status, refusal(c, err))
}
