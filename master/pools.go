// Pools: the labels an admin sets on nodes, the pools the workers' labels
// form, pool approvals, a selector's preview, and the pruning of workers
// that vanished.

package master

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/schedulemaster-go/schedulemaster/protocol"
	"github.com/schedulemaster-go/schedulemaster/store"
)

// DefaultPoolKey is the label key the Pools view groups workers by unless
// told another.
const DefaultPoolKey = "pool"

// poolRunWindow is how far back a pool's runs and failures are counted.
const poolRunWindow = 10 * time.Minute

// SetLabels replaces the labels an admin set on a worker node (they win
// over the labels the worker declares) and brings its pool memberships in
// step at once: a running node is given the tasks that select it now and
// told to stop those that no longer do.
func (nd *Nodes) SetLabels(ctx context.Context, name string, labels protocol.Labels) (_ *Node, err error) {
	if err := requireClusterAdmin(ctx); err != nil {
		return nil, err
	}
	defer func() {
		nd.m.events.record(ctx, "node.labels", store.TargetNode, name, err, "admin labels: "+labels.String())
	}()
	if err := labels.Validate(); err != nil {
		return nil, protocol.FieldErrors{"labels": err.Error()}
	}
	unlock := nd.m.locks.lock(name)
	n, err := store.GetNode(ctx, nd.m.st.DB, name)
	if err != nil {
		unlock()
		return nil, mapStoreErr(err, name)
	}
	if n.Type != store.TypeWorker {
		unlock()
		return nil, Errorf(KindState, "%s is a master; only workers have labels", name)
	}
	if err := store.SetNodeAdminLabels(ctx, nd.m.st.DB, name, encodeLabels(labels)); err != nil {
		unlock()
		return nil, mapStoreErr(err, name)
	}
	n.AdminLabels = encodeLabels(labels)
	changes, err := syncNodeMembers(ctx, nd.m.st.DB, n)
	unlock()
	if err != nil {
		return nil, fmt.Errorf("master: pool membership of %s: %w", name, err)
	}
	nd.m.pools.applyMemberChanges(ctx, changes)
	nd.m.log.Info("node labels set", "node", name, "labels", labels.String())
	return nd.Get(ctx, name)
}

// noteDeclaredLabels records the labels a worker declared in a health
// answer when they differ from the stored ones, and brings its pool
// memberships in step (the leader's sweep calls it).
func (nd *Nodes) noteDeclaredLabels(ctx context.Context, n *store.Node, labels protocol.Labels) {
	if labels == nil || labels.Validate() != nil {
		return // an older worker, or nonsense: keep what registration stored
	}
	js := encodeLabels(labels)
	if js == n.Labels {
		return
	}
	defer nd.m.locks.lock(n.Name)()
	approved, err := nd.m.pools.approvedLabelsFor(ctx, n, labels)
	if err != nil {
		nd.m.log.Error("approved labels of node", "node", n.Name, "err", err)
		return
	}
	changed, err := store.SetNodeLabels(ctx, nd.m.st.DB, n.Name, js, approved)
	if err != nil || !changed {
		if err != nil {
			nd.m.log.Error("record node labels", "node", n.Name, "err", err)
		}
		return
	}
	fresh, err := store.GetNode(ctx, nd.m.st.DB, n.Name)
	if err != nil {
		return
	}
	changes, err := syncNodeMembers(ctx, nd.m.st.DB, fresh)
	if err != nil {
		nd.m.log.Error("pool membership of node", "node", n.Name, "err", err)
	}
	nd.m.events.record(WithActor(ctx, ActorHealthChecker), "node.labels", store.TargetNode, n.Name, nil, "worker labels: "+labels.String())
	nd.m.pools.applyMemberChanges(ctx, changes)
}

// PoolMember is a worker of a pool as the Pools view shows it.
type PoolMember struct {
	Name   string     `json:"name"`
	Status NodeStatus `json:"status"`
	// StatusName is Status in words.
	StatusName string `json:"status_name"`
	Reason     string `json:"reason,omitempty"`
	// Labels are the node's labels in force.
	Labels protocol.Labels `json:"labels"`
	Runs   int             `json:"runs"`
	Failed int             `json:"failed"`
}

