package master

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/schedulemaster-go/schedulemaster/protocol"
	"github.com/schedulemaster-go/schedulemaster/store"
)

// Client calls the worker API.
type Client struct {
	http *http.Client
	// Timeout bounds one call other than a probe.
	Timeout time.Duration
	// attach gives the specs sent the connections their tasks use (see
	// Connections.attach); nil: nothing to attach.
	attach func(ctx context.Context, specs []protocol.TaskSpec)
}

// withConnections attaches the connections of specs before they are sent.
func (c *Client) withConnections(ctx context.Context, specs []protocol.TaskSpec) {
	if c.attach == nil {
		return
	}
	for i := range specs {
		if specs[i].Connection == nil && specs[i].Spec() != nil {
			c.attach(ctx, specs)
			return
		}
	}
}

// withConnection is withConnections for one spec.
func (c *Client) withConnection(ctx context.Context, spec protocol.TaskSpec) protocol.TaskSpec {
	if spec.Spec() == nil || spec.Connection != nil || c.attach == nil {
		return spec
	}
	one := []protocol.TaskSpec{spec}
	c.attach(ctx, one)
	return one[0]
}

// NewClient returns a client with pooled connections sized for many workers.
func NewClient(timeout time.Duration) *Client {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	// No global cap: with more workers than a cap, each sweep would evict the
	// connection the next one needs and redial every worker.
	tr.MaxIdleConns = 0
	tr.MaxIdleConnsPerHost = 2
	tr.IdleConnTimeout = 5 * time.Minute
	// No redirect is followed: a worker answering a probe with one must not
	// make the master call, with its headers, another address.
	return &Client{http: &http.Client{Transport: tr, CheckRedirect: protocol.NoRedirect}, Timeout: timeout}
}

func nodeURL(n *store.Node, path string) string {
	return n.Protocol + "://" + n.Host + path
}

// call sends one request to a worker; any failure names the node and what failed.
func (c *Client) call(ctx context.Context, n *store.Node, method, path string, headers map[string]string, in, out any) error {
	var body []byte
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return err
		}
		body = b
	}
	err := protocol.Call(ctx, c.http, method, nodeURL(n, path), headers, body, 1<<20, out)
	if refusesTaskVersions(err) {
		// A worker of an earlier version, which reads no task version: the
		// same call without them (its runs then report none).
		if plain, ok := withoutTaskVersions(in); ok {
			if body, err = json.Marshal(plain); err != nil {
				return err
			}
			err = protocol.Call(ctx, c.http, method, nodeURL(n, path), headers, body, 1<<20, out)
		}
	}
	var se *protocol.StatusError
	var ce *protocol.CallError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &se):
		msg := se.Msg
		if msg == "" {
			msg = http.StatusText(se.Status)
		}
		return wrapf(KindWorker, err, "node %s answered %s with %d: %s", n.Name, path, se.Status, msg)
	case errors.As(err, &ce) && ce.Op == protocol.OpRequest:
		return wrapf(KindWorker, err, "node %s has a bad address %s://%s", n.Name, n.Protocol, n.Host)
	case errors.As(err, &ce) && ce.Op == protocol.OpSend:
		return wrapf(KindWorker, unwrapURLError(ce.Err), "node %s at %s is unreachable (%s)", n.Name, n.Host, netReason(ce.Err))
	case errors.As(err, &ce) && ce.Op == protocol.OpRead:
		return wrapf(KindWorker, ce.Err, "node %s did not finish its answer to %s (%s)", n.Name, path, netReason(ce.Err))
	case errors.As(err, &ce):
		return wrapf(KindWorker, ce.Err, "node %s gave an answer to %s that the master cannot read", n.Name, path)
	}
	return wrapf(KindWorker, err, "the call of %s on node %s failed", path, n.Name)
}

func unwrapURLError(err error) error {
	if ue, ok := err.(interface{ Unwrap() error }); ok && ue.Unwrap() != nil {
		return ue.Unwrap()
	}
	return err
}

// Health probes GET /health with the given timeout.
func (c *Client) Health(ctx context.Context, n *store.Node, timeout time.Duration) (protocol.HealthResponse, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var h protocol.HealthResponse
	err := c.call(ctx, n, http.MethodGet, protocol.PathHealth, nil, nil, &h)
	return h, err
}

