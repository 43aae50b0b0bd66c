package handlers

import (
	"context"
	"net/http"
	"strconv"
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
	// dashboardFailures is how many of the latest failures the dashboard lists.
	dashboardFailures = 10
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
	today := utcDay(now)
	from := today.AddDate(0, 0, -(chartDays - 1))
	counts, err := s.m.Reads().RunsPerDay(ctx, from, today.AddDate(0, 0, 1), s.currentProjectIDs(c))
	if err != nil {
		s.serverError(c, err)
		return
	}
	vm := views.DashboardVM{Layout: s.layout(c, tr(c, "NavDashboard"), "dashboard"), Live: live, Chart: runsChart(lc(c), from, chartDays, counts)}
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
	nodes, err := s.m.ListNodes(ctx)
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
	d, err := s.m.Reads().ReadDashboard(ctx, now, dashboardFailures, projects)
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
	for _, f := range d.Failures {
		row := views.FailureRow{
			RunID: f.ID, TaskID: f.TaskID, TaskTitle: f.TaskTitle, Node: f.Node, Started: ago(locale.From(ctx), f.StartedAt, now),
			StartedAt: utcText(f.StartedAt), Result: f.Result, Excerpt: f.Excerpt,
		}
		switch {
		case f.HTTPStatus != 0:
			row.Code = "HTTP " + strconv.Itoa(f.HTTPStatus)
		case f.ExitCode != nil:
			row.Code = "exit " + strconv.Itoa(*f.ExitCode)
		}
		vm.Failures = append(vm.Failures, row)
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
