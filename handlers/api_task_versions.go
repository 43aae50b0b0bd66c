package handlers

import (
	"net/http"
	"strconv"
	"strings"

	"github.com/gin-gonic/gin"

	"github.com/schedulemaster-go/schedulemaster/master"
	"github.com/schedulemaster-go/schedulemaster/protocol"
)

// taskETag is a task version as an entity tag: "3".
func taskETag(version int) string { return `"` + strconv.Itoa(version) + `"` }

// ifMatchVersion reads the version an edit started from out of If-Match
// ("3", W/"3" or 3); 0 when the header is absent.
func ifMatchVersion(c *gin.Context) (int, error) {
	v := strings.TrimSpace(c.GetHeader("If-Match"))
	if v == "" {
		return 0, nil
	}
	v = strings.Trim(strings.TrimPrefix(v, "W/"), `"`)
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		return 0, master.Errorf(master.KindInvalid, "If-Match must be the task's version as its ETag gives it (\"3\")")
	}
	return n, nil
}

// versionParam reads :n, a version number.
func versionParam(c *gin.Context) (int, error) {
	n, err := strconv.Atoi(c.Param("n"))
	if err != nil || n < 1 {
		return 0, master.Errorf(master.KindNotFound, "no such version: a version is a number from 1")
	}
	return n, nil
}

// apiTaskVersions is a page of a task's versions; next_before, when set,
// is the ?before= of the next (older) page.
type apiTaskVersions struct {
	Items      []master.TaskVersion `json:"items"`
	NextBefore int                  `json:"next_before,omitempty"`
}

// apiListTaskVersions answers GET /api/v1/tasks/{id}/versions: the kept
// versions, newest first, without their definitions; ?limit= (1-500,
// default 100) and ?before= (a version: those older) page them.
func (s *server) apiListTaskVersions(c *gin.Context) {
	before, limit, err := versionsPageParams(c)
	if err != nil {
		s.apiError(c, err)
		return
	}
	vs, more, err := s.m.Tasks().Versions(c.Request.Context(), c.Param("id"), before, limit)
	if err != nil {
		s.apiError(c, err)
		return
	}
	c.JSON(http.StatusOK, apiTaskVersions{Items: vs, NextBefore: nextBefore(vs, more)})
}

// versionsPageParams reads ?before= and ?limit= of a list of versions; the
// engine checks their ranges.
func versionsPageParams(c *gin.Context) (before, limit int, err error) {
	for _, p := range []struct {
		name string
		dst  *int
	}{{"before", &before}, {"limit", &limit}} {
		if v := c.Query(p.name); v != "" {
			if *p.dst, err = strconv.Atoi(v); err != nil || *p.dst < 1 {
				return 0, 0, master.Errorf(master.KindInvalid, "%s must be a number from 1", p.name)
			}
		}
	}
	return before, limit, nil
}

// nextBefore is the ?before= of the page after vs, 0 when it is the last.
func nextBefore(vs []master.TaskVersion, more bool) int {
	if !more || len(vs) == 0 {
		return 0
	}
	return vs[len(vs)-1].Version
}

// apiGetTaskVersion answers GET /api/v1/tasks/{id}/versions/{n}: one
// version with its definition, secrets masked.
func (s *server) apiGetTaskVersion(c *gin.Context) {
	n, err := versionParam(c)
	if err != nil {
		s.apiError(c, err)
		return
	}
	v, err := s.m.Tasks().Version(c.Request.Context(), c.Param("id"), n)
	if err != nil {
		s.apiError(c, err)
		return
	}
	c.JSON(http.StatusOK, v)
}

// restoreBody is the optional body of a restore: why.
type restoreBody struct {
	Note string `json:"note"`
}

// apiRestoreTaskVersion answers POST /api/v1/tasks/{id}/versions/{n}/restore:
// the version becomes the definition again, as a new version (a running
// task switches in place), and the answer is the task.
func (s *server) apiRestoreTaskVersion(c *gin.Context) {
	n, err := versionParam(c)
	if err != nil {
		s.apiError(c, err)
		return
	}
	var b restoreBody
	if c.Request.ContentLength != 0 && !bindJSON(c, &b) {
		return
	}
	t, err := s.m.Tasks().Restore(c.Request.Context(), c.Param("id"), n, b.Note)
	if err != nil {
		s.apiError(c, err)
		return
	}
	s.log.Info("task version restored", "task", t.ID, "version", n, "now", t.Version, "user", currentUser(c).Name)
	c.Header("ETag", taskETag(t.Version))
	c.JSON(http.StatusOK, master.MaskTask(*t))
}

// editVersion merges If-Match into an edit's "version": either gives it;
// both must agree.
func editVersion(c *gin.Context, in *master.TaskInput) error {
	h, err := ifMatchVersion(c)
	if err != nil {
		return err
	}
	switch {
	case h == 0:
	case in.Version != 0 && in.Version != h:
		return protocol.FieldErrors{"version": "differs from If-Match: send one, or the same in both"}
	default:
		in.Version = h
	}
	return nil
}
