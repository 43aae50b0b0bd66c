package handlers

import (
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/schedulemaster-go/schedulemaster/locale"
	"github.com/schedulemaster-go/schedulemaster/master"
	"github.com/schedulemaster-go/schedulemaster/views"
)

// delayedFilter reads the delayed list's filters, shared by the API and the console.
func delayedFilter(c *gin.Context) (master.DelayedFilter, error) {
	limit, offset, err := pageParams(c)
	if err != nil {
		return master.DelayedFilter{}, err
	}
	f := master.DelayedFilter{Status: c.Query("status"), Topic: c.Query("topic"), SourceApp: c.Query("source_app"), Limit: limit, Offset: offset}
	if len(f.Topic) > master.MaxDelayedTopic || len(f.SourceApp) > master.MaxDelayedSourceApp {
		return f, master.Errorf(master.KindInvalid, "topic or source_app filter too long")
	}
	return f, nil
}

// apiListDelayed answers GET /api/v1/delayed?status=&topic=&source_app=&limit=&offset=.
func (s *server) apiListDelayed(c *gin.Context) {
	f, err := delayedFilter(c)
	if err != nil {
		s.apiError(c, err)
		return
	}
	if f.Projects, err = s.apiProjectFilter(c); err != nil {
		s.apiError(c, err)
		return
	}
	if f.After, err = afterParam(c); err != nil {
		s.apiError(c, err)
		return
	}
	items, total, err := s.m.Delayed().ListDelayed(c.Request.Context(), f)
	if err != nil {
		s.apiError(c, err)
		return
	}
	c.JSON(http.StatusOK, pageAnswer(items, total, f.Limit, func(d master.Delayed) (time.Time, string) { return d.CreatedAt, d.ID }))
}

// listDelayed shows the delayed task list with its filters; htmx gets only the rows.
func (s *server) listDelayed(c *gin.Context) {
	vm, err := s.delayedListVM(c, nil)
	if err != nil {
		s.tasksError(c, err)
		return
	}
	if isHX(c) {
		s.render(c, http.StatusOK, views.DelayedRows(vm))
		return
	}
	vm.Flash = s.takeFlash(c)
	s.render(c, http.StatusOK, views.DelayedListPage(vm))
}

// delayedRows is the live fragment the delayed list polls.
func (s *server) delayedRows(c *gin.Context) {
	vm, err := s.delayedListVM(c, nil)
	if err != nil {
		s.tasksError(c, err)
		return
	}
	s.render(c, http.StatusOK, views.DelayedRows(vm))
}

// delayedListQuery is the list's filters (and page) as a query string.
func delayedListQuery(f views.DelayedFilterVM, offset int) url.Values {
	q := url.Values{}
	if f.Status != "" {
		q.Set("status", f.Status)
	}
	if f.Topic != "" {
		q.Set("topic", f.Topic)
	}
	if f.SourceApp != "" {
		q.Set("source_app", f.SourceApp)
	}
	if offset > 0 {
		q.Set("offset", strconv.Itoa(offset))
	}
	return q
}

// delayedListVM reads the filters of the request and loads the page.
func (s *server) delayedListVM(c *gin.Context, flash *views.Flash) (views.DelayedListVM, error) {
	f, err := delayedFilter(c)
	if err != nil {
		return views.DelayedListVM{}, err
	}
	f.Limit = 50
	ctx := c.Request.Context()
	f.Projects = s.currentProjectIDs(c)
	items, total, err := s.m.Delayed().ListDelayed(ctx, f)
	if err != nil {
		return views.DelayedListVM{}, err
	}
	counts, err := s.m.Delayed().DelayedCounts(ctx, f.Projects)
	if err != nil {
		return views.DelayedListVM{}, err
	}
	l := s.layout(c, tr(c, "DelayedTitle"), "delayed")
	fvm := views.DelayedFilterVM{Status: f.Status, Topic: f.Topic, SourceApp: f.SourceApp}
	vm := views.DelayedListVM{
		Layout: l, Flash: flash, Filter: fvm, Filtered: fvm != (views.DelayedFilterVM{}), Statuses: master.DelayedStatuses(),
		Total: total, PollInterval: s.poll, ShowActions: l.CanOperate,
	}
	for _, st := range master.DelayedStatuses() {
		if counts[st] > 0 {
			vm.Counts = append(vm.Counts, views.DelayedCount{Status: st, N: counts[st]})
		}
	}
	now := time.Now()
	for i := range items {
		vm.Rows = append(vm.Rows, delayedRow(lc(c), &items[i], now))
	}
	if len(items) > 0 {
		vm.From, vm.To = f.Offset+1, f.Offset+len(items)
	}
	if f.Offset > 0 {
		vm.PrevURL = withQuery("/delayed", delayedListQuery(fvm, max(f.Offset-f.Limit, 0)))
	}
	if f.Offset+len(items) < total {
		vm.NextURL = withQuery("/delayed", delayedListQuery(fvm, f.Offset+f.Limit))
	}
	here := delayedListQuery(fvm, f.Offset)
	vm.RowsURL = withQuery("/delayed/rows", here)
	vm.ActionQuery = withQuery("", here)
	return vm, nil
}

func delayedRow(lc *locale.Localizer, d *master.Delayed, now time.Time) views.DelayedRow {
	r := views.DelayedRow{
		ID: d.ID, SourceApp: d.SourceApp, Topic: d.Topic, ContentKey: d.ContentKey, Due: utcText(d.DueAt),
		DueISO: d.DueAt.UTC().Format(time.RFC3339), Status: d.Status, Late: d.Late, LateBy: d.LateBy, Node: d.Node, CanCancel: d.Status == master.DelayedPending,
		Attempts: lc.T("DelayedAttemptsOf", "N", d.Attempts, "Of", d.Retries+1),
	}
	if d.DueAt.After(now) {
		r.DueRel = lc.Until(d.DueAt, now)
	} else {
		r.DueRel = ago(lc, d.DueAt, now)
	}
	return r
}
