// Pool membership: a task's selector selects the approved workers whose
// labels match it. The master keeps the selected members as executor rows
// (task_executors.selected) in step with labels and selectors, so that
// everything that asks "who executes this task" (claims, routing, shards,
// misfires, reports, the console) sees named and selected members alike, on
// every master, from the database. A fire runs on the members running at its
// moment.

package master

import (
	"cmp"
	"context"
	"encoding/json"
	"slices"
	"strings"
	"time"

	"github.com/uptrace/bun"

	"github.com/schedulemaster-go/schedulemaster/protocol"
	"github.com/schedulemaster-go/schedulemaster/store"
)

// labelsOf decodes a stored labels column; a broken one counts as none.
func labelsOf(js string) protocol.Labels {
	var l protocol.Labels
	if js != "" {
		_ = json.Unmarshal([]byte(js), &l)
	}
	if l == nil {
		l = protocol.Labels{}
	}
	return l
}

// encodeLabels is the stored form of labels: a JSON object, keys sorted.
func encodeLabels(l protocol.Labels) string {
	if len(l) == 0 {
		return "{}"
	}
	b, _ := json.Marshal(l) // map keys are sorted: equal labels, equal text
	return string(b)
}

// NodeLabels returns a node's labels in force: the labels its worker
// declares, overridden by those an admin set.
func NodeLabels(n *Node) protocol.Labels {
	return protocol.MergeLabels(trustedLabels(n), labelsOf(n.AdminLabels))
}

// trustedLabels are the declared labels that may select n: those approved
// (all of them for a node from before approved labels were kept).
func trustedLabels(n *Node) protocol.Labels {
	if n.ApprovedLabels == "" {
		return labelsOf(n.Labels)
	}
	approved := labelsOf(n.ApprovedLabels)
	out := protocol.Labels{}
	for k, v := range labelsOf(n.Labels) {
		if approved[k] == v {
			out[k] = v
		}
	}
	return out
}

// PendingLabels returns the labels a node's worker declares that wait for
// an admin's approval (with approval on): they select nothing until then.
func PendingLabels(n *Node) protocol.Labels {
	trusted := trustedLabels(n)
	out := protocol.Labels{}
	for k, v := range labelsOf(n.Labels) {
		if trusted[k] != v {
			out[k] = v
		}
	}
	return out
}

// DeclaredLabels returns the labels a node's worker declares (--labels).
func DeclaredLabels(n *Node) protocol.Labels { return labelsOf(n.Labels) }

// AdminLabels returns the labels an admin set on a node.
func AdminLabels(n *Node) protocol.Labels { return labelsOf(n.AdminLabels) }

// selectable says whether a selector may select n: an approved worker.
func selectable(n *store.Node) bool {
	return n.Type == store.TypeWorker && n.Mode != store.ModePending
}

// canonicalSelector is a submitted selector in its one stored spelling
// (trimmed, requirements and values sorted; "" selects none), or the
// parser's error, which points at the character.
func canonicalSelector(s string) (string, error) {
	sel, err := protocol.ParseSelector(strings.TrimSpace(s))
	if err != nil {
		return "", err
	}
	return sel.String(), nil
}

// selectorSet parses each distinct selector once per pass; a stored
// selector that no longer parses (it was validated when saved) selects none.
type selectorSet map[string]protocol.Selector

func (s selectorSet) matches(selector string, l protocol.Labels) bool {
	sel, ok := s[selector]
	if !ok {
		sel, _ = protocol.ParseSelector(selector)
		s[selector] = sel
	}
	return sel.Matches(l)
}

// memberChange is a membership that came (added) or went.
type memberChange struct {
	task, node string
	added      bool
}

// syncNodeMembers brings the selected memberships of one node in step with
// its labels now, and returns what changed.
func syncNodeMembers(ctx context.Context, db bun.IDB, n *store.Node) ([]memberChange, error) {
	tasks, err := store.SelectorTasks(ctx, db, nil) // every project: membership is the engine's bookkeeping
	if err != nil {
		return nil, err
	}
	have, err := store.SelectedTasksOf(ctx, db, n.Name)
	if err != nil {
		return nil, err
	}
	want := map[string]bool{}
	if selectable(n) {
		labels, sels := NodeLabels(n), selectorSet{}
		for _, t := range tasks {
			if sels.matches(t.Selector, labels) {
				want[t.ID] = true
			}
		}
	}
	var pairs []store.Membership
	for id := range want {
		pairs = append(pairs, store.Membership{TaskID: id, Node: n.Name})
	}
	var had []store.Membership
	for _, id := range have {
		had = append(had, store.Membership{TaskID: id, Node: n.Name})
	}
	return applyMemberships(ctx, db, had, pairs)
}

