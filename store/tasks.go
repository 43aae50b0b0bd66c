package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/uptrace/bun"
	"github.com/uptrace/bun/dialect"
)

// TaskStatus is a task's status column; it lives here for the reason given at
// NodeStatus, and master.TaskActions says what each status allows. The JSON API
// shows it as its number.
type TaskStatus int

// Task status values, as in ScheduleMaster.
const (
	TaskDeleted TaskStatus = -1
	TaskStopped TaskStatus = 0
	TaskRunning TaskStatus = 1
	TaskPaused  TaskStatus = 2
)

// TaskStatuses lists every task status, in order.
var TaskStatuses = []TaskStatus{TaskDeleted, TaskStopped, TaskRunning, TaskPaused}

// String names the status for messages and badges.
func (s TaskStatus) String() string {
	switch s {
	case TaskDeleted:
		return "deleted"
	case TaskStopped:
		return "stopped"
	case TaskRunning:
		return "running"
	case TaskPaused:
		return "paused"
	}
	return fmt.Sprintf("status %d", int(s))
}

// Task is a task row. Spec holds the definition (worker.TaskDef) as JSON, so
// the store does not depend on the wire types; Keepers and Children are JSON
// lists of user names and task ids.
type Task struct {
	bun.BaseModel `bun:"table:tasks"`

	ID string `bun:"id,pk"`
	// ProjectID is the project the task belongs to.
	ProjectID int64      `bun:"project_id"`
	Title     string     `bun:"title"`
	Type      string     `bun:"type"`
	Status    TaskStatus `bun:"status"`
	Spec      string     `bun:"spec"`
	Keepers   string     `bun:"keepers"`
	Children  string     `bun:"children"`
	// Selector is the task's label selector ("" for none): the running
	// workers it selects at fire time are executors too.
	Selector   string    `bun:"selector"`
	LastRunAt  time.Time `bun:"last_run_at,nullzero"`
	LastResult string    `bun:"last_result"`
	RunCount   int64     `bun:"run_count"`
	CreatedBy  string    `bun:"created_by"`
	CreatedAt  time.Time `bun:"created_at"`
	UpdatedAt  time.Time `bun:"updated_at"`
	// Version is the number of the definition in force (task_versions);
	// every save makes the next one.
	Version int `bun:"version"`

	// Executors are the nodes the task names, loaded from task_executors.
	Executors []string `bun:"-"`
	// Selected are the workers its selector selects (task_executors rows
	// the master keeps in step with labels; see SetSelectedMembers), named
	// ones excepted. A fire runs on the running ones of both.
	Selected []string `bun:"-"`
}

// Members returns the task's named and selected executors, by name.
func (t *Task) Members() []string {
	if len(t.Selected) == 0 {
		return t.Executors
	}
	out := append(slices.Clone(t.Executors), t.Selected...)
	slices.Sort(out)
	return slices.Compact(out)
}

// TaskExecutor assigns a task to a node: named by the task, or selected by
// its selector (Selected).
type TaskExecutor struct {
	bun.BaseModel `bun:"table:task_executors"`

	TaskID   string `bun:"task_id,pk"`
	Node     string `bun:"node,pk"`
	Selected bool   `bun:"selected"`
}

// CreateTask inserts a task and its executors; run it in a transaction.
func CreateTask(ctx context.Context, db bun.IDB, t *Task) error {
	now := time.Now().UTC()
	t.CreatedAt, t.UpdatedAt = now, now
	if t.ProjectID == 0 {
		t.ProjectID = DefaultProjectID
	}
	if t.Version == 0 {
		t.Version = 1
	}
	if _, err := db.NewInsert().Model(t).Exec(ctx); err != nil {
		return fmt.Errorf("store: create task: %w", err)
	}
	// A new task has no executor rows: only inserts, no DELETE first. On
	// InnoDB a DELETE that matches nothing locks the gap where the rows
	// would go, and concurrent creations that each hold such a gap and
	// then insert into it deadlock (Error 1213).
	return insertExecutors(ctx, db, t.ID, t.Executors)
}

