// Sendings of delayed tasks due together go to their worker in batches: one
// call carries up to protocol.MaxRunOnceBatch of them, so that 10,000 tasks
// due in the same second cost tens of calls, not 10,000.

package master

import (
	"context"
	"sync"
	"time"

	"github.com/schedulemaster-go/schedulemaster/protocol"
	"github.com/schedulemaster-go/schedulemaster/store"
)

// Batch bounds: a batch is sent once it holds sendBatchMax sendings or
// sendBatchBytes of request, or sendBatchLinger after its first sending
// joined it; a task alone waits no longer than that.
const (
	sendBatchMax    = protocol.MaxRunOnceBatch
	sendBatchBytes  = 4 << 20
	sendBatchLinger = 2 * time.Millisecond
)

// sendBatch is the open batch of one worker: the specs to send and, once
// sent, each one's outcome.
type sendBatch struct {
	node  store.Node
	specs []protocol.TaskSpec
	bytes int
	errs  []error
	done  chan struct{} // closed when errs is filled
}

// batches holds the open batch of each worker, and the worker processes
// (name and boot id) found too old for batches, sent one by one.
type batches struct {
	mu      sync.Mutex
	open    map[string]*sendBatch
	singles map[string]bool
}

// singleKey names a worker process for batches.singles: a restarted worker
// (a new boot id) may take batches.
func singleKey(n *store.Node) string { return n.Name + "/" + n.BootID }

// specBytes estimates the request size of a spec: what grows with it (body,
// URL, headers) and a margin for the rest.
func specBytes(s *protocol.TaskSpec) int {
	n := 1024 + len(s.ID) + len(s.Title)
	if h := s.HTTP; h != nil {
		n += 2*len(h.Body) + len(h.URL) + len(h.ContentType) // JSON may escape the body
		for k, v := range h.Headers {
			n += len(k) + 2*len(v)
		}
	}
	return n
}

// sendBatched sends spec to node in the node's open batch and returns its
// outcome, as TaskRunOnce would: nil when the worker started it.
func (svc *DelayedTasks) sendBatched(ctx context.Context, snd *sender, node store.Node, spec protocol.TaskSpec) error {
	b := &snd.batches
	size := specBytes(&spec)
	b.mu.Lock()
	if b.singles[singleKey(&node)] {
		b.mu.Unlock()
		return svc.sendSingle(ctx, snd, &node, spec)
	}
	if b.open == nil {
		b.open = map[string]*sendBatch{}
	}
	sb := b.open[node.Name]
	if sb != nil && sb.bytes+size > sendBatchBytes {
		delete(b.open, node.Name) // full: it goes now, this one opens the next
		go svc.flushBatch(ctx, snd, sb)
		sb = nil
	}
	if sb == nil {
		sb = &sendBatch{node: node, done: make(chan struct{})}
		b.open[node.Name] = sb
		time.AfterFunc(sendBatchLinger, func() {
			b.mu.Lock()
			mine := b.open[node.Name] == sb
			if mine {
				delete(b.open, node.Name)
			}
			b.mu.Unlock()
			if mine {
				svc.flushBatch(ctx, snd, sb)
			}
		})
	}
	i := len(sb.specs)
	sb.specs = append(sb.specs, spec)
	sb.bytes += size
	if len(sb.specs) >= sendBatchMax {
		delete(b.open, node.Name)
		go svc.flushBatch(ctx, snd, sb)
	}
	b.mu.Unlock()
	<-sb.done
	return sb.errs[i]
}

// flushBatch sends a closed batch within one of the sender's slots and hands
// each sending its outcome. A worker too old for batches gets the sendings
// one by one, each in a slot of its own, this batch's and all that follow.
func (svc *DelayedTasks) flushBatch(ctx context.Context, snd *sender, sb *sendBatch) {
	defer close(sb.done)
	sb.errs = make([]error, len(sb.specs))
	if len(sb.specs) > 1 {
		errs, err := svc.sendWhole(ctx, snd, sb)
		switch {
		case err == nil:
			copy(sb.errs, errs)
			return
		case !IsNoRoute(err):
			for i := range sb.errs {
				sb.errs[i] = err
			}
			return
		}
		b := &snd.batches
		b.mu.Lock()
		if b.singles == nil {
			b.singles = map[string]bool{}
		}
		b.singles[singleKey(&sb.node)] = true
		b.mu.Unlock()
	}
	var wg sync.WaitGroup
	for i := range sb.specs {
		wg.Go(func() { sb.errs[i] = svc.sendSingle(ctx, snd, &sb.node, sb.specs[i]) })
	}
	wg.Wait()
}

// sendWhole sends a batch in one call, within one of the sender's slots.
func (svc *DelayedTasks) sendWhole(ctx context.Context, snd *sender, sb *sendBatch) ([]error, error) {
	select {
	case snd.slots <- struct{}{}:
	case <-ctx.Done():
		return nil, errStoppedUnsent
	}
	defer func() { <-snd.slots }()
	return svc.delayedClient().TaskRunOnceBatch(ctx, &sb.node, sb.specs)
}

// sendSingle sends one sending in a call of its own, within one of the
// sender's slots.
func (svc *DelayedTasks) sendSingle(ctx context.Context, snd *sender, node *store.Node, spec protocol.TaskSpec) error {
	select {
	case snd.slots <- struct{}{}:
	case <-ctx.Done():
		return errStoppedUnsent
	}
	defer func() { <-snd.slots }()
	return svc.delayedClient().TaskRunOnce(ctx, node, spec, nil)
}
