// Package executor is the one interface through which a worker runs every
// task type, and the registry of the types a worker runs. Each type beyond
// HTTP and shell lives in a package of its own under worker/tasktypes and
// reaches its system through a named connection (protocol.ConnectionSpec)
// the master sends with the task.
package executor

import (
	"context"
	"io"
	"slices"
	"time"

	"github.com/schedulemaster-go/schedulemaster/protocol"
)

// Task is one execution's input.
type Task struct {
	// Def is the task's definition, its params already in Def.Params (the
	// executor expands {{KEY}} in its own fields with Expand).
	Def *protocol.TaskDef
	// Conn is the connection the type uses, secret included; nil for a
	// type without one, or when the master had none by the task's name.
	Conn *protocol.ConnectionSpec
	// Timeout is the run's timeout (ctx ends at it too), for executors
	// that pass it on to their system (a statement timeout).
	Timeout time.Duration
	// Prepared is what the worker worked out once for the task's runs,
	// when the executor is a Preparer; nil otherwise.
	Prepared any
	// Started, when not nil, is told the process group of an executor
	// that starts one, and the func it returns when the group ended; the
	// worker kills the group with the run.
	Started func(pgid int) (ended func())
}

// Param expands the task's {{KEY}} params in s.
func (t *Task) Param(s string) string { return protocol.ExpandParams(s, t.Def.Params) }

// Result is what an execution produced.
type Result struct {
	// Result is protocol.ResultSuccess, ResultFailed or ResultTimeout.
	Result protocol.Result
	// Output is what the execution says when it was not written to the
	// run's output writer (HTTP's answer); appended after it otherwise.
	Output string
	// Binary says Output had NUL or invalid UTF-8 bytes, replaced.
	Binary     bool
	HTTPStatus int
	ExitCode   *int
}

// Executor runs the tasks of one type.
type Executor interface {
	// Type is the task type it runs (protocol.TaskHTTP, TaskNATS, ...).
	Type() string
	// Validate checks what the worker can check of a definition before it
	// schedules it, beyond protocol.TaskDef.Validate; nil when it can run.
	Validate(t *Task) error
	// Run runs one execution within ctx (which ends at the run's timeout
	// or kill), writing what happened to out, which is bounded (its tail
	// is kept) and masks the task's secrets. It never panics on a bad
	// definition: it returns ResultFailed with the reason.
	Run(ctx context.Context, t *Task, out io.Writer) Result
}

// Tester is an Executor that can try a connection on its own (Test
// connection in the console): it connects, asks the system something
// harmless, and says what it answered.
type Tester interface {
	Test(ctx context.Context, c *protocol.ConnectionSpec) (string, error)
}

// Preparer is an Executor that works out something once per task for all
// its runs (Task.Prepared).
type Preparer interface {
	Prepare(def *protocol.TaskDef) any
}

// Closer is an Executor holding connections, closed when the worker stops.
type Closer interface {
	Close() error
}

// Registry holds the executors of a worker, by type.
type Registry struct {
	byType map[string]Executor
}

// NewRegistry returns a registry of execs; a later one of the same type
// replaces an earlier one.
func NewRegistry(execs ...Executor) *Registry {
	r := &Registry{byType: make(map[string]Executor, len(execs))}
	for _, e := range execs {
		r.byType[e.Type()] = e
	}
	return r
}

// Get returns the executor of typ.
func (r *Registry) Get(typ string) (Executor, bool) {
	e, ok := r.byType[typ]
	return e, ok
}

// Types lists the types the registry runs, sorted.
func (r *Registry) Types() []string {
	out := make([]string, 0, len(r.byType))
	for t := range r.byType {
		out = append(out, t)
	}
	slices.Sort(out)
	return out
}

// Close closes every executor that holds connections; it returns the first
// error.
func (r *Registry) Close() error {
	var first error
	for _, t := range r.Types() {
		if c, ok := r.byType[t].(Closer); ok {
			if err := c.Close(); err != nil && first == nil {
				first = err
			}
		}
	}
	return first
}