// Connect performs the HMAC handshake and returns the worker's new secret.
// The handshake names the cluster, not this master, so that a worker
// accepts any master of its cluster.
func (c *Client) Connect(ctx context.Context, n *store.Node, cluster, clusterKey string) (protocol.ConnectResponse, error) {
	ctx, cancel := context.WithTimeout(ctx, c.Timeout)
	defer cancel()
	ts := strconv.FormatInt(time.Now().Unix(), 10)
	nonce := protocol.NewNonce()
	headers := map[string]string{
		protocol.HeaderMaster:     cluster,
		protocol.HeaderNameTo:     n.Name,
		protocol.HeaderTimestamp:  ts,
		protocol.HeaderNonce:      nonce,
		protocol.HeaderConnection: protocol.ConnectMAC(clusterKey, cluster, n.Name, ts, nonce),
	}
	body := protocol.ConnectRequest{Node: protocol.NodeConfig{
		Name: n.Name, Protocol: n.Protocol, Host: n.Host, Priority: n.Priority, MaxConcurrency: n.MaxConcurrency,
	}}
	var out protocol.ConnectResponse
	if err := c.call(ctx, n, http.MethodPost, protocol.PathConnect, headers, body, &out); err != nil {
		return out, err
	}
	if out.Secret == "" || out.Node != n.Name {
		return out, Errorf(KindWorker, "node %s: connect answer names node %q and carries no secret", n.Name, out.Node)
	}
	return out, nil
}

// Startup tells the worker to start scheduling the given tasks.
func (c *Client) Startup(ctx context.Context, n *store.Node, tasks []protocol.TaskSpec) error {
	// The whole schedule in one body: the deadline grows with it.
	ctx, cancel := context.WithTimeout(ctx, c.Timeout+time.Duration(len(tasks))*perTaskTime)
	defer cancel()
	if tasks == nil {
		tasks = []protocol.TaskSpec{}
	}
	// n is the node as the master saw it before this push: not running means
	// its tasks' missed fires are in the master's misfire windows.
	c.withConnections(ctx, tasks)
	req := protocol.StartupRequest{Tasks: tasks}
	if n.Status != store.StatusRunning {
		// See protocol.StartupRequest.DownSince: the node's last change of
		// state is when the master's misfire windows for its tasks begin.
		since := n.UpdatedAt.UTC()
		req.DownNoticed, req.DownSince = true, &since
	}
	return c.call(ctx, n, http.MethodPost, protocol.PathStartup, map[string]string{protocol.HeaderSecret: n.Secret}, req, nil)
}

// perTaskTime is what one task adds to the deadline of a call carrying many
// (a worker schedules some 10,000 a second): a call is never cut because
// it carries much.
const perTaskTime = 200 * time.Microsecond

// StartupPart sends one part of a push in parts (see
// protocol.StartupPartRequest). n is the node as the master saw it before
// the push (see Startup). A worker too old for parts answers 404
// (IsNoRoute).
func (c *Client) StartupPart(ctx context.Context, n *store.Node, session string, first, last bool, tasks []protocol.TaskSpec) error {
	ctx, cancel := context.WithTimeout(ctx, c.Timeout+time.Duration(len(tasks))*perTaskTime)
	defer cancel()
	if tasks == nil {
		tasks = []protocol.TaskSpec{}
	}
	c.withConnections(ctx, tasks)
	req := protocol.StartupPartRequest{Session: session, First: first, Last: last, Tasks: tasks}
	if n.Status != store.StatusRunning {
		since := n.UpdatedAt.UTC()
		req.DownNoticed, req.DownSince = true, &since
	}
	return c.call(ctx, n, http.MethodPost, protocol.PathStartupPart, map[string]string{protocol.HeaderSecret: n.Secret}, req, nil)
}

