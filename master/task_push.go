// Pushing a node's whole schedule: in parts of pushPart tasks read a page
// at a time, so that a worker with 100,000 tasks costs the master one page
// of memory and each call a bounded time; every worker at once after a
// restart or a failover.

package master

import (
	"context"
	"sync"
	"time"

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
func (m *Master) pushTasks(parent context.Context, n *store.Node) error {
	m.refreshMembers(parent, n.Name)
	ctx, cancel := context.WithCancel(parent)
	defer cancel()
	// The next page is read while the current one is on its way: two
	// pages held at most.
	pages := make(chan pushPage, 1)
	go func() {
		defer close(pages)
		after := ""
		for {
			rows, next, last, err := store.TasksOfNodePage(ctx, m.st.DB, n.Name, after, pushPart)
			p := pushPage{last: last, err: err, n: len(rows)}
			if err == nil {
				p.specs = m.specsOf(ctx, n.Name, rows)
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
	for first := true; ; first = false {
		p, ok := <-pages
		if !ok {
			return ctx.Err()
		}
		if p.err != nil {
			return p.err
		}
		err := m.client.StartupPart(ctx, n, session, first, p.last, p.specs)
		if first && IsNoRoute(err) {
			cancel() // the reader stops: the old worker gets all in one body
			return m.client.Startup(parent, n, m.tasksFor(parent, n.Name))
		}
		if err != nil {
			return err
		}
		sent += p.n
		if p.last {
			m.log.Info("tasks pushed", "node", n.Name, "tasks", sent, "took", time.Since(start).Round(time.Millisecond))
			return nil
		}
	}
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
func (m *Master) repushTasks(ctx context.Context) {
	nodes, err := store.ListNodesByStatus(ctx, m.st.DB, store.StatusRunning)
	if err != nil {
		m.log.Error("re-push tasks: list nodes", "err", err)
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
			if err := m.pushTasks(ctx, n); err != nil {
				m.log.Warn("re-push tasks failed; the health checker will deal with the node", "node", n.Name, "err", err)
			}
		})
	}
	wg.Wait()
	m.log.Info("tasks re-pushed to the running workers", "workers", workers, "took", time.Since(start).Round(time.Millisecond))
}