// SetTaskExecutors replaces a task's named executors (a node named now
// stops counting as selected).
func SetTaskExecutors(ctx context.Context, db bun.IDB, taskID string, nodes []string) error {
	q := db.NewDelete().Model((*TaskExecutor)(nil)).Where("task_id = ?", taskID)
	if len(nodes) > 0 {
		q = q.WhereGroup(" AND ", func(q *bun.DeleteQuery) *bun.DeleteQuery {
			return q.Where("selected = ?", false).WhereOr("node IN (?)", bun.In(nodes))
		})
	} else {
		q = q.Where("selected = ?", false)
	}
	if _, err := q.Exec(ctx); err != nil {
		return fmt.Errorf("store: clear executors: %w", err)
	}
	return insertExecutors(ctx, db, taskID, nodes)
}

// insertExecutors adds a task's named executors, in name order (concurrent
// writers then take their locks in the same order).
func insertExecutors(ctx context.Context, db bun.IDB, taskID string, nodes []string) error {
	if len(nodes) == 0 {
		return nil
	}
	nodes = slices.Sorted(slices.Values(nodes))
	rows := make([]TaskExecutor, len(nodes))
	for i, n := range nodes {
		rows[i] = TaskExecutor{TaskID: taskID, Node: n}
	}
	if _, err := db.NewInsert().Model(&rows).Exec(ctx); err != nil {
		return fmt.Errorf("store: set executors: %w", err)
	}
	return nil
}

// GetTask returns a task (not deleted) with its executors, or ErrNotFound.
func GetTask(ctx context.Context, db bun.IDB, id string) (*Task, error) {
	t := new(Task)
	err := db.NewSelect().Model(t).Where("id = ?", id).Where("status <> ?", TaskDeleted).Scan(ctx)
	if err != nil {
		return nil, fmt.Errorf("store: get task %s: %w", id, notFound(err))
	}
	if err := loadExecutors(ctx, db, []*Task{t}); err != nil {
		return nil, err
	}
	return t, nil
}

// TaskProject returns the project of task id, deleted or not.
func TaskProject(ctx context.Context, db bun.IDB, id string) (int64, error) {
	var pid int64
	err := db.NewSelect().Table("tasks").Column("project_id").Where("id = ?", id).Scan(ctx, &pid)
	if err != nil {
		return 0, fmt.Errorf("store: task %s: %w", id, notFound(err))
	}
	return pid, nil
}

// loadExecutors fills the named and selected executors of tasks in one query.
func loadExecutors(ctx context.Context, db bun.IDB, tasks []*Task) error {
	if len(tasks) == 0 {
		return nil
	}
	byID := make(map[string]*Task, len(tasks))
	ids := make([]string, len(tasks))
	for i, t := range tasks {
		byID[t.ID], ids[i] = t, t.ID
	}
	for chunk := range slices.Chunk(ids, 500) {
		var rows []TaskExecutor
		if err := db.NewSelect().Model(&rows).Where("task_id IN (?)", bun.In(chunk)).OrderExpr("node ASC").Scan(ctx); err != nil {
			return fmt.Errorf("store: task executors: %w", err)
		}
		for _, r := range rows {
			t := byID[r.TaskID]
			if r.Selected {
				t.Selected = append(t.Selected, r.Node)
			} else {
				t.Executors = append(t.Executors, r.Node)
			}
		}
	}
	return nil
}

// loadExecutorsOf is loadExecutors for a slice of rows.
func loadExecutorsOf(ctx context.Context, db bun.IDB, tasks []Task) error {
	ptrs := make([]*Task, len(tasks))
	for i := range tasks {
		ptrs[i] = &tasks[i]
	}
	return loadExecutors(ctx, db, ptrs)
}

// TaskFilter narrows ListTasks.
type TaskFilter struct {
	Status *TaskStatus // nil: every status but deleted
	Title  string      // substring, case-insensitive
	Node   string      // executor
	// Projects limits the list to these projects; nil: every project.
	Projects []int64
	// After starts the page after this task (keyset paging; Offset is
	// then ignored).
	After  *Cursor
	Limit  int
	Offset int
	// CountLimit stops counting the matching rows past this many (0: count
	// them all), so a list over a large estate stays cheap; the total is then
	// at most CountLimit.
	CountLimit int
}