// PoolTask is a task that selects a pool.
type PoolTask struct {
	ID       string     `json:"id"`
	Title    string     `json:"title"`
	Selector string     `json:"selector"`
	Status   TaskStatus `json:"status"`
}

// Pool is the workers that carry one label (key=value) and the tasks that
// select them.
type Pool struct {
	Key   string `json:"key"`
	Value string `json:"value"`
	// Label is "key=value".
	Label string `json:"label"`
	// Approved says new workers carrying the label join without per-node
	// approval (when the cluster requires approval).
	Approved bool         `json:"approved"`
	Members  []PoolMember `json:"members"`
	Running  int          `json:"running"`
	Tasks    []PoolTask   `json:"tasks"`
	// Runs and Failed count the members' runs over the last RunWindow.
	Runs      int               `json:"runs"`
	Failed    int               `json:"failed"`
	RunWindow protocol.Duration `json:"run_window"`
}

// List returns the pools formed by the values of one label key (""
// means DefaultPoolKey), by value, with pools approved but empty too.
func (pl *Pools) List(ctx context.Context, key string) ([]Pool, error) {
	key = strings.TrimSpace(key)
	if key == "" {
		key = DefaultPoolKey
	}
	if err := (protocol.Labels{key: "x"}).Validate(); err != nil {
		return nil, Errorf(KindInvalid, "pool key: %v", err)
	}
	workers, err := store.Workers(ctx, pl.m.st.DB)
	if err != nil {
		return nil, err
	}
	approvals, err := store.ListPoolApprovals(ctx, pl.m.st.DB)
	if err != nil {
		return nil, err
	}
	// Only the tasks of projects whoever asks may read are listed.
	tasks, err := store.SelectorTasks(ctx, pl.m.st.DB, readableProjects(ctx))
	if err != nil {
		return nil, err
	}
	counts, err := store.RunCountsByNodeSince(ctx, pl.m.st.DB, time.Now().Add(-poolRunWindow), readableProjects(ctx))
	if err != nil {
		return nil, err
	}
	byValue := map[string]*Pool{}
	pool := func(v string) *Pool {
		p := byValue[v]
		if p == nil {
			p = &Pool{Key: key, Value: v, Label: key + "=" + v, Members: []PoolMember{}, Tasks: []PoolTask{},
				RunWindow: protocol.Duration(poolRunWindow)}
			byValue[v] = p
		}
		return p
	}
	for i := range workers {
		labels := NodeLabels(&workers[i])
		v, ok := labels[key]
		if !ok {
			continue
		}
		p := pool(v)
		c := counts[workers[i].Name]
		p.Members = append(p.Members, PoolMember{Name: workers[i].Name, Status: workers[i].Status,
			StatusName: workers[i].Status.String(), Reason: workers[i].Reason, Labels: labels, Runs: c.Runs, Failed: c.Failed})
		p.Runs += c.Runs
		p.Failed += c.Failed
		if workers[i].Status == store.StatusRunning {
			p.Running++
		}
	}
	for _, a := range approvals {
		if k, v, ok := strings.Cut(a.Label, "="); ok && k == key {
			pool(v).Approved = true
		}
	}
	// A task selects a pool when its selector matches the pool's label
	// alone or one of its members.
	sels := selectorSet{}
	titles := map[string]string{}
	for _, p := range byValue {
		for _, t := range tasks {
			hit := sels.matches(t.Selector, protocol.Labels{key: p.Value})
			for j := 0; !hit && j < len(p.Members); j++ {
				hit = sels.matches(t.Selector, p.Members[j].Labels)
			}
			if hit {
				p.Tasks = append(p.Tasks, PoolTask{ID: t.ID, Selector: t.Selector, Status: t.Status})
				titles[t.ID] = ""
			}
		}
	}
	if len(titles) > 0 {
		ids := make([]string, 0, len(titles))
		for id := range titles {
			ids = append(ids, id)
		}
		if titles, err = store.TaskTitles(ctx, pl.m.st.DB, ids); err != nil {
			return nil, err
		}
	}
	out := make([]Pool, 0, len(byValue))
	for _, p := range byValue {
		for i := range p.Tasks {
			p.Tasks[i].Title = titles[p.Tasks[i].ID]
		}
		out = append(out, *p)
	}
	slices.SortFunc(out, func(a, b Pool) int { return strings.Compare(a.Value, b.Value) })
	return out, nil
}

