package handlers

import (
	"net/http"
	"strconv"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/schedulemaster-go/schedulemaster/locale"
	"github.com/schedulemaster-go/schedulemaster/master"
	"github.com/schedulemaster-go/schedulemaster/views"
)

// showRun shows every field of one run and its output; while the run is in
// progress, its output so far, refreshed every second, and Kill for admins.
func (s *server) showRun(c *gin.Context) {
	vm, err := s.runVM(c, c.Param("id"), nil)
	if err != nil {
		s.tasksError(c, err)
		return
	}
	vm.Layout = s.layout(c, vm.Heading, "tasks")
	s.render(c, http.StatusOK, views.RunPage(vm))
}

// runLive answers the run page's poll with its live part.
func (s *server) runLive(c *gin.Context) {
	vm, err := s.runVM(c, c.Param("id"), nil)
	if err != nil {
		s.tasksError(c, err)
		return
	}
	s.render(c, http.StatusOK, views.RunLive(vm))
}

// runVM reads a run and, while it is in progress, asks its worker (only
// that one) for the output so far.
func (s *server) runVM(c *gin.Context, id string, flash *views.Flash) (views.RunVM, error) {
	ctx := c.Request.Context()
	live, err := s.m.Runs().Live(ctx, id)
	if err != nil {
		return views.RunVM{}, err
	}
	r := live.Run
	vm := views.RunVM{
		ID: r.ID, TaskID: r.TaskID, Node: r.Node,
		ScheduledAt: utcText(r.ScheduledAt), StartedAt: utcText(r.StartedAt), EndedAt: utcText(r.EndedAt),
		Duration: durationMS(lc(c), r.DurationMS), Result: r.Result, Attempt: r.Attempt, Manual: r.Manual, Output: r.Output,
		BinaryOutput: r.BinaryOutput, DelayedID: r.DelayedID, TaskVersion: r.TaskVersion, Flash: flash,
	}
	if r.HTTPStatus != 0 {
		vm.HTTPStatus = strconv.Itoa(r.HTTPStatus)
	}
	if r.ExitCode != nil {
		vm.ExitCode = strconv.Itoa(*r.ExitCode)
	}
	if live.InProgress() {
		vm.InProgress, vm.LiveURL = true, "/runs/"+r.ID+"/live"
		vm.EndedAt = "-"
		vm.Duration = lc(c).T("RunRunningFor", "Duration", lc(c).Duration(time.Since(r.StartedAt).Round(time.Second)))
		p := currentUser(c)
		vm.CanKill = p != nil && p.Can(s.m.Runs().Project(c.Request.Context(), live.Run), master.ActOperate) && !live.Ended
		switch p := live.Progress; {
		case p != nil:
			vm.Output, vm.BinaryOutput = p.Output, p.BinaryOutput
			switch {
			case p.Killing:
				vm.LiveNote = tr(c, "RunKillAsked")
				vm.CanKill = false
			case p.Waiting != "":
				vm.LiveNote = tr(c, "RunLiveWaiting", "Waiting", p.Waiting)
			default:
				vm.LiveNote = tr(c, "RunLiveBytes", "Bytes", byteCount(lc(c), p.OutputBytes), "Node", r.Node)
			}
		case live.Ended:
			vm.LiveNote = tr(c, "RunEndedOnWay", "Node", r.Node)
		default:
			vm.LiveNote = tr(c, "RunOutputUnavailable", "Reason", live.Unreachable)
		}
	}
	if t, err := s.m.Tasks().Get(ctx, r.TaskID); err == nil {
		vm.TaskTitle = t.Title
	}
	// A person knows a run by its task and when it ran, not by its UUID.
	title := vm.TaskTitle
	if title == "" {
		title = tr(c, "RunDeletedTaskTitle")
	}
	vm.Heading = tr(c, "RunHeading", "Title", title, "At", utcText(r.StartedAt))
	return vm, nil
}

// byteCount writes a size for people: 512 bytes, 3.2 KiB, 1.5 MiB.
func byteCount(lc *locale.Localizer, n int64) string {
	switch {
	case n < 1024:
		return lc.N("Bytes", int(n))
	case n < 1<<20:
		return strconv.FormatFloat(float64(n)/1024, 'f', 1, 64) + " KiB"
	}
	return strconv.FormatFloat(float64(n)/(1<<20), 'f', 1, 64) + " MiB"
}
