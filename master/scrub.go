package master

import (
	"context"
	"encoding/json"

	"github.com/schedulemaster-go/schedulemaster/protocol"
	"github.com/schedulemaster-go/schedulemaster/store"
)

// scrubRuns masks, by value, the secret values of each run's task in its
// output before it is stored: workers mask them already, but an older or
// hostile worker may not, and whatever shows a run later (the run page, the
// search, notifications, events) reads the stored output. One query loads
// the specs of the batch's tasks whose runs have output.
func (g *runIngest) scrubRuns(ctx context.Context, rows []store.Run) error {
	var ids []string
	for i := range rows {
		if rows[i].Output != "" {
			ids = append(ids, rows[i].TaskID)
		}
	}
	if len(ids) == 0 {
		return nil
	}
	scrubbers, err := g.scrubbers(ctx, dedupe(ids))
	if err != nil {
		return err
	}
	for i := range rows {
		// A mask is longer than the shortest values: the output stays bounded.
		rows[i].Output = tailOutput(scrubbers[rows[i].TaskID].Scrub(rows[i].Output), protocol.MaxOutputBytes)
	}
	return nil
}

// scrubbers builds the scrubber of each task of ids from its stored
// definition (nil for a task without secret values).
func (g *runIngest) scrubbers(ctx context.Context, ids []string) (map[string]*protocol.Scrubber, error) {
	specs, err := store.TaskSpecs(ctx, g.db, ids)
	if err != nil {
		return nil, err
	}
	out := make(map[string]*protocol.Scrubber, len(specs))
	for id, spec := range specs {
		var def protocol.TaskDef
		if err := json.Unmarshal([]byte(spec), &def); err != nil {
			// Other paths refuse a broken definition; its runs are still stored.
			g.log.Warn("run output not scrubbed: the task's definition does not decode", "task", id, "err", err)
			continue
		}
		out[id] = protocol.NewScrubber(&def)
	}
	return out, nil
}

// scrubProgress masks the task's secret values in a worker's view of a run
// in progress, as scrubRuns does for stored output.
func (g *runIngest) scrubProgress(ctx context.Context, taskID string, p *protocol.RunProgress) error {
	scrubbers, err := g.scrubbers(ctx, []string{taskID})
	if err != nil {
		return err
	}
	sc := scrubbers[taskID]
	p.Waiting, p.Output = sc.Scrub(p.Waiting), sc.Scrub(p.Output)
	return nil
}