// Get returns one pool, "key=value"; a pool with no member, no task
// and no approval does not exist.
func (pl *Pools) Get(ctx context.Context, label string) (*Pool, error) {
	key, value, ok := strings.Cut(label, "=")
	if !ok {
		return nil, Errorf(KindInvalid, "a pool is named key=value, for example pool=billing")
	}
	pools, err := pl.List(ctx, key)
	if err != nil {
		return nil, err
	}
	for i := range pools {
		if pools[i].Value == value {
			return &pools[i], nil
		}
	}
	return nil, Errorf(KindNotFound, "pool %s has no member, no task and no approval", printable(label))
}

// checkPoolLabel validates a pool's "key=value".
func checkPoolLabel(label string) (string, error) {
	l, err := protocol.ParseLabels(label)
	if err != nil {
		return "", Errorf(KindInvalid, "%v", err)
	}
	if len(l) != 1 {
		return "", Errorf(KindInvalid, "a pool is one label, key=value, for example pool=billing")
	}
	return l.String(), nil
}

// Approve lets new workers that declare label ("key=value") join
// without per-node approval while the cluster requires approval. A pending
// node already waiting with that label is approved too.
func (pl *Pools) Approve(ctx context.Context, label, by string) (err error) {
	if err := requireClusterAdmin(ctx); err != nil {
		return err
	}
	defer func() { pl.m.events.record(ctx, "pool.approve", store.TargetNode, "", err, label) }()
	label, err = checkPoolLabel(label)
	if err != nil {
		return err
	}
	if err := store.ApprovePool(ctx, pl.m.st.DB, label, by); err != nil {
		return err
	}
	pl.m.log.Info("pool approved", "pool", label, "by", by)
	pending, err := store.ListNodes(ctx, pl.m.st.DB)
	if err != nil {
		return err
	}
	k, v, _ := strings.Cut(label, "=")
	for i := range pending {
		n := &pending[i]
		if n.Type != store.TypeWorker || DeclaredLabels(n)[k] != v || (n.Mode != store.ModePending && trustedLabels(n)[k] == v) {
			continue
		}
		if n.Mode == store.ModePending {
			if _, err := pl.m.nodes.Approve(ctx, n.Name); err != nil && !errors.Is(err, ErrState) {
				pl.m.log.Warn("approve pending member of an approved pool", "node", n.Name, "err", err)
				continue
			}
			// In through this pool: only the approved pools' labels
			// select it, not whatever else it declares.
			n.ApprovedLabels = "{}"
		}
		if err := pl.approveDeclared(ctx, n, n.Mode == store.ModePending); err != nil {
			pl.m.log.Warn("approve the pool's label on a node", "node", n.Name, "err", err)
		}
	}
	return nil
}

// approvedLabelsFor returns the labels a worker declares that may select
// it (JSON), given what was approved before (old; nil for a new node).
// With approval off every declared label is approved. With it on, a label
// is approved when it was before, or when it names an approved pool: a
// worker that declares a new label (re-registering with the same name and
// key) gets nothing through it until an admin approves the node's labels
// or that pool.
func (pl *Pools) approvedLabelsFor(ctx context.Context, old *store.Node, declared protocol.Labels) (string, error) {
	if !pl.m.settings.inForce().ApproveNewNodes {
		return encodeLabels(declared), nil
	}
	prev := protocol.Labels{}
	if old != nil && old.Mode != store.ModePending {
		prev = trustedLabels(old)
	}
	pools, err := store.ListPoolApprovals(ctx, pl.m.st.DB)
	if err != nil {
		return "", err
	}
	approvedPool := make(map[string]bool, len(pools))
	for _, p := range pools {
		approvedPool[p.Label] = true
	}
	out := protocol.Labels{}
	for k, v := range declared {
		if prev[k] == v || approvedPool[k+"="+v] {
			out[k] = v
		}
	}
	return encodeLabels(out), nil
}

