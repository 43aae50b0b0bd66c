// A node's whole schedule in parts of pushPart tasks read a page at a time,
// so that a worker with 100,000 tasks costs the master one page of memory
// and each call a bounded time: pushed to every worker at once after a
// restart or a failover (pushTasks), fetched page by page by a worker that
// registers (Tasks.Page).

package master

import (
	"cmp"
	"context"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/schedulemaster-go/schedulemaster/protocol"
	"github.com/schedulemaster-go/schedulemaster/store"
)

// pushPart is how many tasks one part of a push carries (and how many the
// master reads and holds at once for it).
const pushPart = 1000

// repushParallel bounds how many workers a re-push serves at once.
const repushParallel = 8

// pushTasks makes node n schedule its running and paused tasks, and only
// those: in parts (protocol.PathStartupPart), or in one body for a worker
// too old for parts. n is the node as the master saw it before the push.
func (tk *Tasks) pushTasks(parent context.Context, n *store.Node) error {
	tk.m.pools.refreshMembers(parent, n.Name)
	ctx, cancel := context.WithCancel(parent)
	defer cancel()
	// The next page is read while the current one is on its way: two
	// pages held at most.
	pages := make(chan pushPage, 1)
	go func() {
		defer close(pages)
		after := ""
		for {
			rows, next, last, err := store.TasksOfNodePage(ctx, tk.m.st.DB, n.Name, after, pushPart)
			p := pushPage{last: last, err: err, n: len(rows)}
			if err == nil {
				p.specs = tk.specsOf(ctx, n.Name, rows)
			}
			select {
			case pages <- p:
			case <-ctx.Done():
				return
			}
			if err != nil || last {
				return
			}
			after = next
		}
	}()
	session := protocol.NewNonce()
	start, sent := time.Now(), 0
	pushed := map[string]bool{} // for the check after the push (verifyPushLater)
	for first := true; ; first = false {
		p, ok := <-pages
		if !ok {
			return ctx.Err()
		}
		if p.err != nil {
			return p.err
		}
		err := tk.m.client.StartupPart(ctx, n, session, first, p.last, p.specs)
		if first && IsNoRoute(err) {
			cancel() // the reader stops: the old worker gets all in one body
			return tk.m.client.Startup(parent, n, tk.tasksFor(parent, n.Name))
		}
		if err != nil {
			return err
		}
		sent += p.n
		if pushed != nil {
			for i := range p.specs {
				pushed[p.specs[i].ID] = true
			}
			if len(pushed) > maxVerifiedPush {
				pushed = nil // too many to hold: no check after this push
			}
		}
		if p.last {
			tk.m.log.Info("tasks pushed", "node", n.Name, "tasks", sent, "took", time.Since(start).Round(time.Millisecond))
			if pushed != nil {
				tk.verifyPushLater(n.Name, pushed)
			}
			return nil
		}
	}
}

// taskPage reads a page of node's running and paused tasks after the
// cursor after, as node receives them; more says tasks follow, from next on.
func (tk *Tasks) taskPage(ctx context.Context, node, after string, limit int) (specs []protocol.TaskSpec, next string, more bool, err error) {
	rows, next, last, err := store.TasksOfNodePage(ctx, tk.m.st.DB, node, after, limit)
	if err != nil {
		return nil, "", false, err
	}
	return tk.specsOf(ctx, node, rows), next, !last, nil
}

// Page answers a registered worker's fetch of the rest of its tasks
// (protocol.PathMasterTasks) after the cursor of its registration answer or
// of the page before: a page of at most protocol.MaxTaskBatch, read by key
// as a push reads them. The master keeps nothing between pages, so the next
// one may come from another master. A node that is not running (disabled,
// offline since) gets none.
//
// Why the worker pulls rather than the master pushing after its answer: the
// worker opens its session (worker.partSession) before it sends the
// registration, so every task operation a master sends it after reading a
// page is seen by that session and wins over the page; the worker asks
// for a page only once it has applied the one before, so no part overtakes
// another; and a master that dies half-way costs nothing, the worker asks
// the next master from the same cursor. A push would need the worker to
// hold parts that come before the answer, and a session no one ends when
// its master dies.
func (tk *Tasks) Page(ctx context.Context, n *store.Node, req protocol.TasksPageRequest) (protocol.TasksPageResponse, error) {
	if len(req.After) > protocol.MaxCursorLen || !utf8.ValidString(req.After) || strings.ContainsRune(req.After, 0) {
		return protocol.TasksPageResponse{}, Errorf(KindInvalid, "after must be a task id (at most %d chars)", protocol.MaxCursorLen)
	}
	if req.Limit < 0 || req.Limit > protocol.MaxTaskBatch {
		return protocol.TasksPageResponse{}, Errorf(KindInvalid, "limit must be from 1 to %d (0: %d)", protocol.MaxTaskBatch, pushPart)
	}
	if n.Status != store.StatusRunning {
		return protocol.TasksPageResponse{}, Errorf(KindState, "node %s is %s: it is given no tasks until it registers or is enabled again", n.Name, n.Status)
	}
	specs, after, more, err := tk.taskPage(ctx, n.Name, req.After, cmp.Or(req.Limit, pushPart))
	if err != nil {
		tk.m.log.Error("load tasks of node", "node", n.Name, "err", err)
		return protocol.TasksPageResponse{}, mapStoreErr(err, n.Name)
	}
	tk.m.connections.attach(ctx, specs)
	return protocol.TasksPageResponse{Tasks: specs, More: more, After: after}, nil
}