// TaskBatch does op to many tasks on a worker in one call (at most
// protocol.MaxTaskBatch): specs for start, ids for the other ops. errs[i]
// is nil when the i-th task was done, else its refusal, as the call for
// that task alone would have returned it. A call that failed as a whole
// returns its error and no errs; a worker too old for the batch answers it
// 404 (IsNoRoute).
func (c *Client) TaskBatch(ctx context.Context, n *store.Node, op string, specs []protocol.TaskSpec, ids []string) (errs []error, err error) {
	count := len(specs) + len(ids)
	ctx, cancel := context.WithTimeout(ctx, c.Timeout+time.Duration(count)*perTaskTime)
	defer cancel()
	c.withConnections(ctx, specs)
	req := protocol.TaskBatchRequest{Op: op, Tasks: specs, IDs: ids}
	var out protocol.TaskBatchReply
	if err := c.call(ctx, n, http.MethodPost, protocol.PathTaskBatch, map[string]string{protocol.HeaderSecret: n.Secret}, req, &out); err != nil {
		return nil, err
	}
	if len(out.Results) != count {
		return nil, wrapf(KindWorker, protocol.ErrInvalid, "node %s answered %d results for a batch of %d tasks", n.Name, len(out.Results), count)
	}
	errs = make([]error, count)
	for i, r := range out.Results {
		if r.Status != http.StatusOK {
			se := &protocol.StatusError{Status: r.Status, Msg: r.Error}
			// Said as the call for this task alone would say it.
			errs[i] = wrapf(KindWorker, se, "node %s answered %s with %d: %s", n.Name, batchOpPath[op], r.Status, r.Error)
		}
	}
	return errs, nil
}

// batchOpPath is the call of one task for each batch operation.
var batchOpPath = map[string]string{
	protocol.BatchStart: protocol.PathTaskStart, protocol.BatchStop: protocol.PathTaskStop,
	protocol.BatchPause: protocol.PathTaskPause, protocol.BatchResume: protocol.PathTaskResume,
}

// Shutdown tells the worker to stop scheduling; the worker waits for running jobs.
func (c *Client) Shutdown(ctx context.Context, n *store.Node, wait time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, c.Timeout+wait)
	defer cancel()
	return c.call(ctx, n, http.MethodPost, protocol.PathShutdown, map[string]string{protocol.HeaderSecret: n.Secret}, struct{}{}, nil)
}

// TaskStart pushes a task's full definition to a worker (idempotent there).
func (c *Client) TaskStart(ctx context.Context, n *store.Node, spec protocol.TaskSpec) error {
	ctx, cancel := context.WithTimeout(ctx, c.Timeout)
	defer cancel()
	spec = c.withConnection(ctx, spec)
	return c.call(ctx, n, http.MethodPost, protocol.PathTaskStart, map[string]string{protocol.HeaderSecret: n.Secret}, spec, nil)
}

// TaskOp sends stop, pause or resume of one task to a worker.
func (c *Client) TaskOp(ctx context.Context, n *store.Node, path, taskID string) error {
	ctx, cancel := context.WithTimeout(ctx, c.Timeout)
	defer cancel()
	return c.call(ctx, n, http.MethodPost, path, map[string]string{protocol.HeaderSecret: n.Secret}, protocol.TaskRef{ID: taskID}, nil)
}

// TaskRunOnce asks a worker to run a task now.
func (c *Client) TaskRunOnce(ctx context.Context, n *store.Node, spec protocol.TaskSpec, catchUp *protocol.CatchUp) error {
	ctx, cancel := context.WithTimeout(ctx, c.Timeout)
	defer cancel()
	spec = c.withConnection(ctx, spec)
	return c.call(ctx, n, http.MethodPost, protocol.PathTaskRunOnce, map[string]string{protocol.HeaderSecret: n.Secret},
		protocol.RunOnceRequest{ID: spec.ID, Task: &spec, CatchUp: catchUp}, nil)
}

// TaskRunStep asks a worker to run a workflow step: the task as spec
// defines it, as the step ref says (its first attempt's id, its params).
func (c *Client) TaskRunStep(ctx context.Context, n *store.Node, spec protocol.TaskSpec, ref *protocol.WorkflowRef) error {
	ctx, cancel := context.WithTimeout(ctx, c.Timeout)
	defer cancel()
	spec = c.withConnection(ctx, spec)
	return c.call(ctx, n, http.MethodPost, protocol.PathTaskRunOnce, map[string]string{protocol.HeaderSecret: n.Secret},
		protocol.RunOnceRequest{ID: spec.ID, Task: &spec, Workflow: ref}, nil)
}

