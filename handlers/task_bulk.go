package handlers

import (
	"net/http"
	"strings"

	"github.com/gin-gonic/gin"

	"github.com/schedulemaster-go/schedulemaster/locale"
	"github.com/schedulemaster-go/schedulemaster/master"
	"github.com/schedulemaster-go/schedulemaster/protocol"
	"github.com/schedulemaster-go/schedulemaster/views"
)

// bulkNames is how many task names a bulk outcome lists before "and N more".
const bulkNames = 12

// bulkTasks does one action (pause, resume, stop, delete) to the tasks
// selected on the list (form fields action and ids) and answers the list
// with one message naming what happened to each task; the list's filters
// (query string) are kept.
func (s *server) bulkTasks(c *gin.Context) {
	action := c.PostForm("action")
	results, err := s.m.Tasks().Bulk(c.Request.Context(), action, c.PostFormArray("ids"))
	if err != nil {
		status := errorStatus(err)
		if status == 0 {
			s.serverError(c, err)
			return
		}
		s.renderBulkRefusal(c, status, refusal(c, err))
		return
	}
	ok, msg := bulkMessage(lc(c), action, results)
	s.logBulk(c, action, results)
	s.renderTaskOutcome(c, "", http.StatusOK, ok, msg)
}

// renderBulkRefusal shows why a bulk request was refused as a whole: the
// list with the message, with the status (400 for a bad request).
func (s *server) renderBulkRefusal(c *gin.Context, status int, msg string) {
	flash := &views.Flash{Message: tr(c, "BulkNothingDone", "Reason", msg)}
	vm, err := s.tasksVM(c, flash)
	if err != nil {
		c.Request.URL.RawQuery = ""
		if vm, err = s.tasksVM(c, flash); err != nil {
			s.serverError(c, err)
			return
		}
	}
	if isHX(c) {
		s.render(c, status, views.TasksPanel(vm))
		return
	}
	s.render(c, status, views.TasksPage(vm))
}

func (s *server) logBulk(c *gin.Context, action string, results []master.BulkResult) {
	done := 0
	for _, r := range results {
		if r.OK {
			done++
		}
	}
	s.log.Info("bulk task action", "action", action, "tasks", len(results), "done", done, "user", currentUser(c).Name)
}

// apiBulkTasks answers POST /api/v1/tasks/bulk. With {"action","ids"} it
// does the action to each task: {"results":[{"id","ok","error"}]}, in the
// order of ids. With {"tasks":[...],"start":bool} it creates (no id) or
// updates (an id) each task, and starts them with start:
// {"results":[{"index","action","id","ok","error","fields","started"}]}, in
// the order of tasks. Both at once is refused.
func (s *server) apiBulkTasks(c *gin.Context) {
	var in struct {
		Action string             `json:"action"`
		IDs    []string           `json:"ids"`
		Tasks  []master.TaskInput `json:"tasks"`
		Start  bool               `json:"start"`
	}
	body, err := readBodyLimit(c, maxBulkBody)
	if err != nil {
		return
	}
	if err := protocol.DecodeStrict(body, &in); err != nil {
		c.AbortWithStatusJSON(http.StatusBadRequest, protocol.ErrorResponse{Error: "invalid JSON body: " + err.Error()})
		return
	}
	if in.Tasks != nil {
		if in.Action != "" || in.IDs != nil {
			s.apiError(c, master.Errorf(master.KindInvalid, "send either tasks (to create or update them) or an action and ids, not both"))
			return
		}
		results, err := s.m.Tasks().Save(c.Request.Context(), in.Tasks, in.Start, currentUser(c).Name)
		if err != nil {
			s.apiError(c, err)
			return
		}
		done := 0
		for _, r := range results {
			if r.OK {
				done++
			}
		}
		s.log.Info("bulk task save", "tasks", len(results), "done", done, "start", in.Start, "user", currentUser(c).Name)
		c.JSON(http.StatusOK, gin.H{"results": results})
		return
	}
	results, err := s.m.Tasks().Bulk(c.Request.Context(), in.Action, in.IDs)
	if err != nil {
		s.apiError(c, err)
		return
	}
	s.logBulk(c, in.Action, results)
	c.JSON(http.StatusOK, gin.H{"results": results})
}

// bulkTexts are the messages of each bulk action: its outcome ("Paused 3 of
// 4"), its name in a refusal ("pause") and the rest not done ("and 2 more
// not paused").
var bulkTexts = map[string][3]string{
	"start":  {"BulkStarted", "BulkActStart", "BulkMoreNotStarted"},
	"pause":  {"BulkPaused", "BulkActPause", "BulkMoreNotPaused"},
	"resume": {"BulkResumed", "BulkActResume", "BulkMoreNotResumed"},
	"stop":   {"BulkStopped", "BulkActStop", "BulkMoreNotStopped"},
	"delete": {"BulkDeleted", "BulkActDelete", "BulkMoreNotDeleted"},
}

// bulkMessage sums up a bulk action in one sentence, e.g. "Paused 3 of 4:
// backup, report, sync; pause refused for ping: it is stopped; only a running
// task can be paused". ok is whether every task was done.
func bulkMessage(lc *locale.Localizer, action string, results []master.BulkResult) (ok bool, msg string) {
	texts := bulkTexts[action]
	verb := lc.T(texts[1])
	var done, failed []string
	for _, r := range results {
		name := r.Title
		if name == "" { // no such task: its id, as sent, shortened
			name = r.ID
			if len(name) > 40 {
				name = strings.ToValidUTF8(name[:40], "") + "…"
			}
		}
		switch {
		case r.OK:
			done = append(done, name)
		case r.Refused:
			failed = append(failed, lc.T("BulkRefusedFor", "Action", verb, "Name", name, "Reason", views.RefusalIn(lc, r.Error)))
		default:
			failed = append(failed, lc.T("BulkFailedFor", "Action", verb, "Name", name, "Reason", views.RefusalIn(lc, r.Error)))
		}
	}
	var b strings.Builder
	b.WriteString(lc.T(texts[0], "Done", len(done), "Total", len(results)))
	if len(done) > 0 {
		b.WriteString(lc.T("ListColon") + listSome(done, lc.T("ListSep"), func(n int) string { return lc.T("BulkMore", "Count", n) }))
	}
	if len(failed) > 0 {
		b.WriteString(lc.T("ListSemi") + listSome(failed, lc.T("ListSemi"), func(n int) string { return lc.T(texts[2], "Count", n) }))
	}
	return len(failed) == 0, b.String()
}

// listSome joins the first bulkNames items and says how many more there are.
func listSome(items []string, sep string, more func(n int) string) string {
	if len(items) <= bulkNames {
		return strings.Join(items, sep)
	}
	return strings.Join(items[:bulkNames], sep) + sep + more(len(items)-bulkNames)
}
