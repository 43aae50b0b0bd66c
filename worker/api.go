package worker

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/schedulemaster-go/schedulemaster/protocol"
)

// NewHandler is the worker API, every route listed here: the health probe and
// the handshake are open, the rest need the current secret (header
// sm_secret). Bodies are bounded per route before parsing and decoded
// strictly; every answer, refusals included, is JSON.
func NewHandler(w *Worker, log *slog.Logger) http.Handler {
	a := &api{w: w, log: log}
	mux := http.NewServeMux()
	mux.HandleFunc("GET "+protocol.PathHealth, a.health)
	mux.HandleFunc("POST "+protocol.PathConnect, a.connect)
	mux.HandleFunc("POST "+protocol.PathStartup, a.guard(a.startup))
	mux.HandleFunc("POST "+protocol.PathStartupPart, a.guard(a.startupPart))
	mux.HandleFunc("POST "+protocol.PathShutdown, a.guard(a.shutdown))
	mux.HandleFunc("POST "+protocol.PathTaskStart, a.guard(a.startTask))
	mux.HandleFunc("POST "+protocol.PathTaskStop, a.guard(a.stopTask))
	mux.HandleFunc("POST "+protocol.PathTaskPause, a.guard(a.pauseTask))
	mux.HandleFunc("POST "+protocol.PathTaskResume, a.guard(a.resumeTask))
	mux.HandleFunc("POST "+protocol.PathTaskRunOnce, a.guard(a.runTaskOnce))
	mux.HandleFunc("POST "+protocol.PathTaskRunOnceBatch, a.guard(a.runTaskOnceBatch))
	mux.HandleFunc("POST "+protocol.PathTaskBatch, a.guard(a.taskBatch))
	mux.HandleFunc("POST "+protocol.PathRunOutput, a.guard(a.runOutput))
	mux.HandleFunc("POST "+protocol.PathRunKill, a.guard(a.killRun))
	mux.HandleFunc("POST "+protocol.PathConnectionTest, a.guard(a.testConnection))
	// Prometheus metrics behind the secret; --metrics-listen serves them openly elsewhere.
	mux.HandleFunc("GET /metrics", a.guard(MetricsHandler(w).ServeHTTP))
	// Anything else, a known path with another method included, is a 404.
	mux.HandleFunc("/", func(rw http.ResponseWriter, _ *http.Request) {
		writeJSON(rw, http.StatusNotFound, protocol.ErrorResponse{Error: "no such route"})
	})
	return a.recover(mux)
}

type api struct {
	w   *Worker
	log *slog.Logger
}

// recover answers 500 to a handler's panic and logs it, instead of dropping
// the connection.
func (a *api) recover(next http.Handler) http.Handler {
	return http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		defer func() {
			if v := recover(); v != nil {
				if v == http.ErrAbortHandler {
					panic(v)
				}
				a.log.Error("worker API handler panicked", "path", r.URL.Path, "panic", v)
				rw.WriteHeader(http.StatusInternalServerError)
			}
		}()
		next.ServeHTTP(rw, r)
	})
}

// guard lets a request through only with the current sm_secret, compared in
// constant time. The 401 body says nothing about either secret.
func (a *api) guard(next http.HandlerFunc) http.HandlerFunc {
	return func(rw http.ResponseWriter, r *http.Request) {
		if !a.w.CheckSecret(r.Header.Get(protocol.HeaderSecret)) {
			writeJSON(rw, http.StatusUnauthorized, protocol.ErrorResponse{Error: "unauthorized"})
			return
		}
		next(rw, r)
	}
}

// writeJSON answers status with v as JSON.
func writeJSON(rw http.ResponseWriter, status int, v any) {
	data, err := json.Marshal(v)
	if err != nil {
		status, data = http.StatusInternalServerError, []byte(`{"error":"cannot encode the answer"}`)
	}
	rw.Header().Set("Content-Type", "application/json; charset=utf-8")
	rw.WriteHeader(status)
	_, _ = rw.Write(data)
}

// readJSON decodes a JSON body of at most limit bytes (413 past it, before
// any parsing) with unknown fields refused, answering 400 itself on failure.
func readJSON(rw http.ResponseWriter, r *http.Request, v any, limit int64) bool {
	if r.ContentLength > limit {
		writeJSON(rw, http.StatusRequestEntityTooLarge, protocol.ErrorResponse{Error: "request body too large"})
		return false
	}
	body, err := io.ReadAll(http.MaxBytesReader(rw, r.Body, limit))
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			writeJSON(rw, http.StatusRequestEntityTooLarge, protocol.ErrorResponse{Error: "request body too large"})
		} else {
			writeJSON(rw, http.StatusBadRequest, protocol.ErrorResponse{Error: "cannot read request body"})
		}
		return false
	}
	if err := protocol.DecodeStrict(body, v); err != nil {
		writeJSON(rw, http.StatusBadRequest, protocol.ErrorResponse{Error: "invalid JSON body: " + err.Error()})
		return false
	}
	return true
}

// health answers the master's probe with the node name and boot id.
func (a *api) health(rw http.ResponseWriter, _ *http.Request) {
	writeJSON(rw, http.StatusOK, a.w.Health())
}