// ListTasks returns a page of tasks, newest first (ties of one creation
// instant by id, descending, so the page reads its index in order at any
// offset), and the total matching.
func ListTasks(ctx context.Context, db bun.IDB, f TaskFilter) ([]Task, int, error) {
	var tasks []Task
	// filter applies the conditions but the node's: the page and the count
	// each apply that one their own way.
	filter := func(q *bun.SelectQuery) *bun.SelectQuery {
		if f.Status != nil {
			q = q.Where("status = ?", *f.Status)
		} else {
			q = q.Where("status <> ?", TaskDeleted)
		}
		if f.Title != "" {
			q = q.Where(titleLike(db), "%"+escapeLikeBang(strings.ToLower(f.Title))+"%")
		}
		return inProjects(q, "project_id", f.Projects)
	}
	if f.Limit <= 0 {
		f.Limit = 50
	}
	page := filter(db.NewSelect().Model(&tasks))
	if f.Node != "" {
		page = page.Where("id IN (SELECT task_id FROM task_executors WHERE node = ?)", f.Node)
	}
	if f.After != nil {
		page, f.Offset = after(page, f.After, "created_at", "id", false, f.After.ID), 0
	}
	page, empty, err := pageAt[string](ctx, page, "created_at DESC, id DESC", f.Limit, f.Offset, f.Title != "" || f.Node != "")
	if err == nil && !empty {
		err = page.Scan(ctx)
	}
	if err != nil {
		return nil, 0, fmt.Errorf("store: list tasks: %w", err)
	}
	total, known := pageTotal(f.Offset, len(tasks), f.Limit, f.After != nil)
	if !known {
		count := filter(db.NewSelect().Model((*Task)(nil)))
		if f.Node != "" {
			// Driven by the node's executor rows: a node runs a few of
			// many tasks, and probing every task for it reads them all.
			// SQLite's CROSS JOIN keeps that order (its planner would
			// rather walk the tasks); the others plan it by statistics.
			join := "JOIN tasks ON tasks.id = te.task_id"
			if db.Dialect().Name() == dialect.SQLite {
				join = "CROSS " + join
			}
			count = filter(db.NewSelect().TableExpr("task_executors AS te").Join(join)).Where("te.node = ?", f.Node)
		}
		if total, err = countUpTo(ctx, db, count, f.CountLimit); err != nil {
			return nil, 0, fmt.Errorf("store: count tasks: %w", err)
		}
	}
	if err := loadExecutorsOf(ctx, db, tasks); err != nil {
		return nil, 0, err
	}
	return tasks, int(total), nil
}

// titleLike is the condition of a title search, its argument a lower-case
// LIKE pattern. SQLite's LIKE ignores ASCII case already and its LOWER folds
// only ASCII, so there it is the plain LIKE (a LOWER call per row was half a
// search's time over 100,000 titles); the others compare bytes (MariaDB's
// utf8mb4_bin) or case (PostgreSQL), so they fold the title. ListTasks reads
// a search in two steps (and one node's tasks): it looks at every title of
// the index and keeps a few, and MariaDB fetched the row of each title it
// looked at (285 ms at 100,000 tasks), and sorted the whole rows of a node's
// 5,000 tasks for one page of them.
func titleLike(db bun.IDB) string {
	if db.Dialect().Name() == dialect.SQLite {
		return "title LIKE ? ESCAPE '!'"
	}
	return "LOWER(title) LIKE ? ESCAPE '!'"
}

// UpdateTask rewrites a task's definition, keepers, children and executors
// as version t.Version while its status is still t.Status and its version
// still from (what its editor read): a task that changed meanwhile gives
// ErrConflict. A task moved to another
// project takes its runs along; run it in a transaction.
func UpdateTask(ctx context.Context, db bun.IDB, t *Task, from int) error {
	t.UpdatedAt = time.Now().UTC()
	var was int64
	if err := db.NewSelect().Table("tasks").Column("project_id").Where("id = ?", t.ID).Scan(ctx, &was); err != nil {
		return fmt.Errorf("store: update task: %w", notFound(err))
	}
	res, err := db.NewUpdate().Model(t).Column("title", "type", "spec", "keepers", "children", "selector", "project_id", "updated_at", "version").
		WherePK().Where("status = ?", t.Status).Where("version = ?", from).Exec(ctx)
	if err := affected(res, err); err != nil {
		if errors.Is(err, ErrConflict) {
			if _, gerr := GetTask(ctx, db, t.ID); gerr != nil {
				return gerr
			}
			return fmt.Errorf("store: task %s: %w", t.ID, ErrConflict)
		}
		return fmt.Errorf("store: update task: %w", err)
	}
	if t.ProjectID != 0 && t.ProjectID != was {
		if _, err := db.NewUpdate().Table("runs").Set("project_id = ?", t.ProjectID).Where("task_id = ?", t.ID).Exec(ctx); err != nil {
			return fmt.Errorf("store: move the task's runs: %w", err)
		}
	}
	return SetTaskExecutors(ctx, db, t.ID, t.Executors)
}

