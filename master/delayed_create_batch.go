// Batch creation of delayed tasks: many in one call, checked one by one,
// written a chunk at a time in one transaction, each reported on its own.

package master

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/uptrace/bun"

	"github.com/schedulemaster-go/schedulemaster/protocol"
	"github.com/schedulemaster-go/schedulemaster/store"
)

// MaxDelayedBatch bounds the delayed tasks of one batch creation.
const MaxDelayedBatch = 10_000

// delayedChunk is how many delayed tasks of a batch are written in one
// transaction.
const delayedChunk = 1000

// DelayedBatchResult is the outcome of a batch creation for one delayed task
// of the request, by its place in it (Index): Created, or the pending task of
// the same source_app, topic and content_key (OK, not Created), or Error (and
// Fields) saying why not.
type DelayedBatchResult struct {
	Index   int                  `json:"index"`
	ID      string               `json:"id,omitempty"`
	OK      bool                 `json:"ok"`
	Created bool                 `json:"created"`
	Status  string               `json:"status,omitempty"`
	Error   string               `json:"error,omitempty"`
	Fields  protocol.FieldErrors `json:"fields,omitempty"`
}

// CreateDelayedBatch creates each of ins as CreateDelayed creates one, each
// on its own: an input that is not valid, or of a project whoever asks may
// not edit, is reported and never stops the others. The valid ones are
// written delayedChunk at a time, one transaction each (a chunk that meets
// a task created meanwhile is written one by one). The results are in the
// order of ins.
func (svc *DelayedTasks) CreateDelayedBatch(ctx context.Context, ins []DelayedInput, by string) ([]DelayedBatchResult, error) {
	if len(ins) == 0 {
		return nil, Errorf(KindInvalid, "no delayed task given: send at least one")
	}
	if len(ins) > MaxDelayedBatch {
		return nil, Errorf(KindInvalid, "%d delayed tasks given: at most %d at once", len(ins), MaxDelayedBatch)
	}
	if p := PrincipalFrom(ctx); p != nil && !p.CanAnywhere(ActEdit) {
		return nil, Errorf(KindForbidden, "forbidden: your role may not %s in any project", actionVerb[ActEdit])
	}
	now := time.Now()
	out := make([]DelayedBatchResult, len(ins))
	projects := map[string]*Project{}
	rows := make([]*store.DelayedTask, len(ins))
	for i := range ins {
		out[i].Index = i
		name := strings.TrimSpace(ins[i].Project)
		p, ok := projects[name]
		var err error
		if !ok {
			if p, err = projectNamed(ctx, svc.db, name); err == nil {
				projects[name] = p
			}
		}
		if err == nil {
			err = authorize(ctx, p.ID, ActEdit, projectNotFound(p.Name))
		}
		if err == nil {
			rows[i], err = svc.checkDelayedInput(ctx, &ins[i], now, p)
		}
		if err != nil {
			if KindOf(err) == 0 {
				return nil, err
			}
			var fe protocol.FieldErrors
			if errors.As(err, &fe) {
				out[i].Fields = fe
			}
			out[i].Error = Message(err)
			continue
		}
		rows[i].CreatedBy = by
	}
	var idx []int
	for i, r := range rows {
		if r != nil {
			idx = append(idx, i)
		}
	}
	var first time.Time
	evs := make([]store.Event, 0, len(idx))
	for chunk := range slices.Chunk(idx, delayedChunk) {
		batch := make([]*store.DelayedTask, len(chunk))
		for j, i := range chunk {
			batch[j] = rows[i]
		}
		var got []*store.DelayedTask
		var created []bool
		err := store.RetryTx(ctx, svc.db, func(ctx context.Context, tx bun.Tx) error {
			var err error
			got, created, err = store.CreateDelayedBatch(ctx, tx, batch)
			return err
		})
		if err != nil {
			if !errors.Is(err, store.ErrBatchRace) {
				svc.log.Warn("delayed batch: the chunk failed as a whole; creating its tasks one by one", "tasks", len(chunk), "err", err)
			}
			got, created = make([]*store.DelayedTask, len(batch)), make([]bool, len(batch))
			for j, d := range batch {
				if got[j], created[j], err = store.CreateDelayed(ctx, svc.db, d); err != nil {
					svc.log.Error("create delayed task", "err", err)
				}
			}
		}
		for j, i := range chunk {
			r := &out[i]
			if got[j] == nil {
				r.Error = "internal error; see the master's log"
				continue
			}
			r.ID, r.OK, r.Created, r.Status = got[j].ID, true, created[j], got[j].Status
			if !created[j] {
				continue
			}
			if first.IsZero() || got[j].DueAt.Before(first) {
				first = got[j].DueAt
			}
			evs = append(evs, store.Event{At: time.Now(), Actor: ActorFrom(ctx), Action: "delayed.create", TargetType: store.TargetDelayed,
				Target: got[j].ID, Outcome: store.OutcomeOK, ProjectID: got[j].ProjectID,
				Detail: fmt.Sprintf("%s/%s/%s due %s (batch)", got[j].SourceApp, got[j].Topic, got[j].ContentKey, got[j].DueAt.Format(time.RFC3339))})
		}
	}
	svc.events.recordAll(ctx, "delayed.create (batch)", evs)
	if !first.IsZero() {
		svc.pokeDelayed(first)
	}
	svc.log.Info("delayed tasks created in a batch", "given", len(ins), "created", len(evs), "by", by)
	return out, nil
}
