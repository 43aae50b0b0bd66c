package worker

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"time"

	"github.com/schedulemaster-go/schedulemaster/protocol"
	"github.com/schedulemaster-go/schedulemaster/worker/executor"
)

// connectionTestTimeout bounds a connection test: a system that does not
// answer in it is reported as unreachable.
const connectionTestTimeout = 10 * time.Second

// TestConnection tries c with the executor of the type that uses its kind,
// if this worker runs that type; the message never holds c's secret.
func (w *Worker) TestConnection(ctx context.Context, c protocol.ConnectionSpec) protocol.ConnectionTestResponse {
	start := time.Now()
	out := func(err error, msg string) protocol.ConnectionTestResponse {
		if err != nil {
			msg = err.Error()
		}
		scrub := protocol.NewScrubber(&protocol.TaskDef{}, c.Secret)
		text, _ := protocol.SanitizeOutput(scrub.Scrub(msg))
		if len(text) > 2000 {
			text = text[:2000]
		}
		return protocol.ConnectionTestResponse{OK: err == nil, Message: text, DurationMS: time.Since(start).Milliseconds()}
	}
	c.Normalize()
	if err := c.Validate(); err != nil {
		return out(fmt.Errorf("the connection is not valid: %w", err), "")
	}
	var tester executor.Tester
	for _, typ := range protocol.GatedTypes() {
		if !slices.Contains(protocol.ConnectionKindsOf(typ), c.Kind) {
			continue
		}
		ex, ok := w.runner.registry().Get(typ)
		if !ok {
			return out(typeRefused(w.runner.registry(), typ), "")
		}
		if tester, ok = ex.(executor.Tester); !ok {
			return out(fmt.Errorf("the %s executor cannot test a connection", typ), "")
		}
		break
	}
	if tester == nil {
		return out(errors.New("no task type of this build uses a "+c.Kind+" connection"), "")
	}
	ctx, cancel := context.WithTimeout(ctx, connectionTestTimeout)
	defer cancel()
	msg, err := tester.Test(ctx, &c)
	if err != nil && ctx.Err() != nil {
		err = fmt.Errorf("no answer within %s: %w", connectionTestTimeout, err)
	}
	return out(err, msg)
}

// testConnection is PathConnectionTest: the master asks this worker to try
// a connection (Test connection in the console).
func (a *api) testConnection(rw http.ResponseWriter, r *http.Request) {
	var req protocol.ConnectionTestRequest
	if !readJSON(rw, r, &req, 1<<20) {
		return
	}
	writeJSON(rw, http.StatusOK, a.w.TestConnection(r.Context(), req.Connection))
}