// SetTaskStatus changes a task's status only while it is one of from.
func SetTaskStatus(ctx context.Context, db bun.IDB, id string, from []TaskStatus, to TaskStatus) error {
	res, err := db.NewUpdate().Model((*Task)(nil)).Set("status = ?", to).Set("updated_at = ?", time.Now().UTC()).
		Where("id = ?", id).Where("status IN (?)", bun.In(from)).Exec(ctx)
	if err := affected(res, err); err != nil {
		if errors.Is(err, ErrConflict) {
			if _, gerr := GetTask(ctx, db, id); gerr != nil {
				return gerr
			}
			return fmt.Errorf("store: task %s: %w", id, ErrConflict)
		}
		return fmt.Errorf("store: set task status: %w", err)
	}
	return nil
}

// TasksOfNode returns the running and paused tasks that the node executes,
// named or selected.
func TasksOfNode(ctx context.Context, db bun.IDB, node string) ([]Task, error) {
	var tasks []Task
	err := db.NewSelect().Model(&tasks).
		Where("status IN (?)", bun.In([]TaskStatus{TaskRunning, TaskPaused})).
		Where("id IN (SELECT task_id FROM task_executors WHERE node = ?)", node).
		OrderExpr("id ASC").Scan(ctx)
	if err != nil {
		return nil, fmt.Errorf("store: tasks of node %s: %w", node, err)
	}
	if err := loadExecutorsOf(ctx, db, tasks); err != nil {
		return nil, err
	}
	return tasks, nil
}

// ActiveTasks returns every running or paused task with its executors.
func ActiveTasks(ctx context.Context, db bun.IDB) ([]Task, error) {
	var tasks []Task
	if err := db.NewSelect().Model(&tasks).Where("status IN (?)", bun.In([]TaskStatus{TaskRunning, TaskPaused})).Scan(ctx); err != nil {
		return nil, fmt.Errorf("store: active tasks: %w", err)
	}
	if err := loadExecutorsOf(ctx, db, tasks); err != nil {
		return nil, err
	}
	return tasks, nil
}

// TaskChildren returns the children lists (JSON) of every task that is not deleted.
// A task's children are tasks of its own project: projects limits the
// tasks read (nil: every project).
func TaskChildren(ctx context.Context, db bun.IDB, projects []int64) (map[string]string, error) {
	var rows []Task
	if err := inProjects(db.NewSelect().Model(&rows).Column("id", "children").Where("status <> ?", TaskDeleted), "project_id", projects).Scan(ctx); err != nil {
		return nil, fmt.Errorf("store: task children: %w", err)
	}
	out := make(map[string]string, len(rows))
	for _, r := range rows {
		out[r.ID] = r.Children
	}
	return out, nil
}

// RemoveNodeFromTasks drops a deleted node from every task's executors.
func RemoveNodeFromTasks(ctx context.Context, db bun.IDB, node string) error {
	if _, err := db.NewDelete().Model((*TaskExecutor)(nil)).Where("node = ?", node).Exec(ctx); err != nil {
		return fmt.Errorf("store: remove node from tasks: %w", err)
	}
	return nil
}

// ChildrenOf returns the child task ids of those tasks among ids that have any.
func ChildrenOf(ctx context.Context, db bun.IDB, ids []string) (map[string][]string, error) {
	var rows []Task
	err := db.NewSelect().Model(&rows).Column("id", "children").
		Where("id IN (?)", bun.In(ids)).Where("children <> ?", "[]").Where("status <> ?", TaskDeleted).Scan(ctx)
	if err != nil {
		return nil, fmt.Errorf("store: children of tasks: %w", err)
	}
	out := make(map[string][]string, len(rows))
	for _, r := range rows {
		var ch []string
		if err := json.Unmarshal([]byte(r.Children), &ch); err == nil && len(ch) > 0 {
			out[r.ID] = ch
		}
	}
	return out, nil
}
