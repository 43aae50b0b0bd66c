package master

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/schedulemaster-go/schedulemaster/store"
)

// newNameWindow is the window of MaxNewNamesPerMinute.
const newNameWindow = time.Minute

// nameRate counts this master's recent registrations of new node names, so
// that a leaked cluster key cannot flood the node table.
type nameRate struct {
	mu    sync.Mutex
	times []time.Time
}

// admit counts one new name at now, or refuses with KindLimited when
// MaxNewNamesPerMinute were admitted in the last minute.
func (r *nameRate) admit(now time.Time) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	kept := r.times[:0]
	for _, t := range r.times {
		if now.Sub(t) < newNameWindow {
			kept = append(kept, t)
		}
	}
	r.times = kept
	if len(r.times) >= MaxNewNamesPerMinute {
		wait := newNameWindow - now.Sub(r.times[0])
		return &Error{Kind: KindLimited, RetryAfter: wait,
			Msg: fmt.Sprintf("too many new node names: at most %d register per minute; try again in %s", MaxNewNamesPerMinute, wait.Round(time.Second))}
	}
	r.times = append(r.times, now)
	return nil
}

// admitNewName bounds self-registration of new names: at most
// MaxNewNamesPerMinute per master (KindLimited), and at most MaxPendingNodes
// waiting for approval (KindState), so a leaked cluster key cannot flood the
// node table.
func (nd *Nodes) admitNewName(ctx context.Context, now time.Time) error {
	if err := nd.m.newNames.admit(now); err != nil {
		return err
	}
	if !nd.m.settings.inForce().ApproveNewNodes {
		return nil
	}
	n, err := store.CountPendingNodes(ctx, nd.m.st.DB)
	if err != nil {
		return err
	}
	if n >= MaxPendingNodes {
		return Errorf(KindState, "%d nodes already wait for approval (the maximum); an admin must approve or delete some first", n)
	}
	return nil
}

// pendingRefusal is the answer to a machine whose name waits for approval:
// it keeps registering (with backoff) and is let in once approved.
func pendingRefusal(name string) error {
	return &Error{Kind: KindForbidden, Msg: fmt.Sprintf("node %s waits for an admin's approval; it gets no task until then", name)}
}

// Approve lets a pending node in: it becomes an auto worker and gets its
// secret and tasks when it next registers (its retries come within 30 s).
// Approving a node approves the labels its worker declares now; approving
// one that is neither pending nor declares labels waiting for approval
// changes nothing and is no error.
func (nd *Nodes) Approve(ctx context.Context, name string) (*store.Node, error) {
	if err := requireClusterAdmin(ctx); err != nil {
		return nil, err
	}
	defer nd.m.locks.lock(name)()
	err := store.ApproveNode(ctx, nd.m.st.DB, name)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return nil, Errorf(KindNotFound, "there is no node %s", name)
	case errors.Is(err, store.ErrConflict):
		// Already approved, or never needed it: its labels that wait for
		// approval (declared since) are approved now.
		n, err := store.GetNode(ctx, nd.m.st.DB, name)
		if err != nil {
			return nil, mapStoreErr(err, name)
		}
		if pending := PendingLabels(n); n.Type == store.TypeWorker && len(pending) > 0 {
			if err := store.SetNodeApprovedLabels(ctx, nd.m.st.DB, name, n.Labels); err != nil {
				return nil, err
			}
			if n, err = store.GetNode(ctx, nd.m.st.DB, name); err != nil {
				return nil, mapStoreErr(err, name)
			}
			changes, err := syncNodeMembers(ctx, nd.m.st.DB, n)
			if err != nil {
				return nil, err
			}
			nd.m.pools.applyMemberChanges(ctx, changes)
			nd.m.events.record(ctx, "node.approve", store.TargetNode, name, nil, "labels "+pending.String())
			nd.m.tasks.nodeChanged()
		}
		return nd.Get(ctx, name)
	case err != nil:
		return nil, err
	}
	nd.m.log.Info("node approved", "node", name, "by", ActorFrom(ctx))
	nd.m.events.record(ctx, "node.approve", store.TargetNode, name, nil, "")
	nd.m.tasks.nodeChanged()
	return nd.Get(ctx, name)
}

// prunePendingNodes deletes, as leader, the nodes that waited for approval
// longer than PendingNodeTTL.
func (nd *Nodes) prunePendingNodes(ctx context.Context) {
	names, err := store.PrunePendingNodes(ctx, nd.m.st.DB, time.Now().Add(-PendingNodeTTL))
	if err != nil {
		nd.m.log.Error("prune pending nodes", "err", err)
	}
	for _, name := range names {
		nd.m.events.record(ctx, "node.delete", store.TargetNode, name, nil, fmt.Sprintf("waited for approval longer than %s", PendingNodeTTL))
	}
	if len(names) > 0 {
		nd.m.tasks.nodeChanged()
	}
}
