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

// batches holds the open batch of each worker.
type batches struct {
	mu   sync.Mutex
	open map[string]*sendBatch
}

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
// one by one.
func (svc *DelayedTasks) flushBatch(ctx context.Context, snd *sender, sb *sendBatch) {
	defer close(sb.done)
	sb.errs = make([]error, len(sb.specs))
	select {
	case snd.slots <- struct{}{}:
	case <-ctx.Done():
		for i := range sb.errs {
			sb.errs[i] = errStoppedUnsent
		}
		return
	}
	defer func() { <-snd.slots }()
	client := svc.delayedClient()
	if len(sb.specs) > 1 {
		errs, err := client.TaskRunOnceBatch(ctx, &sb.node, sb.specs)
		if err == nil {
			copy(sb.errs, errs)
			return
		}
		if !IsNoRoute(err) {
			for i := range sb.errs {
				sb.errs[i] = err
			}
			return
		}
	}
	for i := range sb.specs {
		sb.errs[i] = client.TaskRunOnce(ctx, &sb.node, sb.specs[i], nil)
	}
}
