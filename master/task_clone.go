// Cloning tasks: a new, stopped task with another's definition.

package master

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/schedulemaster-go/schedulemaster/protocol"
	"github.com/schedulemaster-go/schedulemaster/store"
)

// cloneSuffix marks the title of a copy.
const cloneSuffix = " (copy)"

// CloneTitle is the title of a copy of a task titled title: "title (copy)",
// the title shortened (on a character boundary) when both would not fit.
func CloneTitle(title string) string {
	title = strings.TrimSpace(title)
	if keep := protocol.MaxTitleLen - utf8.RuneCountInString(cloneSuffix); utf8.RuneCountInString(title) > keep {
		title = strings.TrimSpace(string([]rune(title)[:keep]))
	}
	return title + cloneSuffix
}

// Clone stores a stopped copy of task id, titled by CloneTitle: the same
// definition, secrets included (read from the store, never from a masked
// view), executors, keepers and children. It answers the new task.
func (tk *Tasks) Clone(ctx context.Context, id, by string) (*Task, error) {
	_, src, err := tk.taskFor(ctx, id, ActEdit)
	if err != nil {
		return nil, err
	}
	in := TaskInput{Project: src.Project, TaskDef: src.TaskDef, Executors: src.Executors, Selector: src.Selector, Keepers: src.Keepers, Children: src.Children}
	in.Title = CloneTitle(src.Title)
	in.Key = "" // a key names one task
	t, err := tk.Create(ctx, in, by)
	if err == nil {
		tk.m.log.Info("task cloned", "from", id, "task", t.ID, "by", by)
	}
	return t, err
}

// CreateCopy stores a new, stopped task from in, a copy of task srcID as
// the clone form sent it: a secret header, param or URL password sent back as
// the mask takes srcID's stored value, as an edit keeps it; a new value
// replaces it. The secrets never have to be shown to be copied.
func (tk *Tasks) CreateCopy(ctx context.Context, srcID string, in TaskInput, by string) (*Task, error) {
	cur, err := store.GetTask(ctx, tk.m.st.DB, srcID)
	if err != nil {
		return nil, mapTaskErr(err, srcID)
	}
	// Copying secrets is editing: only who may edit the source may.
	if err := authorize(ctx, cur.ProjectID, ActEdit, taskNotFound(srcID)); err != nil {
		return nil, err
	}
	var stored protocol.TaskDef
	if err := json.Unmarshal([]byte(cur.Spec), &stored); err != nil {
		return nil, fmt.Errorf("master: task %s: stored definition: %w", srcID, err)
	}
	if err := keepSecretsForSameHost(&in.TaskDef, &stored); err != nil {
		return nil, err
	}
	return tk.Create(ctx, in, by)
}
