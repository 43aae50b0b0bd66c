package handlers

import (
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/schedulemaster-go/schedulemaster/master"
	"github.com/schedulemaster-go/schedulemaster/views"
)

// apiDelayed is a delayed task in the open API with its runs, newest first.
type apiDelayed struct {
	master.Delayed
	Runs []apiRun `json:"runs"`
}

// delayedRunsLimit bounds the runs a delayed task shows (retries and
// reassignments stay far below it).
const delayedRunsLimit = 100

// answerDelayed answers with a delayed task and its runs.
func (s *server) answerDelayed(c *gin.Context, status int, d *master.Delayed) {
	runs, _, err := s.m.Delayed().DelayedRuns(c.Request.Context(), d.ID, delayedRunsLimit, 0)
	if err != nil {
		s.serverError(c, err)
		return
	}
	out := apiDelayed{Delayed: *d, Runs: make([]apiRun, len(runs))}
	for i := range runs {
		out.Runs[i] = toAPIRun(&runs[i])
	}
	c.JSON(status, out)
}

// apiGetDelayed answers GET /api/v1/delayed/{id}.
func (s *server) apiGetDelayed(c *gin.Context) {
	d, err := s.m.Delayed().GetDelayed(c.Request.Context(), c.Param("id"))
	if err != nil {
		s.apiError(c, err)
		return
	}
	s.answerDelayed(c, http.StatusOK, d)
}

// showDelayed shows one delayed task, every field and its runs.
func (s *server) showDelayed(c *gin.Context) {
	vm, err := s.delayedVM(c, c.Param("id"), nil)
	if err != nil {
		s.tasksError(c, err)
		return
	}
	vm.Flash = s.takeFlash(c)
	s.render(c, http.StatusOK, views.DelayedPage(vm))
}

// delayedLive is the live fragment of a delayed task's page: status and runs.
func (s *server) delayedLive(c *gin.Context) {
	d, err := s.m.Delayed().GetDelayed(c.Request.Context(), c.Param("id"))
	if err != nil {
		s.tasksError(c, err)
		return
	}
	live, err := s.delayedLiveVM(c, d)
	if err != nil {
		s.tasksError(c, err)
		return
	}
	s.render(c, http.StatusOK, views.DelayedLive(live))
}

func (s *server) delayedVM(c *gin.Context, id string, flash *views.Flash) (views.DelayedVM, error) {
	d, err := s.m.Delayed().GetDelayed(c.Request.Context(), id)
	if err != nil {
		return views.DelayedVM{}, err
	}
	live, err := s.delayedLiveVM(c, d)
	if err != nil {
		return views.DelayedVM{}, err
	}
	l := s.layout(c, "Delayed task "+d.ID, "delayed")
	vm := views.DelayedVM{
		Layout: l, Flash: flash, ID: d.ID, Status: d.Status, SourceApp: d.SourceApp, Topic: d.Topic, ContentKey: d.ContentKey,
		Due: utcText(d.DueAt), Late: d.Late, LateBy: d.LateBy, NotifyURL: d.NotifyURL, ContentType: d.ContentType,
		NotifyBody: d.NotifyBody, Retries: d.Retries, Attempts: d.Attempts, Executors: strings.Join(d.Executors, ", "),
		Selector: d.Selector, Keepers: strings.Join(d.Keepers, ", "), Node: d.Node, LastError: d.LastError, CreatedBy: d.CreatedBy,
		Created: utcText(d.CreatedAt), Fired: optUTC(d.FiredAt), Finished: optUTC(d.FinishedAt),
		CanCancel: currentUser(c).Can(d.ProjectID, master.ActOperate) && d.Status == master.DelayedPending, Live: live,
	}
	if d.NextAt != nil {
		vm.NextAt = utcText(*d.NextAt)
	}
	return vm, nil
}

func (s *server) delayedLiveVM(c *gin.Context, d *master.Delayed) (views.DelayedLiveVM, error) {
	runs, total, err := s.m.Delayed().DelayedRuns(c.Request.Context(), d.ID, delayedRunsLimit, 0)
	if err != nil {
		return views.DelayedLiveVM{}, err
	}
	vm := views.DelayedLiveVM{ID: d.ID, Status: d.Status, Attempts: d.Attempts, PollInterval: s.poll,
		LiveURL: "/delayed/" + url.PathEscape(d.ID) + "/live", Runs: views.RunsVM{Total: total}}
	now := time.Now()
	for i := range runs {
		vm.Runs.Rows = append(vm.Runs.Rows, runRow(&runs[i], now))
	}
	return vm, nil
}

// optUTC shows an optional time, "-" when unset.
func optUTC(t *time.Time) string {
	if t == nil {
		return "-"
	}
	return utcText(*t)
}
