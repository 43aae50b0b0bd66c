package master

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"time"

	"github.com/uptrace/bun"

	"github.com/schedulemaster-go/schedulemaster/store"
)

// maxWorkflowVersionsListed bounds a workflow's list of versions.
const maxWorkflowVersionsListed = 200

// WorkflowVersion is one saved definition of a workflow: who saved it,
// when, from where, what changed from the version before, and (for one
// version) the definition.
type WorkflowVersion struct {
	Version   int       `json:"version"`
	Title     string    `json:"title"`
	CreatedAt time.Time `json:"created_at"`
	CreatedBy string    `json:"created_by"`
	Via       string    `json:"via"`
	Note      string    `json:"note,omitempty"`
	// Current says it is the definition in force.
	Current bool `json:"current"`
	// Changes name what differs from the version before (answered for
	// one version): fields, and steps added, removed or changed.
	Changes    []string     `json:"changes,omitempty"`
	Definition *WorkflowDef `json:"definition,omitempty"`
}

// writeWorkflowVersion records row (just saved) as a version in tx, the
// definition cur had before versions were kept first, and prunes the
// oldest past the versions kept.
func (wf *Workflows) writeWorkflowVersion(ctx context.Context, tx bun.IDB, cur, row *store.Workflow, note string) error {
	if cur != nil {
		if _, err := store.GetWorkflowVersion(ctx, tx, cur.ID, cur.Version); errors.Is(err, store.ErrNotFound) {
			before := &store.WorkflowVersion{WorkflowID: cur.ID, Version: cur.Version, Title: cur.Title, Definition: cur.Definition,
				CreatedAt: cur.UpdatedAt, CreatedBy: cur.CreatedBy, Via: ViaBefore}
			if err := store.AddWorkflowVersion(ctx, tx, before); err != nil {
				return err
			}
		} else if err != nil {
			return err
		}
	}
	v := &store.WorkflowVersion{WorkflowID: row.ID, Version: row.Version, Title: row.Title, Definition: row.Definition,
		CreatedBy: ActorFrom(ctx), Via: viaOf(ctx), Note: note}
	if err := store.AddWorkflowVersion(ctx, tx, v); err != nil {
		return err
	}
	if keep := wf.m.settings.inForce().TaskVersionsKept; row.Version > keep {
		return store.PruneWorkflowVersions(ctx, tx, row.ID, row.Version, keep)
	}
	return nil
}

// Versions lists a workflow's saved versions, newest first.
func (wf *Workflows) Versions(ctx context.Context, id string) ([]WorkflowVersion, error) {
	row, err := wf.get(ctx, id, ActRead)
	if err != nil {
		return nil, err
	}
	rows, err := store.WorkflowVersions(ctx, wf.m.st.DB, id, maxWorkflowVersionsListed)
	if err != nil {
		return nil, err
	}
	out := make([]WorkflowVersion, len(rows))
	for i, r := range rows {
		out[i] = WorkflowVersion{Version: r.Version, Title: r.Title, CreatedAt: r.CreatedAt, CreatedBy: r.CreatedBy,
			Via: r.Via, Note: r.Note, Current: r.Version == row.Version}
	}
	return out, nil
}

// Version returns one version with its definition and what changed from
// the version before it.
func (wf *Workflows) Version(ctx context.Context, id string, n int) (*WorkflowVersion, error) {
	row, err := wf.get(ctx, id, ActRead)
	if err != nil {
		return nil, err
	}
	v, def, err := wf.version(ctx, id, n)
	if err != nil {
		return nil, err
	}
	out := &WorkflowVersion{Version: v.Version, Title: v.Title, CreatedAt: v.CreatedAt, CreatedBy: v.CreatedBy, Via: v.Via,
		Note: v.Note, Current: v.Version == row.Version, Definition: def}
	if _, prev, err := wf.version(ctx, id, n-1); err == nil {
		out.Changes = workflowChanges(prev, def)
	} else if KindOf(err) != KindNotFound {
		return nil, err
	}
	return out, nil
}

// version reads version n of a workflow and its definition.
func (wf *Workflows) version(ctx context.Context, id string, n int) (*store.WorkflowVersion, *WorkflowDef, error) {
	v, err := store.GetWorkflowVersion(ctx, wf.m.st.DB, id, n)
	if errors.Is(err, store.ErrNotFound) {
		return nil, nil, Errorf(KindNotFound, "workflow %s has no version %d (kept versions are listed at its versions)", id, n)
	}
	if err != nil {
		return nil, nil, err
	}
	def := new(WorkflowDef)
	if err := json.Unmarshal([]byte(v.Definition), def); err != nil {
		return nil, nil, fmt.Errorf("master: version %d of workflow %s: %w", n, id, err)
	}
	return v, def, nil
}

// Restore makes version n the workflow's definition again, as a new
// version (checked as any edit: its tasks must still be the project's).
func (wf *Workflows) Restore(ctx context.Context, id string, n int, note string) (*Workflow, error) {
	row, err := wf.get(ctx, id, ActEdit)
	if err != nil {
		return nil, err
	}
	_, def, err := wf.version(ctx, id, n)
	if err != nil {
		return nil, err
	}
	if note == "" {
		note = fmt.Sprintf("restored version %d", n)
	}
	return wf.Update(withVia(ctx, ViaRestore), id, WorkflowInput{WorkflowDef: *def, Version: row.Version, Note: note})
}

// workflowChanges names what differs from a to b: the fields, then the
// steps added, removed or changed, by name.
func workflowChanges(a, b *WorkflowDef) []string {
	var out []string
	field := func(name string, x, y any) {
		if !reflect.DeepEqual(x, y) {
			out = append(out, name)
		}
	}
	field("title", a.Title, b.Title)
	field("key", a.Key, b.Key)
	field("timeout", a.Timeout, b.Timeout)
	field("params", a.Params, b.Params)
	field("schedule", a.Schedule, b.Schedule)
	field("timezone", a.Timezone, b.Timezone)
	field("window", []any{a.StartAt, a.EndAt}, []any{b.StartAt, b.EndAt})
	field("overlap", a.Overlap, b.Overlap)
	field("misfire", a.Misfire, b.Misfire)
	before := map[string]WorkflowStep{}
	for _, s := range a.Steps {
		before[s.Name] = s
	}
	after := map[string]WorkflowStep{}
	for _, s := range b.Steps {
		after[s.Name] = s
		switch old, ok := before[s.Name]; {
		case !ok:
			out = append(out, "step "+s.Name+" added")
		case !reflect.DeepEqual(old, s):
			out = append(out, "step "+s.Name+" changed")
		}
	}
	for _, name := range slices.Sorted(maps.Keys(before)) {
		if _, ok := after[name]; !ok {
			out = append(out, "step "+name+" removed")
		}
	}
	return out
}
