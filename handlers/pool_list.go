package handlers

import (
	"context"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/schedulemaster-go/schedulemaster/locale"
	"github.com/schedulemaster-go/schedulemaster/master"
	"github.com/schedulemaster-go/schedulemaster/protocol"
	"github.com/schedulemaster-go/schedulemaster/views"
)

// poolEventsScan is how many recent node events the Pools pages read to
// show members joining and leaving; a pool shows poolEventsListed of them
// on the Pools page and poolEventsShown on its own page.
const (
	poolEventsScan   = 500
	poolEventsListed = 5
	poolEventsShown  = 30
)

// poolEventActions are the node events that say a member joined or left,
// with the message saying so.
var poolEventActions = map[string]string{
	"node.register": "PoolEventRegistered", "node.recover": "PoolEventRecovered", "node.offline": "PoolEventOffline",
	"node.delete": "PoolEventDeleted", "node.labels": "PoolEventLabels",
}

// apiListPools answers GET /api/v1/pools?key=pool with the pools the values
// of one label key form: {"key": "pool", "pools": [...]}.
func (s *server) apiListPools(c *gin.Context) {
	key := poolKey(c)
	pools, err := s.m.Pools().List(c.Request.Context(), key)
	if err != nil {
		s.apiError(c, err)
		return
	}
	c.JSON(http.StatusOK, gin.H{"key": key, "pools": pools})
}

// poolKey is the ?key= asked for, DefaultPoolKey when none.
func poolKey(c *gin.Context) string {
	if k := strings.TrimSpace(c.Query("key")); k != "" {
		return k
	}
	return master.DefaultPoolKey
}

// listPools shows the Pools page: each pool of one label key (?key=, default
// pool) with its members, the tasks that select it, its runs and its
// approval, and members joining and leaving.
func (s *server) listPools(c *gin.Context) {
	ctx := c.Request.Context()
	key := poolKey(c)
	l := s.layout(c, tr(c, "NavPools"), "pools")
	vm := views.PoolsVM{Layout: l, Flash: s.takeFlash(c), Key: key, ShowActions: l.Admin}
	nodes, err := s.m.Nodes().List(ctx)
	if err != nil {
		s.serverError(c, err)
		return
	}
	keys := map[string]bool{master.DefaultPoolKey: true}
	for i := range nodes {
		for k := range master.NodeLabels(&nodes[i]) {
			keys[k] = true
		}
	}
	vm.Keys = slices.Sorted(maps.Keys(keys))
	pools, err := s.m.Pools().List(ctx, key)
	if err != nil {
		if errorStatus(err) != http.StatusBadRequest {
			s.serverError(c, err)
			return
		}
		vm.KeyError = refusal(c, err)
		s.render(c, http.StatusBadRequest, views.PoolsPage(vm))
		return
	}
	events, err := s.poolEvents(c, pools, nodes, poolEventsListed)
	if err != nil {
		s.serverError(c, err)
		return
	}
	now := time.Now()
	for i := range pools {
		vm.Pools = append(vm.Pools, poolVM(lc(c), &pools[i], events[pools[i].Label], now))
	}
	s.render(c, http.StatusOK, views.PoolsPage(vm))
}

// poolVM is one pool as the Pools pages show it.
func poolVM(lc *locale.Localizer, p *master.Pool, events []master.Event, now time.Time) views.PoolVM {
	out := views.PoolVM{Key: p.Key, Value: p.Value, Label: p.Label, URL: poolURL(p.Label), Approved: p.Approved,
		Running: p.Running, Runs: p.Runs, Failed: p.Failed, Window: lc.Duration(time.Duration(p.RunWindow))}
	for _, m := range p.Members {
		out.Members = append(out.Members, views.PoolMemberRow{Name: m.Name, StatusName: m.StatusName, Reason: m.Reason,
			Runs: m.Runs, Failed: m.Failed})
	}
	for _, t := range p.Tasks {
		out.Tasks = append(out.Tasks, views.PoolTaskRow{ID: t.ID, Title: t.Title, Selector: t.Selector, StatusName: t.Status.String()})
	}
	for i := range events {
		e := &events[i]
		meaning, _ := eventMeaning(e.Action, e.Outcome)
		out.Events = append(out.Events, views.PoolEventRow{At: utcText(e.At), AtISO: e.At.UTC().Format(time.RFC3339),
			Ago: ago(lc, e.At, now), Node: e.Target, Action: e.Action, What: lc.T(poolEventActions[e.Action]), Meaning: meaning,
			Detail: e.Detail, Actor: e.Actor})
	}
	return out
}

// poolURL is a pool's console page. Label keys and values hold only
// URL-safe characters.
func poolURL(label string) string { return "/pools/" + label }

// poolEvents returns, by pool label, the recent events of members joining
// and leaving: registrations, recoveries, offline, deletions and label
// changes of the nodes that carry or declare the pool's label (a worker an
// admin moved out declares it still), and label changes that name it.
// Newest first, at most shown each.
func (s *server) poolEvents(c *gin.Context, pools []master.Pool, nodes []master.Node, shown int) (map[string][]master.Event, error) {
	out := map[string][]master.Event{}
	if len(pools) == 0 {
		return out, nil
	}
	evs, _, err := s.m.Reads().ListEventsFor(c.Request.Context(), master.EventFilter{Action: "node.",
		TargetType: master.TargetNode, Limit: poolEventsScan}, isAdmin(c))
	if err != nil {
		return nil, err
	}
	related := map[string]map[string]bool{} // node -> the key=value labels it carries or declares
	for i := range nodes {
		n := &nodes[i]
		set := map[string]bool{}
		for _, l := range []protocol.Labels{master.NodeLabels(n), master.DeclaredLabels(n)} {
			for k, v := range l {
				set[k+"="+v] = true
			}
		}
		related[n.Name] = set
	}
	for _, e := range evs {
		if _, ok := poolEventActions[e.Action]; !ok {
			continue
		}
		for _, p := range pools {
			if len(out[p.Label]) >= shown {
				continue
			}
			if related[e.Target][p.Label] || (e.Action == "node.labels" && namesLabel(e.Detail, p.Label)) {
				out[p.Label] = append(out[p.Label], e)
			}
		}
	}
	return out, nil
}

// namesLabel says whether an event detail ("worker labels: a=1,pool=x")
// holds the label key=value as one of its items.
func namesLabel(detail, label string) bool {
	_, list, _ := strings.Cut(detail, ": ")
	for item := range strings.SplitSeq(list, ",") {
		if strings.TrimSpace(item) == label {
			return true
		}
	}
	return false
}

// poolsRedirect is where an action on a pool leads back to: the pool's page
// when it came from there and the pool still exists, else the Pools page of
// the pool's key.
func (s *server) poolsRedirect(ctx context.Context, label string, fromDetail bool) string {
	if fromDetail {
		if _, err := s.m.Pools().Get(ctx, label); err == nil {
			return poolURL(label)
		}
	}
	key, _, _ := strings.Cut(label, "=")
	if (protocol.Labels{key: "x"}).Validate() != nil {
		return "/pools" // a refused pool's key may be anything
	}
	return withQuery("/pools", url.Values{"key": {key}})
}