// pushPage is one page of a push: what its tasks' executor is sent.
type pushPage struct {
	specs []protocol.TaskSpec
	n     int
	last  bool
	err   error
}

// repushTasks gives every running worker its running tasks again: after a
// master restart the master's view is the truth, whatever a worker kept.
// Workers are served at once (up to repushParallel), each in parts.
func (tk *Tasks) repushTasks(ctx context.Context) {
	nodes, err := store.ListNodesByStatus(ctx, tk.m.st.DB, store.StatusRunning)
	if err != nil {
		tk.m.log.Error("re-push tasks: list nodes", "err", err)
		return
	}
	start, workers := time.Now(), 0
	sem := make(chan struct{}, repushParallel)
	var wg sync.WaitGroup
	for i := range nodes {
		n := &nodes[i]
		if n.Type != store.TypeWorker {
			continue
		}
		workers++
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			if err := tk.pushTasks(ctx, n); err != nil {
				tk.m.log.Warn("re-push tasks failed; the health checker will deal with the node", "node", n.Name, "err", err)
			}
		})
	}
	wg.Wait()
	tk.m.log.Info("tasks re-pushed to the running workers", "workers", workers, "took", time.Since(start).Round(time.Millisecond))
}

// maxVerifiedPush bounds the task ids a push keeps for its check.
const maxVerifiedPush = 20_000

// verifyPushLater checks a push once the task operations that may have
// raced it are done: a push carries the tasks as read before it was sent,
// so a task started (or stopped) on node by any master between that read
// and the push's arrival was dropped (or given back) by it. Once every such
// operation has had its call timeout and more, the node's tasks are read
// again and each that differs from the push is given to the node, or taken
// from it, as it stands then.
func (tk *Tasks) verifyPushLater(node string, pushed map[string]bool) {
	tk.m.life.goBackground(func(ctx context.Context) {
		wait := time.NewTimer(tk.m.cfg.CallTimeout + time.Second)
		defer wait.Stop()
		select {
		case <-ctx.Done():
			return
		case <-wait.C:
		}
		tk.verifyPush(ctx, node, pushed)
	})
}

// verifyPush repairs node's schedule where it differs from what was pushed.
func (tk *Tasks) verifyPush(ctx context.Context, node string, pushed map[string]bool) {
	now := map[string]bool{}
	for after := ""; ; {
		rows, next, last, err := store.TasksOfNodePage(ctx, tk.m.st.DB, node, after, pushPart)
		if err != nil {
			tk.m.log.Warn("check of a push: read the node's tasks", "node", node, "err", err)
			return
		}
		for i := range rows {
			now[rows[i].ID] = true
		}
		if last {
			break
		}
		after = next
	}
	var differ []string
	for id := range now {
		if !pushed[id] {
			differ = append(differ, id)
		}
	}
	for id := range pushed {
		if !now[id] {
			differ = append(differ, id)
		}
	}
	for _, id := range differ {
		tk.repairPushed(ctx, node, id)
	}
	if len(differ) > 0 {
		tk.m.log.Info("a push raced task operations: those tasks were given to the node again as they stand",
			"node", node, "tasks", len(differ))
	}
}

// repairPushed gives node task id as it stands now, under the task's lock:
// its definition when the task is running or paused there, a stop otherwise.
func (tk *Tasks) repairPushed(ctx context.Context, node, id string) {
	defer tk.m.locks.lock("task:" + id)()
	n, err := store.GetNode(ctx, tk.m.st.DB, node)
	if err != nil || n.Status != store.StatusRunning {
		return // gone or down: it gets its tasks when it comes back
	}
	t, err := tk.Get(ctx, id)
	if err == nil && (t.Status == store.TaskRunning || t.Status == store.TaskPaused) && slices.Contains(t.members(), node) {
		err = tk.m.client.TaskStart(ctx, n, t.specFor(node, tk.shardSet(ctx, t)))
	} else if err == nil || KindOf(err) == KindNotFound {
		err = tk.m.client.TaskOp(ctx, n, protocol.PathTaskStop, id)
	}
	if err != nil {
		tk.m.log.Warn("check of a push: repair failed; the node's next push repairs it", "node", node, "task", id, "err", err)
	}
}