// connect verifies the master's handshake and answers with a new secret.
func (a *api) connect(rw http.ResponseWriter, r *http.Request) {
	var req protocol.ConnectRequest
	if !readJSON(rw, r, &req, protocol.MaxSmallBody) {
		return
	}
	h := ConnectHeaders{
		Master:    r.Header.Get(protocol.HeaderMaster),
		NameTo:    r.Header.Get(protocol.HeaderNameTo),
		Timestamp: r.Header.Get(protocol.HeaderTimestamp),
		Nonce:     r.Header.Get(protocol.HeaderNonce),
		MAC:       r.Header.Get(protocol.HeaderConnection),
	}
	resp, err := a.w.Connect(h, req, time.Now())
	switch {
	case errors.Is(err, protocol.ErrHandshake):
		from, _, _ := net.SplitHostPort(r.RemoteAddr)
		a.log.Warn("connect refused", "from", from, "err", err)
		writeJSON(rw, http.StatusUnauthorized, protocol.ErrorResponse{Error: err.Error()})
	case err != nil:
		writeJSON(rw, http.StatusBadRequest, protocol.ErrorResponse{Error: err.Error()})
	default:
		writeJSON(rw, http.StatusOK, resp)
	}
}

// startup starts scheduling the tasks in the body.
func (a *api) startup(rw http.ResponseWriter, r *http.Request) {
	var req protocol.StartupRequest
	if !readJSON(rw, r, &req, protocol.MaxStartupBody) {
		return
	}
	if err := a.w.Startup(r.Context(), req); err != nil {
		status := http.StatusInternalServerError
		if errors.Is(err, ErrNotRunning) {
			status = http.StatusServiceUnavailable // starting or stopping: the master tries again
		}
		a.log.Error("startup", "err", err)
		writeJSON(rw, status, protocol.ErrorResponse{Error: err.Error()})
		return
	}
	writeJSON(rw, http.StatusOK, a.w.Health())
}

// startupPart schedules one part of a push in parts (see
// protocol.StartupPartRequest).
func (a *api) startupPart(rw http.ResponseWriter, r *http.Request) {
	var req protocol.StartupPartRequest
	if !readJSON(rw, r, &req, protocol.MaxTaskBatchBody) {
		return
	}
	if err := a.w.StartupPart(r.Context(), req); err != nil {
		status := http.StatusInternalServerError
		switch {
		case errors.Is(err, ErrNotRunning):
			status = http.StatusServiceUnavailable
		case errors.Is(err, ErrPartSession):
			status = http.StatusConflict
		case errors.Is(err, protocol.ErrInvalid):
			status = http.StatusBadRequest
		}
		a.log.Error("startup part", "err", err)
		writeJSON(rw, status, protocol.ErrorResponse{Error: err.Error()})
		return
	}
	writeJSON(rw, http.StatusOK, a.w.Health())
}

// shutdown stops scheduling and waits (bounded) for running jobs.
func (a *api) shutdown(rw http.ResponseWriter, r *http.Request) {
	if err := a.w.Shutdown(r.Context()); err != nil {
		a.log.Error("shutdown", "err", err)
		writeJSON(rw, http.StatusInternalServerError, protocol.ErrorResponse{Error: err.Error()})
		return
	}
	writeJSON(rw, http.StatusOK, a.w.Health())
}

// taskError maps a task operation's error to a status.
func (a *api) taskError(rw http.ResponseWriter, r *http.Request, err error) {
	status := a.taskStatus(r, err)
	writeJSON(rw, status, protocol.ErrorResponse{Error: err.Error()})
}

// taskStatus is the status a task operation's error answers.
func (a *api) taskStatus(r *http.Request, err error) int {
	var fe protocol.FieldErrors
	status := http.StatusInternalServerError
	switch {
	case errors.As(err, &fe), errors.Is(err, protocol.ErrInvalid):
		status = http.StatusBadRequest
	case errors.Is(err, ErrShellRefused), errors.Is(err, ErrTypeRefused):
		status = http.StatusForbidden
	case errors.Is(err, ErrUnknownTask):
		status = http.StatusNotFound
	case errors.Is(err, ErrNotScheduling):
		status = http.StatusConflict
	case errors.Is(err, ErrNotRunning):
		status = http.StatusServiceUnavailable // stopping: the master picks another executor
	}
	if status == http.StatusInternalServerError {
		a.log.Error("task operation", "path", r.URL.Path, "err", err)
	}
	return status
}

// startTask schedules the task in the body (idempotent).
func (a *api) startTask(rw http.ResponseWriter, r *http.Request) {
	var spec protocol.TaskSpec
	if !readJSON(rw, r, &spec, protocol.MaxTaskBody) {
		return
	}
	if err := a.w.StartTask(spec); err != nil {
		a.taskError(rw, r, err)
		return
	}
	writeJSON(rw, http.StatusOK, protocol.TaskReply{ID: spec.ID, Status: protocol.ReplyStarted})
}

