package handlers

import (
	"context"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/schedulemaster-go/schedulemaster/locale"
	"github.com/schedulemaster-go/schedulemaster/master"

	"github.com/gin-gonic/gin"

	"github.com/schedulemaster-go/schedulemaster/views"
)

const (
	// dashboardPoll is how often the dashboard's counters and failures refresh.
	dashboardPoll = "every 5s"
	// chartDays is how many days the runs chart shows, today included.
	chartDays = 14
	// failureGroups is how many tasks (and delayed topics) the dashboard's
	// failures list, the one with the newest failure first.
	failureGroups = 10
	// failureWindow is how far back the grouped failures go.
	failureWindow = 24 * time.Hour
	// failureScan bounds the failures of each result read for the groups,
	// so the dashboard stays cheap over a million runs.
	failureScan = 1000
)

// showDashboard shows the counters, the latest failures and the runs chart;
// htmx gets only the live part.
func (s *server) showDashboard(c *gin.Context) {
	ctx := c.Request.Context()
	now := time.Now().UTC()
	live, err := s.dashboardLiveVM(ctx, now, s.currentProjectIDs(c))
	if err != nil {
		s.serverError(c, err)
		return
	}
	if isHX(c) {
		s.render(c, http.StatusOK, views.DashboardLive(live))
		return
	}
	rg := chartRangeNamed(c.Query("range"))
	from := rg.first(now)
	counts, err := s.m.Reads().RunsPerSlot(ctx, rg.unit, from, from.Add(time.Duration(rg.slots)*rg.step), s.currentProjectIDs(c))
	if err != nil {
		s.serverError(c, err)
		return
	}
	vm := views.DashboardVM{Layout: s.layout(c, tr(c, "NavDashboard"), "dashboard"), Live: live, Chart: rangeChart(lc(c), rg, from, counts),
		Range: rg.name}
	for _, r := range chartRanges {
		vm.Ranges = append(vm.Ranges, r.name)
	}
	s.render(c, http.StatusOK, views.DashboardPage(vm))
}

// dashboardLive is the fragment the dashboard polls.
func (s *server) dashboardLive(c *gin.Context) {
	live, err := s.dashboardLiveVM(c.Request.Context(), time.Now().UTC(), s.currentProjectIDs(c))
	if err != nil {
		s.serverError(c, err)
		return
	}
	s.render(c, http.StatusOK, views.DashboardLive(live))
}

func utcDay(t time.Time) time.Time {
	y, m, d := t.UTC().Date()
	return time.Date(y, m, d, 0, 0, 0, 0, time.UTC)
}

// dashboardLiveVM reads the counters: a few aggregate queries, cheap enough
// to run at every poll.
func (s *server) dashboardLiveVM(ctx context.Context, now time.Time, projects []int64) (views.DashboardLiveVM, error) {
	vm := views.DashboardLiveVM{PollInterval: dashboardPoll, UpdatedAt: utcText(now)}
	// Workers only: a master runs no task, so it is no running node here.
	nodes, err := s.m.Nodes().List(ctx)
	if err != nil {
		return vm, err
	}
	for _, n := range nodes {
		if n.Type != master.TypeWorker {
			continue
		}
		if n.Status >= 0 && n.Status < 3 {
			vm.Nodes[n.Status]++
		}
		vm.NodesTotal++
	}
	d, err := s.m.Reads().ReadDashboard(ctx, now, master.FailureQuery{Window: failureWindow, Scan: failureScan, Limit: failureGroups}, projects)
	if err != nil {
		return vm, err
	}
	for st, n := range d.Tasks {
		if st >= 0 && st < 3 {
			vm.Tasks[st] = n
		}
		vm.TasksTotal += n
	}
	vm.NoExecutor = d.NoExecutor
	vm.UpdatedAt = utcText(d.At)
	vm.Today = utcDay(now).Format(time.DateOnly)
	for _, dc := range d.RunsToday {
		addCount(&vm.RunsToday, dc.Result, dc.N)
	}
	since := d.At.Add(-failureWindow)
	vm.FailuresComplete = d.FailuresComplete
	for _, g := range d.Failures {
		vm.FailureGroups = append(vm.FailureGroups, failureGroupRow(locale.From(ctx), g, since, now))
	}
	return vm, nil
}

// addCount adds n runs with result r to c.
func addCount(c *views.RunCounts, r string, n int) {
	switch r {
	case master.ResultSuccess:
		c.Success += n
	case master.ResultFailed:
		c.Failed += n
	case master.ResultTimeout:
		c.Timeout += n
	case master.ResultSkipped:
		c.Skipped += n
	}
	c.Total += n
}

// failureGroupRow is one task's (or delayed topic's) failures as the
// dashboard lists them.
func failureGroupRow(lc *locale.Localizer, g master.FailureGroup, since, now time.Time) views.FailureGroupRow {
	row := views.FailureGroupRow{
		TaskID: g.TaskID, Title: g.TaskTitle, Delayed: g.Delayed, Topic: g.Topic, ContentKey: g.ContentKey, Count: g.Count,
		LastRunID: g.LastRunID, Node: g.LastNode, Last: ago(lc, g.LastAt, now), LastAt: utcText(g.LastAt), Result: g.LastResult,
		LastError: firstLine(g.Excerpt),
	}
	switch {
	case g.HTTPStatus != 0:
		row.Code = "HTTP " + strconv.Itoa(g.HTTPStatus)
	case g.ExitCode != nil:
		row.Code = lc.T("RunExit", "Code", *g.ExitCode)
	}
	q := url.Values{"task": {g.TaskID}, "since": {since.UTC().Format("2006-01-02T15:04")}}
	if len(g.Results) == 1 {
		q.Set("result", g.Results[0])
	}
	row.RunsURL = "/runs?" + q.Encode()
	if g.Delayed {
		row.TopicURL = "/delayed?" + url.Values{"topic": {g.Topic}}.Encode()
	}
	return row
}

// firstLine is the first line of an output that is not blank, trimmed.
func firstLine(s string) string {
	for line := range strings.Lines(s) {
		if t := strings.TrimSpace(line); t != "" {
			return t
		}
	}
	return ""
}
