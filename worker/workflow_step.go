package worker

import (
	"maps"
	"sync"

	"github.com/schedulemaster-go/schedulemaster/protocol"
)

// stepRef names the workflow run and step of a step's run; nil for every
// other run (its methods say "" then).
type stepRef struct{ wfRun, name string }

func (s *stepRef) run() string {
	if s == nil {
		return ""
	}
	return s.wfRun
}

func (s *stepRef) step() string {
	if s == nil {
		return ""
	}
	return s.name
}

// maxStepRunsSeen bounds the ids of workflow steps' runs a worker remembers
// having started: a master sends a step again only while it cannot tell
// whether the first sending arrived, within minutes, far fewer than this.
const maxStepRunsSeen = 10_000

// stepRunsSeen remembers the first-attempt ids of the workflow steps'
// runs this worker started, so that a step sent twice (a master that died
// between choosing its id and hearing the answer, and the next one
// sending it again) runs once.
type stepRunsSeen struct {
	mu   sync.Mutex
	seen map[runID]struct{}
	ring []runID // in the order seen; the oldest is forgotten first
	next int
}

// first records id and reports whether it was not seen before.
func (s *stepRunsSeen) first(id runID) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, dup := s.seen[id]; dup {
		return false
	}
	if s.seen == nil {
		s.seen = map[runID]struct{}{}
	}
	if len(s.ring) < maxStepRunsSeen {
		s.ring = append(s.ring, id)
	} else {
		delete(s.seen, s.ring[s.next])
		s.ring[s.next] = id
		s.next = (s.next + 1) % maxStepRunsSeen
	}
	s.seen[id] = struct{}{}
	return true
}

// withStepParams is spec with the step's params added to the task's (the
// step's win), on a copy: the scheduled task keeps its own.
func withStepParams(spec protocol.TaskSpec, wf *protocol.WorkflowRef) protocol.TaskSpec {
	if len(wf.Params) == 0 {
		return spec
	}
	params := make(map[string]string, len(spec.Params)+len(wf.Params))
	maps.Copy(params, spec.Params)
	maps.Copy(params, wf.Params)
	spec.Params = params
	return spec
}
