package master

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/schedulemaster-go/schedulemaster/protocol"
	"github.com/schedulemaster-go/schedulemaster/store"
)

// claimKey names one fire of one task.
type claimKey struct {
	task string
	fire int64
}

// claimRound gathers the claims of one fire. The winner is picked by priority
// weight among the executors that claimed, once all running executors have
// claimed or ClaimWait has passed: so the spread follows the weights, not whose
// clock is fastest, and a dead executor cannot hold a fire.
type claimRound struct {
	weights  map[string]int
	arrived  []string
	deciding bool
	done     chan struct{}
	winner   string
}

// claims is the master's table of open claim rounds.
type claims struct {
	mu     sync.Mutex
	rounds map[claimKey]*claimRound
}

// Claim decides whether node runs the given fire of a task.
func (m *Master) Claim(ctx context.Context, node *store.Node, req protocol.ClaimRequest) (protocol.ClaimResponse, error) {
	if req.TaskID == "" || req.FireAt.IsZero() {
		return protocol.ClaimResponse{}, Errorf(KindInvalid, "task_id and fire_at are required")
	}
	if !isRunID(req.TaskID, maxTaskIDLen) {
		return protocol.ClaimResponse{}, Errorf(KindInvalid, "task_id must be 1-%d letters, digits, '.', '_', ':' or '-'", maxTaskIDLen)
	}
	key := claimKey{task: req.TaskID, fire: req.FireAt.UTC().UnixNano()}
	m.claims.mu.Lock()
	if m.claims.rounds == nil {
		m.claims.rounds = map[claimKey]*claimRound{}
	}
	round := m.claims.rounds[key]
	executor := false
	if round != nil {
		_, executor = round.weights[node.Name]
	}
	m.claims.mu.Unlock()
	// Only an executor of the task may claim its fires; the running executors
	// of an open round are known already, anyone else is asked of the database.
	if !executor {
		ok, err := store.IsTaskExecutor(ctx, m.st.DB, req.TaskID, node.Name)
		if err != nil {
			return protocol.ClaimResponse{}, fmt.Errorf("master: claim: %w", err)
		}
		if !ok {
			return protocol.ClaimResponse{}, Errorf(KindForbidden, "node %s does not execute task %s", node.Name, req.TaskID)
		}
	}
	if round == nil {
		weights, err := m.claimWeights(ctx, req.TaskID)
		if err != nil {
			return protocol.ClaimResponse{}, err
		}
		m.claims.mu.Lock()
		if round = m.claims.rounds[key]; round == nil {
			round = &claimRound{weights: weights, done: make(chan struct{})}
			m.claims.rounds[key] = round
			time.AfterFunc(m.cfg.ClaimWait, func() { m.decide(key, round) })
		}
		m.claims.mu.Unlock()
	}

	m.claims.mu.Lock()
	_, executor = round.weights[node.Name]
	if executor && !round.deciding {
		round.arrived = append(round.arrived, node.Name)
		if len(round.arrived) >= len(round.weights) {
			round.deciding = true
			m.claims.mu.Unlock()
			m.finish(key, round)
		} else {
			m.claims.mu.Unlock()
		}
	} else {
		m.claims.mu.Unlock()
	}
	select {
	case <-round.done:
	case <-ctx.Done():
		return protocol.ClaimResponse{}, ctx.Err()
	}
	return protocol.ClaimResponse{Won: round.winner == node.Name, Winner: round.winner}, nil
}

// claimWeights returns the running executors of a running task with their priorities.
func (m *Master) claimWeights(ctx context.Context, taskID string) (map[string]int, error) {
	t, err := m.GetTask(ctx, taskID)
	if err != nil {
		return nil, err
	}
	weights := map[string]int{}
	if t.Status != store.TaskRunning {
		return weights, nil // paused or stopped: nobody runs this fire
	}
	nodes, err := m.runningExecutors(ctx, t)
	if err != nil {
		return nil, err
	}
	for _, n := range nodes {
		weights[n.Name] = n.Priority
	}
	return weights, nil
}

// decide is the ClaimWait timer: pick among whoever claimed by then.
func (m *Master) decide(key claimKey, round *claimRound) {
	m.claims.mu.Lock()
	if round.deciding {
		m.claims.mu.Unlock()
		return
	}
	round.deciding = true
	m.claims.mu.Unlock()
	m.finish(key, round)
}

// finish picks the winner, records it in the database (which wins over this
// pick if the fire was already claimed, e.g. before a master restart), wakes
// the waiting claims and forgets the round a little later.
func (m *Master) finish(key claimKey, round *claimRound) {
	m.claims.mu.Lock()
	cands := make([]Candidate, 0, len(round.arrived))
	for _, n := range round.arrived {
		cands = append(cands, Candidate{Name: n, Weight: round.weights[n]})
	}
	m.claims.mu.Unlock()
	// Counted as background work, so Stop waits for the database write; after
	// Stop nobody wins and the waiting claims are released.
	if done, tracked := m.track(); tracked {
		if pick, ok := PickWeighted(cands, m.cfg.RandN); ok {
			ctx, cancel := context.WithTimeout(m.ctx, 10*time.Second)
			winner, err := store.ClaimFire(ctx, m.st.DB, key.task, time.Unix(0, key.fire), pick.Name)
			cancel()
			if err != nil {
				m.log.Error("record fire claim", "task", key.task, "err", err)
			} else {
				round.winner = winner
			}
		}
		done()
	}
	close(round.done)
	time.AfterFunc(2*time.Minute, func() {
		m.claims.mu.Lock()
		delete(m.claims.rounds, key)
		m.claims.mu.Unlock()
	})
}
