package master

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/uptrace/bun"

	"github.com/schedulemaster-go/schedulemaster/protocol"
	"github.com/schedulemaster-go/schedulemaster/store"
)

// Bounds of the versions kept per task (setting task_versions_kept): older
// ones are deleted when a save makes a new one, except those recent runs
// used.
const (
	DefaultTaskVersionsKept = 100
	MinTaskVersionsKept     = 10
	MaxTaskVersionsKept     = 10_000
)

// recentRunsForVersions is how many of a task's latest runs keep the
// versions they ran from being pruned: a run's page links its version.
const recentRunsForVersions = 10_000

// Where a version was saved from.
const (
	ViaConsole = "console"
	ViaAPI     = "api"
	ViaApply   = "apply"
	ViaBulk    = "bulk"
	ViaRestore = "restore"
	// ViaBefore marks the definition a task had before versions were kept,
	// written when such a task is first saved.
	ViaBefore = "before versions"
)

// maxVersionNote bounds a version's change note, in characters.
const maxVersionNote = 1000

// TaskVersion is one saved definition of a task as the API shows it: who
// saved it, when, from where, and (for one version) the definition with its
// secrets masked.
type TaskVersion struct {
	Version   int       `json:"version"`
	Title     string    `json:"title"`
	CreatedAt time.Time `json:"created_at"`
	CreatedBy string    `json:"created_by"`
	Via       string    `json:"via"`
	Note      string    `json:"note,omitempty"`
	// Current says it is the definition in force.
	Current bool `json:"current"`
	// Definition is the saved task, secrets masked: in the answer for one
	// version only.
	Definition *VersionDef `json:"definition,omitempty"`
}

// VersionDef is a saved definition: the task's own fields and who runs it.
type VersionDef struct {
	protocol.TaskDef
	Executors []string `json:"executors"`
	Selector  string   `json:"selector"`
	Keepers   []string `json:"keepers"`
	Children  []string `json:"children"`
}

type viaKey struct{}

// withVia says where the saves made with ctx come from.
func withVia(ctx context.Context, via string) context.Context {
	return context.WithValue(ctx, viaKey{}, via)
}

// viaOf is where a save comes from: what withVia said, else the API for a
// caller with a token, the console for the others.
func viaOf(ctx context.Context) string {
	if v, ok := ctx.Value(viaKey{}).(string); ok && v != "" {
		return v
	}
	if p := PrincipalFrom(ctx); p != nil && p.Token != "" {
		return ViaAPI
	}
	return ViaConsole
}

// newVersion is the version row a save of row makes, by whoever ctx names.
func newVersion(ctx context.Context, row *store.Task, note string) (store.TaskVersion, error) {
	def := VersionDef{Executors: row.Executors, Selector: row.Selector}
	if err := json.Unmarshal([]byte(row.Spec), &def.TaskDef); err != nil {
		return store.TaskVersion{}, fmt.Errorf("master: version of task %s: %w", row.ID, err)
	}
	def.ID = ""
	if err := json.Unmarshal([]byte(row.Keepers), &def.Keepers); err != nil {
		return store.TaskVersion{}, fmt.Errorf("master: version of task %s: keepers: %w", row.ID, err)
	}
	if err := json.Unmarshal([]byte(row.Children), &def.Children); err != nil {
		return store.TaskVersion{}, fmt.Errorf("master: version of task %s: children: %w", row.ID, err)
	}
	js, err := json.Marshal(def)
	if err != nil {
		return store.TaskVersion{}, fmt.Errorf("master: version of task %s: %w", row.ID, err)
	}
	return store.TaskVersion{TaskID: row.ID, Version: row.Version, Title: row.Title, Definition: string(js),
		CreatedBy: ActorFrom(ctx), Via: viaOf(ctx), Note: note}, nil
}

// noteProblem says what is wrong with a version's change note, "" if nothing.
func noteProblem(note string) string {
	switch {
	case !utf8.ValidString(note) || strings.ContainsRune(note, 0):
		return "must be text (UTF-8, no NUL)"
	case utf8.RuneCountInString(note) > maxVersionNote:
		return fmt.Sprintf("must be at most %d characters", maxVersionNote)
	}
	return ""
}

// writeVersion records row's new version in tx, and cur's as it was when
// cur is a task from before versions (it has none yet), then deletes the
// versions past the setting task_versions_kept, but none that one of the
// task's latest recentRunsForVersions runs ran.
func (tk *Tasks) writeVersion(ctx context.Context, tx bun.IDB, cur, row *store.Task, note string) error {
	var vs []store.TaskVersion
	if cur != nil {
		if _, err := store.GetTaskVersion(ctx, tx, cur.ID, cur.Version); errors.Is(err, store.ErrNotFound) {
			before, err := newVersion(ctx, cur, "")
			if err != nil {
				return err
			}
			before.CreatedBy, before.Via, before.CreatedAt = cur.CreatedBy, ViaBefore, cur.UpdatedAt
			vs = append(vs, before)
		} else if err != nil {
			return err
		}
	}
	v, err := newVersion(ctx, row, note)
	if err != nil {
		return err
	}
	vs = append(vs, v)
	if err := store.AddTaskVersions(ctx, tx, vs); err != nil {
		return err
	}
	if keep := tk.m.settings.inForce().TaskVersionsKept; cur != nil && row.Version > keep {
		used, err := store.RecentRunVersions(ctx, tx, row.ID, recentRunsForVersions)
		if err != nil {
			return err
		}
		if _, err := store.PruneTaskVersions(ctx, tx, row.ID, keep, used); err != nil {
			return err
		}
	}
	return nil
}

