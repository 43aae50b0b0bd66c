// The worker's task types: HTTP and shell, and the types beyond them its
// operator allows (--allow-types), each behind executor.Executor.

package worker

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/schedulemaster-go/schedulemaster/protocol"
	"github.com/schedulemaster-go/schedulemaster/worker/executor"
	"github.com/schedulemaster-go/schedulemaster/worker/tasktypes/amqptask"
	"github.com/schedulemaster-go/schedulemaster/worker/tasktypes/grpctask"
	"github.com/schedulemaster-go/schedulemaster/worker/tasktypes/kafkatask"
	"github.com/schedulemaster-go/schedulemaster/worker/tasktypes/mqtttask"
	"github.com/schedulemaster-go/schedulemaster/worker/tasktypes/natstask"
	"github.com/schedulemaster-go/schedulemaster/worker/tasktypes/redistask"
	"github.com/schedulemaster-go/schedulemaster/worker/tasktypes/sqltask"
)

// gatedTypes makes the executor of each task type beyond HTTP and shell.
// Adding a type is one package under worker/tasktypes and one line here.
func gatedTypes() map[string]func(log *slog.Logger) executor.Executor {
	return map[string]func(*slog.Logger) executor.Executor{
		protocol.TaskKafka: func(log *slog.Logger) executor.Executor { return kafkatask.New(log) },
		protocol.TaskGRPC:  func(log *slog.Logger) executor.Executor { return grpctask.New(log) },
		protocol.TaskNATS:  func(log *slog.Logger) executor.Executor { return natstask.New(log) },
		protocol.TaskAMQP:  func(log *slog.Logger) executor.Executor { return amqptask.New(log) },
		protocol.TaskSQL:   func(log *slog.Logger) executor.Executor { return sqltask.New(log) },
		protocol.TaskMQTT:  func(log *slog.Logger) executor.Executor { return mqtttask.New(log) },
		protocol.TaskRedis: func(log *slog.Logger) executor.Executor { return redistask.New(log) },
	}
}

// newRegistry returns the executors of a worker: HTTP always, shell when
// allowShell, and the gated types listed in allow.
func newRegistry(client *http.Client, allowShell bool, allow []string, log *slog.Logger) (*executor.Registry, error) {
	execs := []executor.Executor{&httpExec{client: client}}
	if allowShell {
		execs = append(execs, shellExec{})
	}
	makers := gatedTypes()
	for _, t := range allow {
		mk, ok := makers[t]
		if !ok {
			return nil, fmt.Errorf("%w: --allow-types: %q is not a task type this build runs (it runs %s)", protocol.ErrInvalid, t,
				strings.Join(slices.Sorted(maps.Keys(makers)), ", "))
		}
		execs = append(execs, mk(log.With("executor", t)))
	}
	return executor.NewRegistry(execs...), nil
}

// allowedTypes lists the gated types reg runs, for /health.
func allowedTypes(reg *executor.Registry) []string {
	var out []string
	for _, t := range reg.Types() {
		if protocol.IsGatedType(t) {
			out = append(out, t)
		}
	}
	return out
}

// typeRefused says why this worker does not run tasks of typ, or nil.
func typeRefused(reg *executor.Registry, typ string) error {
	if _, ok := reg.Get(typ); ok {
		return nil
	}
	if typ == protocol.TaskShell {
		return ErrShellRefused
	}
	if protocol.IsGatedType(typ) {
		return fmt.Errorf("%w: this worker does not run %s tasks: its operator did not allow them (start it with --allow-types %s)", ErrTypeRefused, typ, typ)
	}
	return fmt.Errorf("%w: unknown task type %q", ErrTypeRefused, typ)
}

// checkRunnable says why this worker cannot run spec, or nil: its type is
// refused here, or its executor finds the definition (or its connection)
// unusable, so a task is refused when it is sent rather than failing at
// every fire.
func checkRunnable(reg *executor.Registry, spec *protocol.TaskSpec) error {
	if err := typeRefused(reg, spec.Type); err != nil {
		return err
	}
	ex, _ := reg.Get(spec.Type)
	if err := ex.Validate(&executor.Task{Def: &spec.TaskDef, Conn: spec.Connection, Timeout: time.Duration(spec.Timeout)}); err != nil {
		return fmt.Errorf("%w: task %s: %v", protocol.ErrInvalid, spec.ID, err)
	}
	return nil
}

// httpExec runs HTTP tasks: success is a 2xx answer.
type httpExec struct{ client *http.Client }

func (*httpExec) Type() string                    { return protocol.TaskHTTP }
func (*httpExec) Validate(t *executor.Task) error { return nil }

func (e *httpExec) Run(ctx context.Context, t *executor.Task, _ io.Writer) executor.Result {
	prep, _ := t.Prepared.(*taskPrep)
	o := runHTTP(ctx, e.client, t.Def, prep)
	return executor.Result{Result: o.result, Output: o.output, Binary: o.binary, HTTPStatus: o.httpStatus}
}

// shellExec runs shell tasks in their own process group: success is exit
// code 0.
type shellExec struct{}

func (shellExec) Type() string                    { return protocol.TaskShell }
func (shellExec) Validate(t *executor.Task) error { return nil }

func (shellExec) Run(ctx context.Context, t *executor.Task, out io.Writer) executor.Result {
	started := t.Started
	if started == nil {
		started = func(int) func() { return func() {} }
	}
	tb, ok := out.(*tailBuffer)
	if !ok {
		tb = &tailBuffer{max: protocol.MaxOutputBytes}
	}
	// The command's output is in out, where the worker reads it; the
	// result holds only what runShell adds (a timeout, a failure to start).
	o := runShell(ctx, t.Def, tb, started)
	return executor.Result{Result: o.result, Output: o.output, ExitCode: o.exitCode}
}