// TaskRunOnceBatch asks a worker to run many tasks once, in one call (at
// most protocol.MaxRunOnceBatch). errs[i] is nil when the i-th run started,
// else its refusal as a *protocol.StatusError, as TaskRunOnce would have
// returned it. A call that failed as a whole returns its error and no errs;
// a worker too old for the batch answers it 404 (IsNoRoute).
func (c *Client) TaskRunOnceBatch(ctx context.Context, n *store.Node, specs []protocol.TaskSpec) (errs []error, err error) {
	ctx, cancel := context.WithTimeout(ctx, c.Timeout)
	defer cancel()
	c.withConnections(ctx, specs)
	req := protocol.RunOnceBatchRequest{Runs: make([]protocol.RunOnceRequest, len(specs))}
	for i := range specs {
		req.Runs[i] = protocol.RunOnceRequest{ID: specs[i].ID, Task: &specs[i]}
	}
	var out protocol.RunOnceBatchReply
	if err := c.call(ctx, n, http.MethodPost, protocol.PathTaskRunOnceBatch, map[string]string{protocol.HeaderSecret: n.Secret}, req, &out); err != nil {
		return nil, err
	}
	if len(out.Results) != len(specs) {
		return nil, wrapf(KindWorker, protocol.ErrInvalid, "node %s answered %d results for a batch of %d runs", n.Name, len(out.Results), len(specs))
	}
	errs = make([]error, len(specs))
	for i, r := range out.Results {
		if r.Status != http.StatusAccepted {
			se := &protocol.StatusError{Status: r.Status, Msg: r.Error}
			errs[i] = wrapf(KindWorker, se, "node %s answered %s with %d: %s", n.Name, protocol.PathTaskRunOnce, r.Status, r.Error)
		}
	}
	return errs, nil
}

// IsNoRoute reports whether a worker answered that it has no such route: a
// worker of an earlier version asked for a newer call.
func IsNoRoute(err error) bool {
	var se *protocol.StatusError
	return errors.As(err, &se) && se.Status == http.StatusNotFound && se.Msg == "no such route"
}

// RunOutput asks a worker for a run in progress and its output so far.
func (c *Client) RunOutput(ctx context.Context, n *store.Node, runID string) (protocol.RunProgress, error) {
	ctx, cancel := context.WithTimeout(ctx, c.Timeout)
	defer cancel()
	var p protocol.RunProgress
	err := c.call(ctx, n, http.MethodPost, protocol.PathRunOutput, map[string]string{protocol.HeaderSecret: n.Secret},
		protocol.RunRef{ID: runID}, &p)
	return p, err
}

// KillRun asks a worker to kill a run in progress; by names who asked.
func (c *Client) KillRun(ctx context.Context, n *store.Node, runID, by string) error {
	ctx, cancel := context.WithTimeout(ctx, c.Timeout)
	defer cancel()
	return c.call(ctx, n, http.MethodPost, protocol.PathRunKill, map[string]string{protocol.HeaderSecret: n.Secret},
		protocol.RunRef{ID: runID, By: by}, nil)
}

// refusesTaskVersions reports whether a worker refused a body for its task
// versions (protocol.TaskSpec.Version): a worker of an earlier version
// reads bodies strictly and knows no such field.
func refusesTaskVersions(err error) bool {
	var se *protocol.StatusError
	return errors.As(err, &se) && se.Status == http.StatusBadRequest && strings.Contains(se.Msg, `unknown field "version"`)
}

// withoutTaskVersions is a copy of a request body carrying task specs with
// their versions cleared; ok is false for a body that carries none.
func withoutTaskVersions(in any) (_ any, ok bool) {
	plain := func(specs []protocol.TaskSpec) []protocol.TaskSpec {
		out := slices.Clone(specs)
		for i := range out {
			ok = ok || out[i].Version != 0
			out[i].Version = 0
		}
		return out
	}
	switch v := in.(type) {
	case protocol.TaskSpec:
		ok, v.Version = v.Version != 0, 0
		return v, ok
	case protocol.StartupRequest:
		v.Tasks = plain(v.Tasks)
		return v, ok
	case protocol.StartupPartRequest:
		v.Tasks = plain(v.Tasks)
		return v, ok
	case protocol.TaskBatchRequest:
		v.Tasks = plain(v.Tasks)
		return v, ok
	case protocol.RunOnceRequest:
		if v.Task != nil && v.Task.Version != 0 {
			t := *v.Task
			t.Version, v.Task, ok = 0, &t, true
		}
		return v, ok
	case protocol.RunOnceBatchRequest:
		runs := slices.Clone(v.Runs)
		for i := range runs {
			if runs[i].Task != nil && runs[i].Task.Version != 0 {
				t := *runs[i].Task
				t.Version, runs[i].Task, ok = 0, &t, true
			}
		}
		v.Runs = runs
		return v, ok
	}
	return in, false
}
