package handlers

import (
	"context"
	"net/http"
	"strconv"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/schedulemaster-go/schedulemaster/master"
	"github.com/schedulemaster-go/schedulemaster/protocol"
)

// apiRun is a run in the open API (SPEC section 7). A run in progress has
// no end yet: ended_at and duration_ms are null. In a list, output holds at
// most master.OutputPreviewChars characters of the output's start, and
// output_truncated says there is more (GET /api/v1/runs/{id} has it all).
type apiRun struct {
	ID          string     `json:"id"`
	TaskID      string     `json:"task_id"`
	Node        string     `json:"node"`
	ScheduledAt time.Time  `json:"scheduled_at"`
	StartedAt   time.Time  `json:"started_at"`
	EndedAt     *time.Time `json:"ended_at"`
	DurationMS  *int64     `json:"duration_ms"`
	Result      string     `json:"result"`
	Attempt     int        `json:"attempt"`
	HTTPStatus  int        `json:"http_status"`
	ExitCode    *int       `json:"exit_code"`
	Output      string     `json:"output"`
	// OutputTruncated: output is a list's preview of a longer output.
	OutputTruncated bool `json:"output_truncated,omitempty"`
	Manual          bool `json:"manual"`
	// BinaryOutput: the output held NUL or invalid UTF-8, shown as U+FFFD.
	BinaryOutput bool `json:"binary_output"`
	// DelayedID names the delayed task of a run of one (task_id holds it too).
	DelayedID string `json:"delayed_id,omitempty"`
	// Covers is, for a catch-up run (misfire policy run_once), how many
	// missed fires it stands for; absent for any other run.
	Covers int `json:"covers,omitempty"`
	// TaskVersion is the version of the task's definition the run ran
	// (GET /api/v1/tasks/{id}/versions/{n}); absent when unknown.
	TaskVersion int `json:"task_version,omitempty"`
}

// toAPIRun shows a run as the API does: its output (or a list's preview of
// it), and no end while it is in progress.
func toAPIRun(r *master.Run) apiRun {
	a := apiRun{ID: r.ID, TaskID: r.TaskID, Node: r.Node, ScheduledAt: r.ScheduledAt.UTC(), StartedAt: r.StartedAt.UTC(),
		Result: r.Result, Attempt: r.Attempt, HTTPStatus: r.HTTPStatus, ExitCode: r.ExitCode, Output: r.Output,
		OutputTruncated: r.OutputTruncated, Manual: r.Manual, BinaryOutput: r.BinaryOutput, DelayedID: r.DelayedID, Covers: r.Covers,
		TaskVersion: r.TaskVersion}
	if protocol.Result(r.Result).Ended() {
		// A run in progress is stored with its start as its end until its
		// final report comes: that is no end.
		ended, ms := r.EndedAt.UTC(), r.DurationMS
		a.EndedAt, a.DurationMS = &ended, &ms
	}
	return a
}

// pageParams reads ?limit= and ?offset= (limit 1-500, default 50).
func pageParams(c *gin.Context) (limit, offset int, err error) {
	limit, offset = 50, 0
	if v := c.Query("limit"); v != "" {
		if limit, err = strconv.Atoi(v); err != nil || limit < 1 || limit > 500 {
			return 0, 0, master.Errorf(master.KindInvalid, "limit must be a number from 1 to 500")
		}
	}
	if v := c.Query("offset"); v != "" {
		if offset, err = strconv.Atoi(v); err != nil || offset < 0 {
			return 0, 0, master.Errorf(master.KindInvalid, "offset must be a number >= 0")
		}
	}
	return limit, offset, nil
}

// afterParam reads the optional ?after= cursor of a keyset page.
func afterParam(c *gin.Context) (*master.Cursor, error) {
	v := c.Query("after")
	if v == "" {
		return nil, nil
	}
	cur, err := master.ParseCursor(v)
	if err != nil {
		return nil, err
	}
	return &cur, nil
}