// conflictIfMoved refuses an edit that started from another version than
// the task's: someone saved it since, and saving over it would lose their
// change.
func (tk *Tasks) conflictIfMoved(ctx context.Context, cur *store.Task, from int) error {
	if from == 0 || from == cur.Version {
		return nil
	}
	who, when := cur.CreatedBy, cur.UpdatedAt
	if v, err := store.GetTaskVersion(ctx, tk.m.st.DB, cur.ID, cur.Version); err == nil {
		who, when = v.CreatedBy, v.CreatedAt
	}
	return &Error{Kind: KindState, Err: ErrVersionMoved, Msg: fmt.Sprintf(
		"task %s changed since version %d: %s saved version %d at %s; reload it and make your change again",
		cur.ID, from, who, cur.Version, when.UTC().Format(time.RFC3339))}
}

// VersionsPage bounds a page of Versions.
const (
	DefaultVersionsPage = 100
	MaxVersionsPage     = 500
)

// Versions lists a task's kept versions older than before (from the
// newest when 0), newest first, at most limit (DefaultVersionsPage when 0,
// at most MaxVersionsPage), without their definitions. more says older
// ones follow the page.
func (tk *Tasks) Versions(ctx context.Context, id string, before, limit int) (_ []TaskVersion, more bool, err error) {
	switch {
	case before < 0:
		return nil, false, Errorf(KindInvalid, "before must be a version number")
	case limit == 0:
		limit = DefaultVersionsPage
	case limit < 0 || limit > MaxVersionsPage:
		return nil, false, Errorf(KindInvalid, "limit must be from 1 to %d", MaxVersionsPage)
	}
	t, err := tk.Get(ctx, id)
	if err != nil {
		return nil, false, err
	}
	rows, err := store.TaskVersions(ctx, tk.m.st.DB, id, before, limit+1)
	if err != nil {
		return nil, false, err
	}
	if len(rows) > limit {
		rows, more = rows[:limit], true
	}
	out := make([]TaskVersion, 0, len(rows))
	for _, r := range rows {
		out = append(out, versionOf(&r, t.Version))
	}
	return out, more, nil
}

// Version returns one version of a task with its definition, secrets
// masked.
func (tk *Tasks) Version(ctx context.Context, id string, n int) (*TaskVersion, error) {
	v, def, err := tk.version(ctx, id, n)
	if err != nil {
		return nil, err
	}
	def.TaskDef = MaskTaskDef(def.TaskDef)
	v.Definition = def
	return v, nil
}

// version reads version n of task id, definition unmasked.
func (tk *Tasks) version(ctx context.Context, id string, n int) (*TaskVersion, *VersionDef, error) {
	t, err := tk.Get(ctx, id)
	if err != nil {
		return nil, nil, err
	}
	row, err := store.GetTaskVersion(ctx, tk.m.st.DB, id, n)
	if errors.Is(err, store.ErrNotFound) {
		return nil, nil, Errorf(KindNotFound, "task %s has no version %d (no longer kept, or never made)", id, n)
	}
	if err != nil {
		return nil, nil, err
	}
	def := new(VersionDef)
	if err := json.Unmarshal([]byte(row.Definition), def); err != nil {
		return nil, nil, fmt.Errorf("master: task %s version %d: %w", id, n, err)
	}
	v := versionOf(row, t.Version)
	return &v, def, nil
}

func versionOf(r *store.TaskVersion, current int) TaskVersion {
	return TaskVersion{Version: r.Version, Title: r.Title, CreatedAt: r.CreatedAt.UTC(), CreatedBy: r.CreatedBy, Via: r.Via,
		Note: r.Note, Current: r.Version == current}
}

// Restore makes version n of a task its definition again, as a new version
// (an edit like any other: a running task switches in place).
func (tk *Tasks) Restore(ctx context.Context, id string, n int, note string) (*Task, error) {
	_, def, err := tk.version(ctx, id, n)
	if err != nil {
		return nil, err
	}
	if note == "" {
		note = fmt.Sprintf("restored version %d", n)
	}
	in := TaskInput{TaskDef: def.TaskDef, Executors: def.Executors, Selector: def.Selector, Keepers: def.Keepers,
		Children: def.Children, Note: note}
	return tk.Update(withVia(ctx, ViaRestore), id, in)
}