// syncTaskMembers brings the selected members of one task in step with its
// selector ("" selects none) and the workers' labels now.
func syncTaskMembers(ctx context.Context, db bun.IDB, taskID, selector string) ([]memberChange, error) {
	have, err := store.SelectedMembersOf(ctx, db, taskID)
	if err != nil {
		return nil, err
	}
	var want []store.Membership
	if selector != "" {
		workers, err := store.Workers(ctx, db)
		if err != nil {
			return nil, err
		}
		sels := selectorSet{}
		for i := range workers {
			if selectable(&workers[i]) && sels.matches(selector, NodeLabels(&workers[i])) {
				want = append(want, store.Membership{TaskID: taskID, Node: workers[i].Name})
			}
		}
	}
	var had []store.Membership
	for _, n := range have {
		had = append(had, store.Membership{TaskID: taskID, Node: n})
	}
	return applyMemberships(ctx, db, had, want)
}

// reconcileMembers brings every selected membership in step: the leader's
// periodic pass, which repairs what racing edits left behind (a task saved
// while a worker's labels changed) and what another master changed.
func reconcileMembers(ctx context.Context, db bun.IDB) ([]memberChange, error) {
	tasks, err := store.SelectorTasks(ctx, db, nil) // every project: membership is the engine's bookkeeping
	if err != nil {
		return nil, err
	}
	have, err := store.SelectedMemberships(ctx, db)
	if err != nil {
		return nil, err
	}
	var want []store.Membership
	if len(tasks) > 0 {
		workers, err := store.Workers(ctx, db)
		if err != nil {
			return nil, err
		}
		sels := selectorSet{}
		for i := range workers {
			if !selectable(&workers[i]) {
				continue
			}
			labels := NodeLabels(&workers[i])
			for _, t := range tasks {
				if sels.matches(t.Selector, labels) {
					want = append(want, store.Membership{TaskID: t.ID, Node: workers[i].Name})
				}
			}
		}
	}
	return applyMemberships(ctx, db, have, want)
}

// applyMemberships adds the memberships of want missing from have and
// removes those of have missing from want. A member that leaves keeps a run
// grant, so the report of a run it had started is still accepted.
func applyMemberships(ctx context.Context, db bun.IDB, have, want []store.Membership) ([]memberChange, error) {
	had := make(map[store.Membership]bool, len(have))
	for _, p := range have {
		had[p] = true
	}
	var out []memberChange
	for _, p := range want {
		if had[p] {
			delete(had, p)
			continue
		}
		added, err := store.AddSelected(ctx, db, p.TaskID, p.Node)
		if err != nil {
			return out, err
		}
		if added {
			out = append(out, memberChange{task: p.TaskID, node: p.Node, added: true})
		}
	}
	for p := range had {
		removed, err := store.RemoveSelected(ctx, db, p.TaskID, p.Node)
		if err != nil {
			return out, err
		}
		if removed {
			if err := store.AddRunGrant(ctx, db, p.TaskID, p.Node); err != nil {
				return out, err
			}
			out = append(out, memberChange{task: p.TaskID, node: p.Node})
		}
	}
	slices.SortFunc(out, func(a, b memberChange) int {
		return cmp.Or(cmp.Compare(a.task, b.task), cmp.Compare(a.node, b.node))
	})
	return out, nil
}

// applyMemberChanges tells the running members what changed for the running
// and paused tasks: a member that joined is given the task, one that left is
// told to stop it. Broadcast shards and misfire windows follow through
// nodeChanged. A push that fails is repaired by the re-push of the node's
// tasks when it next registers or recovers, and by the claims, which refuse
// a node that is no longer a member.
func (pl *Pools) applyMemberChanges(ctx context.Context, changes []memberChange) {
	if len(changes) == 0 {
		return
	}
	for _, c := range changes {
		verb := "left"
		if c.added {
			verb = "joined"
		}
		pl.m.log.Info("pool member "+verb, "task", c.task, "node", c.node)
		pl.pushMemberChange(ctx, c)
	}
	pl.m.tasks.nodeChanged()
}

// pushMemberChange pushes one membership change to its node, under the
// task's lock so that it never races a start or stop of the task.
func (pl *Pools) pushMemberChange(ctx context.Context, c memberChange) {
	defer pl.m.locks.lock("task:" + c.task)()
	t, err := pl.m.tasks.Get(ctx, c.task)
	if err != nil || (t.Status != store.TaskRunning && t.Status != store.TaskPaused) {
		return
	}
	n, err := store.GetNode(ctx, pl.m.st.DB, c.node)
	if err != nil || n.Status != store.StatusRunning || n.Type != store.TypeWorker {
		return
	}
	pctx, cancel := context.WithTimeout(ctx, pl.m.cfg.CallTimeout+time.Second)
	defer cancel()
	if c.added {
		err = pl.m.client.TaskStart(pctx, n, t.specFor(n.Name, pl.m.tasks.shardSet(pctx, t)))
	} else {
		err = pl.m.client.TaskOp(pctx, n, protocol.PathTaskStop, t.ID)
	}
	if err != nil {
		pl.m.log.Warn("pool member push failed; repaired when the node registers or recovers", "task", c.task, "node", c.node, "added", c.added, "err", err)
	}
}

// reconcilePools is the leader's pass over the memberships (after each sweep).
func (pl *Pools) reconcilePools(ctx context.Context) {
	changes, err := reconcileMembers(ctx, pl.m.st.DB)
	if err != nil {
		pl.m.log.Error("pool membership: reconcile", "err", err)
	}
	pl.applyMemberChanges(ctx, changes)
}