// pageAnswer is a list's answer: its items, the total and, when the page
// is full, "next": the ?after= cursor of the following page, made from the
// last item's sort time and id (key).
func pageAnswer[T any](items []T, total, limit int, key func(T) (time.Time, string)) gin.H {
	out := gin.H{"items": items, "total": total}
	if total == master.ListCountCap {
		// Counting stopped there: more match.
		out["total_capped"] = true
	}
	if n := len(items); n > 0 && n >= limit {
		at, id := key(items[n-1])
		out["next"] = master.Cursor{At: at, ID: id}.Encode()
	}
	return out
}

// taskFilter reads the task list filters shared by the API and the console.
func taskFilter(c *gin.Context) (master.TaskFilter, error) {
	limit, offset, err := pageParams(c)
	if err != nil {
		return master.TaskFilter{}, err
	}
	f := master.TaskFilter{Title: c.Query("title"), Node: c.Query("node"), Limit: limit, Offset: offset}
	if f.After, err = afterParam(c); err != nil {
		return f, err
	}
	if len(f.Title) > 200 || len(f.Node) > 64 {
		return f, master.Errorf(master.KindInvalid, "title or node filter too long")
	}
	if v := c.Query("status"); v != "" {
		st, err := strconv.Atoi(v)
		if err != nil || st < 0 || st > 2 {
			return f, master.Errorf(master.KindInvalid, "status must be 0 (stopped), 1 (running) or 2 (paused)")
		}
		ts := master.TaskStatus(st)
		f.Status = &ts
	}
	return f, nil
}

// apiListTasks answers GET /api/v1/tasks?status=&title=&node=&limit=&offset=.
func (s *server) apiListTasks(c *gin.Context) {
	f, err := taskFilter(c)
	if err != nil {
		s.apiError(c, err)
		return
	}
	if f.Projects, err = s.apiProjectFilter(c); err != nil {
		s.apiError(c, err)
		return
	}
	tasks, total, err := s.m.Tasks().List(c.Request.Context(), f)
	if err != nil {
		s.serverError(c, err)
		return
	}
	items := make([]master.Task, len(tasks))
	ptrs := make([]*master.Task, len(tasks))
	for i := range tasks {
		items[i] = master.MaskTask(tasks[i]) // secrets are never shown back
		ptrs[i] = &items[i]
	}
	if err := s.tasksHealth(c.Request.Context(), ptrs); err != nil {
		s.serverError(c, err)
		return
	}
	c.JSON(http.StatusOK, pageAnswer(items, total, f.Limit, func(t master.Task) (time.Time, string) { return t.CreatedAt, t.ID }))
}

// apiGetTask answers GET /api/v1/tasks/{id}.
func (s *server) apiGetTask(c *gin.Context) {
	t, err := s.m.Tasks().Get(c.Request.Context(), c.Param("id"))
	if err != nil {
		s.apiError(c, err)
		return
	}
	masked := master.MaskTask(*t)
	if err := s.tasksHealth(c.Request.Context(), []*master.Task{&masked}); err != nil {
		s.serverError(c, err)
		return
	}
	c.Header("ETag", taskETag(t.Version))
	c.JSON(http.StatusOK, masked)
}

// apiCreateTask answers POST /api/v1/tasks with the new, stopped task.
func (s *server) apiCreateTask(c *gin.Context) {
	var in master.TaskInput
	if !bindJSON(c, &in) {
		return
	}
	t, err := s.m.Tasks().Create(c.Request.Context(), in, currentUser(c).Name)
	if err != nil {
		s.apiError(c, err)
		return
	}
	c.JSON(http.StatusCreated, master.MaskTask(*t))
}

