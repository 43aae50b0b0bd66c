package handlers

import (
	"context"
	"net/http"
	"regexp"
	"strconv"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/schedulemaster-go/schedulemaster/locale"
	"github.com/schedulemaster-go/schedulemaster/master"
	"github.com/schedulemaster-go/schedulemaster/views"
)

// listNodes shows the nodes page; htmx gets only the rows.
func (s *server) listNodes(c *gin.Context) {
	vm, err := s.nodesVM(c, nil)
	if err != nil {
		s.serverError(c, err)
		return
	}
	if isHX(c) {
		s.render(c, http.StatusOK, views.NodesLive(vm))
		return
	}
	vm.Flash = s.takeFlash(c)
	s.render(c, http.StatusOK, views.NodesPage(vm))
}

// nodeRows is the live fragment the page polls: counters and rows together.
func (s *server) nodeRows(c *gin.Context) {
	vm, err := s.nodesVM(c, nil)
	if err != nil {
		s.serverError(c, err)
		return
	}
	s.render(c, http.StatusOK, views.NodesLive(vm))
}

func (s *server) nodesVM(c *gin.Context, flash *views.Flash) (views.NodesVM, error) {
	nodes, err := s.m.Nodes().List(c.Request.Context())
	if err != nil {
		return views.NodesVM{}, err
	}
	l := s.layout(c, tr(c, "NavNodes"), "nodes")
	vm := views.NodesVM{Layout: l, Flash: flash, PollInterval: s.poll, ShowActions: l.Admin,
		PageSize: nodesPageSize, Total: len(nodes)}
	vm.Offset, _ = strconv.Atoi(c.Query("offset"))
	vm.Offset = min(max(vm.Offset, 0), max(len(nodes)-1, 0))
	// Every master shows the same leader: the lease row, not its own view.
	leader, err := s.m.Leader(c.Request.Context())
	if err != nil {
		return views.NodesVM{}, err
	}
	now := time.Now()
	names := map[string]bool{}
	for i, n := range nodes {
		names[n.Name] = true
		if i >= vm.Offset && i < vm.Offset+nodesPageSize {
			r := nodeRow(lc(c), n, now)
			r.Leader = n.Type == master.TypeMaster && n.Name == leader
			vm.Rows = append(vm.Rows, r)
		}
		switch {
		case n.Type != master.TypeWorker:
			vm.Masters++
		case n.Status >= 0 && n.Status < 3:
			vm.Counts[n.Status]++
		}
	}
	if l.Admin {
		vm.AutoCommand = autoWorkerCommand(masterURL(c), s.m.ClusterKey(), freeWorkerName(names))
	}
	return vm, nil
}

// nodesPageSize is how many nodes one page of the console shows.
const nodesPageSize = 100

// freeWorkerName is the first of w1, w2, ... that no node has.
func freeWorkerName(taken map[string]bool) string {
	for i := 1; ; i++ {
		if name := "w" + strconv.Itoa(i); !taken[name] {
			return name
		}
	}
}

// offlineAfter reads the count of failed checks from the reason the health
// checker gives a node it takes offline.
var offlineAfter = regexp.MustCompile(`^offline after (\d+) failed health checks`)

// clockSkewText says, in the console's language, how far a node's clock is
// off the master's when it is beyond the limit; empty within it, when never
// measured and for an offline node (nobody measures it now).
func clockSkewText(lc *locale.Localizer, n *master.Node) string {
	skew, _ := master.NodeClockSkew(n)
	if n.Status == master.StatusOffline || !master.NodeClockSkewed(n) {
		return ""
	}
	id := "NodeClockSkewAhead"
	if skew < 0 {
		id = "NodeClockSkewBehind"
	}
	return lc.T(id, "Secs", master.ClockSkewSeconds(skew))
}

