package handlers

import (
	"errors"
	"net/http"

	"github.com/gin-gonic/gin"

	"github.com/schedulemaster-go/schedulemaster/protocol"
	"github.com/schedulemaster-go/schedulemaster/worker"
)

// workerTaskError maps a task operation's error to a status.
func (wa *workerAPI) workerTaskError(c *gin.Context, err error) {
	var fe protocol.FieldErrors
	status := http.StatusInternalServerError
	switch {
	case errors.As(err, &fe), errors.Is(err, protocol.ErrInvalid):
		status = http.StatusBadRequest
	case errors.Is(err, worker.ErrShellRefused):
		status = http.StatusForbidden
	case errors.Is(err, worker.ErrUnknownTask):
		status = http.StatusNotFound
	case errors.Is(err, worker.ErrNotScheduling):
		status = http.StatusConflict
	}
	if status == http.StatusInternalServerError {
		wa.log.Error("task operation", "path", c.Request.URL.Path, "err", err)
	}
	c.JSON(status, protocol.ErrorResponse{Error: err.Error()})
}

// startTask schedules the task in the body (idempotent).
func (wa *workerAPI) startTask(c *gin.Context) {
	var spec protocol.TaskSpec
	if !bindWorkerJSON(c, &spec, protocol.MaxTaskBody) {
		return
	}
	if err := wa.w.StartTask(spec); err != nil {
		wa.workerTaskError(c, err)
		return
	}
	c.JSON(http.StatusOK, gin.H{"id": spec.ID, "status": "started"})
}

// stopTask removes a task's job.
func (wa *workerAPI) stopTask(c *gin.Context) {
	var ref protocol.TaskRef
	if !bindWorkerJSON(c, &ref, protocol.MaxSmallBody) {
		return
	}
	wa.w.StopTask(ref.ID)
	c.JSON(http.StatusOK, gin.H{"id": ref.ID, "status": "stopped"})
}

// pauseTask keeps a task's schedule and skips its runs.
func (wa *workerAPI) pauseTask(c *gin.Context) {
	var ref protocol.TaskRef
	if !bindWorkerJSON(c, &ref, protocol.MaxSmallBody) {
		return
	}
	if err := wa.w.PauseTask(ref.ID); err != nil {
		wa.workerTaskError(c, err)
		return
	}
	c.JSON(http.StatusOK, gin.H{"id": ref.ID, "status": "paused"})
}

// resumeTask lets a paused task run again.
func (wa *workerAPI) resumeTask(c *gin.Context) {
	var ref protocol.TaskRef
	if !bindWorkerJSON(c, &ref, protocol.MaxSmallBody) {
		return
	}
	if err := wa.w.ResumeTask(ref.ID); err != nil {
		wa.workerTaskError(c, err)
		return
	}
	c.JSON(http.StatusOK, gin.H{"id": ref.ID, "status": "running"})
}

// runTaskOnce runs a task now.
func (wa *workerAPI) runTaskOnce(c *gin.Context) {
	var req protocol.RunOnceRequest
	if !bindWorkerJSON(c, &req, protocol.MaxTaskBody) {
		return
	}
	if err := wa.w.RunOnce(req); err != nil {
		wa.workerTaskError(c, err)
		return
	}
	c.JSON(http.StatusAccepted, gin.H{"id": req.ID, "status": "started"})
}