// approveDeclared recomputes which of n's declared labels are approved
// (an approved pool's label now is) and brings its pool memberships in
// step; fresh says n.ApprovedLabels was just reset.
func (pl *Pools) approveDeclared(ctx context.Context, n *store.Node, fresh bool) error {
	old := n
	if fresh {
		c := *n
		c.Mode = store.ModeAuto
		old = &c
	}
	approved, err := pl.approvedLabelsFor(ctx, old, DeclaredLabels(n))
	if err != nil {
		return err
	}
	if err := store.SetNodeApprovedLabels(ctx, pl.m.st.DB, n.Name, approved); err != nil {
		return err
	}
	got, err := store.GetNode(ctx, pl.m.st.DB, n.Name)
	if err != nil {
		return err
	}
	changes, err := syncNodeMembers(ctx, pl.m.st.DB, got)
	if err != nil {
		return err
	}
	pl.applyMemberChanges(ctx, changes)
	return nil
}

// Revoke withdraws a pool's approval; its members stay.
func (pl *Pools) Revoke(ctx context.Context, label string) (err error) {
	if err := requireClusterAdmin(ctx); err != nil {
		return err
	}
	defer func() { pl.m.events.record(ctx, "pool.revoke", store.TargetNode, "", err, label) }()
	label, err = checkPoolLabel(label)
	if err != nil {
		return err
	}
	if err := store.RevokePoolApproval(ctx, pl.m.st.DB, label); err != nil {
		if errors.Is(err, store.ErrNotFound) {
			return Errorf(KindNotFound, "pool %s is not approved", label)
		}
		return err
	}
	return nil
}

// approvedPool returns the first of a registering worker's labels that an
// admin approved as a pool, or "".
func (pl *Pools) approvedPool(ctx context.Context, labels protocol.Labels) (string, error) {
	if len(labels) == 0 {
		return "", nil
	}
	pairs := make([]string, 0, len(labels))
	for k, v := range labels {
		pairs = append(pairs, k+"="+v)
	}
	return store.PoolApprovedAmong(ctx, pl.m.st.DB, pairs)
}

// SelectorMatch is what a selector selects now.
type SelectorMatch struct {
	// Selector is the canonical spelling.
	Selector string `json:"selector"`
	// Running are the running workers it selects; Others those it selects
	// that do not run now (offline, idle), by name.
	Running []string `json:"running"`
	Others  []string `json:"others"`
}

// MatchSelector returns the approved workers a selector selects now; a bad
// selector is KindInvalid with the sentence that points at the character.
func (pl *Pools) MatchSelector(ctx context.Context, selector string) (*SelectorMatch, error) {
	sel, err := protocol.ParseSelector(strings.TrimSpace(selector))
	if err != nil {
		return nil, Errorf(KindInvalid, "%v", err)
	}
	out := &SelectorMatch{Selector: sel.String(), Running: []string{}, Others: []string{}}
	if sel.Empty() {
		return out, nil
	}
	workers, err := store.Workers(ctx, pl.m.st.DB)
	if err != nil {
		return nil, err
	}
	for i := range workers {
		if !sel.Matches(NodeLabels(&workers[i])) {
			continue
		}
		if workers[i].Status == store.StatusRunning {
			out.Running = append(out.Running, workers[i].Name)
		} else {
			out.Others = append(out.Others, workers[i].Name)
		}
	}
	return out, nil
}

// pruneOfflineWorkers deletes the auto-registered workers offline for
// longer than the setting (0: never), with an event each: an autoscaled
// fleet leaves no dead rows behind.
func (nd *Nodes) pruneOfflineWorkers(ctx context.Context) {
	after := nd.m.settings.inForce().PruneOfflineAfter
	if after <= 0 {
		return
	}
	names, err := store.PruneOfflineWorkers(ctx, nd.m.st.DB, time.Now().Add(-after), 500)
	if err != nil {
		nd.m.log.Error("prune offline workers", "err", err)
	}
	for _, name := range names {
		nd.m.events.record(ctx, "node.delete", store.TargetNode, name, nil,
			fmt.Sprintf("pruned: offline for longer than %s", hours(after)))
	}
	if len(names) > 0 {
		nd.m.log.Info("offline workers pruned", "nodes", len(names))
		nd.m.tasks.nodeChanged()
	}
}

// hours writes a duration of whole hours as "24h" or "365 days".
func hours(d time.Duration) string {
	if d >= 48*time.Hour && d%(24*time.Hour) == 0 {
		return fmt.Sprintf("%d days", d/(24*time.Hour))
	}
	return strings.TrimSuffix(strings.TrimSuffix(d.String(), "0s"), "0m")
}