// apiUpdateTask answers PUT /api/v1/tasks/{id}; a running or paused task is
// edited in place (master.Tasks.Update). If-Match (or "version") names the
// version the edit started from: a newer one answers 409.
func (s *server) apiUpdateTask(c *gin.Context) {
	var in master.TaskInput
	if !bindJSON(c, &in) {
		return
	}
	if in.ID != "" && in.ID != c.Param("id") {
		s.apiError(c, protocol.FieldErrors{"id": "does not match the task in the path"})
		return
	}
	if err := editVersion(c, &in); err != nil {
		s.apiError(c, err)
		return
	}
	t, err := s.m.Tasks().Update(c.Request.Context(), c.Param("id"), in)
	if err != nil {
		s.apiError(c, err)
		return
	}
	c.Header("ETag", taskETag(t.Version))
	c.JSON(http.StatusOK, master.MaskTask(*t))
}

// apiDeleteTask answers DELETE /api/v1/tasks/{id} with 204.
func (s *server) apiDeleteTask(c *gin.Context) {
	if err := s.m.Tasks().Delete(c.Request.Context(), c.Param("id")); err != nil {
		s.apiError(c, err)
		return
	}
	c.Status(http.StatusNoContent)
}

func (s *server) apiTaskAction(c *gin.Context, verb string, do func(context.Context, string) (*master.Task, error)) {
	id := c.Param("id")
	t, err := do(c.Request.Context(), id)
	if err != nil {
		s.log.Warn("task action failed", "action", verb, "task", id, "user", currentUser(c).Name, "err", err)
		s.apiError(c, err)
		return
	}
	s.log.Info("task action", "action", verb, "task", id, "user", currentUser(c).Name)
	c.JSON(http.StatusOK, master.MaskTask(*t))
}

// apiStartTask answers POST /api/v1/tasks/{id}/start.
func (s *server) apiStartTask(c *gin.Context) { s.apiTaskAction(c, "start", s.m.Tasks().Start) }

// apiStopTask answers POST /api/v1/tasks/{id}/stop.
func (s *server) apiStopTask(c *gin.Context) { s.apiTaskAction(c, "stop", s.m.Tasks().Stop) }

// apiPauseTask answers POST /api/v1/tasks/{id}/pause.
func (s *server) apiPauseTask(c *gin.Context) { s.apiTaskAction(c, "pause", s.m.Tasks().Pause) }

// apiResumeTask answers POST /api/v1/tasks/{id}/resume.
func (s *server) apiResumeTask(c *gin.Context) { s.apiTaskAction(c, "resume", s.m.Tasks().Resume) }

// apiRunTask answers POST /api/v1/tasks/{id}/run: one run now, on one executor.
func (s *server) apiRunTask(c *gin.Context) {
	t, node, err := s.m.Tasks().Run(c.Request.Context(), c.Param("id"))
	if err != nil {
		s.apiError(c, err)
		return
	}
	c.Header("X-SM-Node", node)
	c.JSON(http.StatusOK, master.MaskTask(*t))
}

// apiListRuns answers GET /api/v1/tasks/{id}/runs?result=&limit=&offset=.
func (s *server) apiListRuns(c *gin.Context) {
	limit, offset, err := pageParams(c)
	if err != nil {
		s.apiError(c, err)
		return
	}
	result, err := resultParam(c)
	if err != nil {
		s.apiError(c, err)
		return
	}
	runs, total, err := s.m.Reads().SearchRuns(c.Request.Context(), master.RunFilter{TaskID: c.Param("id"), Result: result,
		Limit: limit, Offset: offset, Preview: true})
	if err != nil {
		s.apiError(c, err)
		return
	}
	items := make([]apiRun, len(runs))
	for i := range runs {
		items[i] = toAPIRun(&runs[i])
	}
	out := gin.H{"items": items, "total": total}
	if total == master.ListCountCap {
		out["total_capped"] = true
	}
	c.JSON(http.StatusOK, out)
}

// apiGetRun answers GET /api/v1/runs/{id}.
func (s *server) apiGetRun(c *gin.Context) {
	r, err := s.m.Runs().Get(c.Request.Context(), c.Param("id"))
	if err != nil {
		s.apiError(c, err)
		return
	}
	c.JSON(http.StatusOK, toAPIRun(r))
}