// stopTask removes a task's job; stopping a task that is not here is fine.
func (a *api) stopTask(rw http.ResponseWriter, r *http.Request) {
	a.taskOp(rw, r, func(id string) error { a.w.StopTask(id); return nil }, protocol.ReplyStopped)
}

// pauseTask keeps a task's schedule and skips its runs.
func (a *api) pauseTask(rw http.ResponseWriter, r *http.Request) {
	a.taskOp(rw, r, a.w.PauseTask, protocol.ReplyPaused)
}

// resumeTask lets a paused task run again.
func (a *api) resumeTask(rw http.ResponseWriter, r *http.Request) {
	a.taskOp(rw, r, a.w.ResumeTask, protocol.ReplyRunning)
}

// taskOp reads a {"id"} body, applies op and answers the task's new state.
func (a *api) taskOp(rw http.ResponseWriter, r *http.Request, op func(id string) error, status string) {
	var ref protocol.TaskRef
	if !readJSON(rw, r, &ref, protocol.MaxSmallBody) {
		return
	}
	if err := op(ref.ID); err != nil {
		a.taskError(rw, r, err)
		return
	}
	writeJSON(rw, http.StatusOK, protocol.TaskReply{ID: ref.ID, Status: status})
}

// runTaskOnce runs a task now.
func (a *api) runTaskOnce(rw http.ResponseWriter, r *http.Request) {
	var req protocol.RunOnceRequest
	if !readJSON(rw, r, &req, protocol.MaxTaskBody) {
		return
	}
	if err := a.w.RunOnce(req); err != nil {
		a.taskError(rw, r, err)
		return
	}
	writeJSON(rw, http.StatusAccepted, protocol.TaskReply{ID: req.ID, Status: protocol.ReplyStarted})
}

// runTaskOnceBatch runs many tasks once (delayed tasks due together): one
// call instead of one per run. Each run is taken or refused on its own, as
// POST /api/task/runonce would; the answer says which, in order.
func (a *api) runTaskOnceBatch(rw http.ResponseWriter, r *http.Request) {
	var req protocol.RunOnceBatchRequest
	if !readJSON(rw, r, &req, protocol.MaxRunOnceBatchBody) {
		return
	}
	if len(req.Runs) > protocol.MaxRunOnceBatch {
		writeJSON(rw, http.StatusBadRequest, protocol.ErrorResponse{
			Error: fmt.Sprintf("%d runs in one batch: at most %d", len(req.Runs), protocol.MaxRunOnceBatch)})
		return
	}
	out := protocol.RunOnceBatchReply{Results: make([]protocol.RunOnceResult, len(req.Runs))}
	for i, run := range req.Runs {
		res := protocol.RunOnceResult{ID: run.ID, Status: http.StatusAccepted}
		if err := a.w.RunOnce(run); err != nil {
			res.Status, res.Error = a.taskStatus(r, err), err.Error()
		}
		out.Results[i] = res
	}
	writeJSON(rw, http.StatusOK, out)
}

// taskBatch does one operation to many tasks (bulk actions): each task is
// done or refused on its own, as its call alone would; the answer says
// which, in order.
func (a *api) taskBatch(rw http.ResponseWriter, r *http.Request) {
	var req protocol.TaskBatchRequest
	if !readJSON(rw, r, &req, protocol.MaxTaskBatchBody) {
		return
	}
	results, err := a.w.TaskBatch(req, func(err error) int { return a.taskStatus(r, err) })
	if err != nil {
		writeJSON(rw, http.StatusBadRequest, protocol.ErrorResponse{Error: err.Error()})
		return
	}
	writeJSON(rw, http.StatusOK, protocol.TaskBatchReply{Results: results})
}

// maxKillerLen bounds who a kill names, written into the run's output.
const maxKillerLen = 200

// runOutput answers a run in progress here with its output so far; 404 when
// it is not in progress here (it ended, or ran elsewhere).
func (a *api) runOutput(rw http.ResponseWriter, r *http.Request) {
	var ref protocol.RunRef
	if !readJSON(rw, r, &ref, protocol.MaxSmallBody) {
		return
	}
	p, ok := a.w.RunProgress(ref.ID)
	if !ok {
		writeJSON(rw, http.StatusNotFound, protocol.ErrorResponse{Error: protocol.ErrRunNotInProgress})
		return
	}
	writeJSON(rw, http.StatusOK, p)
}

// killRun kills a run in progress here: 202, it is ending and will be
// reported as killed; 404 when it is not in progress here.
func (a *api) killRun(rw http.ResponseWriter, r *http.Request) {
	var ref protocol.RunRef
	if !readJSON(rw, r, &ref, protocol.MaxSmallBody) {
		return
	}
	by, _ := protocol.SanitizeOutput(ref.By)
	if by == "" {
		by = "the master"
	}
	if len(by) > maxKillerLen {
		by = by[:maxKillerLen]
	}
	by = strings.ToValidUTF8(by, "")
	if !a.w.KillRun(ref.ID, by) {
		writeJSON(rw, http.StatusNotFound, protocol.ErrorResponse{Error: protocol.ErrRunNotInProgress})
		return
	}
	writeJSON(rw, http.StatusAccepted, protocol.RunRef{ID: ref.ID})
}