func nodeRow(lc *locale.Localizer, n master.Node, now time.Time) views.NodeRow {
	// A pending node has no secret: only Approve or Delete make sense.
	pending := n.Mode == master.ModePending
	isWorker := n.Type == master.TypeWorker && !pending
	r := views.NodeRow{
		Name: n.Name, Type: n.Type, Host: n.Host, Protocol: n.Protocol, Status: int(n.Status),
		StatusName: n.Status.String(), Priority: n.Priority, MaxConcurrency: n.MaxConcurrency,
		LastSeen: lc.Ago(n.LastSeen, now), Failures: strconv.Itoa(n.Failures), Mode: n.Mode, Reason: n.Reason,
		Degraded:      n.Status != master.StatusOffline && master.NodeDegraded(n.Reason),
		ClockSkew:     clockSkewText(lc, &n),
		FailuresTitle: lc.T("NodeFailuresTitle"),
		// The buttons follow the engine's state table; the master's own node has none.
		CanConnect: isWorker && master.NodeAllows(n.Status, master.NodeConnect),
		CanEnable:  isWorker && master.NodeAllows(n.Status, master.NodeEnable),
		CanDisable: isWorker && master.NodeAllows(n.Status, master.NodeDisable),
		CanDelete:  (isWorker || pending) && master.NodeAllows(n.Status, master.NodeDelete),
		CanApprove: pending,
		CanEdit:    isWorker && master.NodeAllows(n.Status, master.NodeEdit),

		CanResetIdentity: isWorker && master.NodeAllows(n.Status, master.NodeResetIdentity) &&
			n.Mode == master.ModeAuto && n.NodeKey != "",
	}
	if !n.LastSeen.IsZero() {
		r.LastSeenAt = n.LastSeen.UTC().Format(time.RFC3339)
	}
	// The stored counter restarts when a node goes offline (it counts towards
	// the next transition); show the count the reason names instead of a 0
	// that contradicts it, and no count for a node nobody probes.
	if n.Status == master.StatusOffline {
		if m := offlineAfter.FindStringSubmatch(n.Reason); m != nil {
			r.Failures, r.FailuresTitle = m[1], lc.T("NodeFailuresOfflineTitle")
		} else if n.Failures == 0 {
			r.Failures, r.FailuresTitle = "-", lc.T("NodeFailuresNotCounted")
		}
	}
	return r
}

// ago renders a time as "12s ago" in the reader's language.
func ago(l *locale.Localizer, t, now time.Time) string { return l.Ago(t, now) }

// renderNodesOutcome ends a node action: htmx gets the panel with the message,
// a plain form post is redirected to the page with the message kept.
func (s *server) renderNodesOutcome(c *gin.Context, status int, ok bool, msg string) {
	if !isHX(c) {
		s.setFlash(c, ok, msg)
		c.Redirect(http.StatusSeeOther, "/nodes")
		return
	}
	vm, err := s.nodesVM(c, &views.Flash{OK: ok, Message: msg})
	if err != nil {
		s.serverError(c, err)
		return
	}
	s.render(c, status, views.NodesPanel(vm))
}

// nodeAction runs one lifecycle action and reports its outcome; verb is the
// message naming the action ("NodeEnable").
func (s *server) nodeAction(c *gin.Context, verb string, do func(ctx context.Context, name string) error) {
	name := c.Param("name")
	if err := do(c.Request.Context(), name); err != nil {
		status := errorStatus(err)
		if status == 0 {
			s.serverError(c, err)
			return
		}
		s.log.Warn("node action failed", "action", verb, "node", name, "user", currentUser(c).Name, "err", err)
		s.renderNodesOutcome(c, status, false, tr(c, "ActionFailed", "Verb", tr(c, verb), "Name", name, "Reason", refusal(c, err)))
		return
	}
	s.log.Info("node action", "action", verb, "node", name, "user", currentUser(c).Name)
	s.renderNodesOutcome(c, http.StatusOK, true, tr(c, "ActionDone", "Verb", tr(c, verb), "Name", name))
}
