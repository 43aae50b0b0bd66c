package master

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"time"

	"github.com/schedulemaster-go/schedulemaster/store"
	"github.com/schedulemaster-go/schedulemaster/worker"
)

// Client calls the worker API.
type Client struct {
	http *http.Client
	// Timeout bounds one call other than a probe.
	Timeout time.Duration
}

// NewClient returns a client with pooled connections sized for many workers.
func NewClient(timeout time.Duration) *Client {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	// No global cap: with more workers than a cap, each sweep would evict the
	// connection the next one needs and redial every worker.
	tr.MaxIdleConns = 0
	tr.MaxIdleConnsPerHost = 2
	tr.IdleConnTimeout = 5 * time.Minute
	return &Client{http: &http.Client{Transport: tr}, Timeout: timeout}
}

func nodeURL(n *store.Node, path string) string {
	return n.Protocol + "://" + n.Host + path
}

// call sends one request to a worker; any failure names the node and what failed.
func (c *Client) call(ctx context.Context, n *store.Node, method, path string, headers map[string]string, in, out any) error {
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return err
		}
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, nodeURL(n, path), body)
	if err != nil {
		return fmt.Errorf("%w: node %s: bad address %s://%s: %v", ErrWorker, n.Name, n.Protocol, n.Host, err)
	}
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return fmt.Errorf("%w: node %s at %s is unreachable: %v", ErrWorker, n.Name, n.Host, unwrapURLError(err))
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return fmt.Errorf("%w: node %s: reading the answer to %s: %v", ErrWorker, n.Name, path, err)
	}
	if resp.StatusCode/100 != 2 {
		var e worker.ErrorResponse
		msg := http.StatusText(resp.StatusCode)
		if json.Unmarshal(data, &e) == nil && e.Error != "" {
			msg = e.Error
		}
		return fmt.Errorf("%w: node %s answered %s with %d: %s", ErrWorker, n.Name, path, resp.StatusCode, msg)
	}
	if out != nil {
		if err := json.Unmarshal(data, out); err != nil {
			return fmt.Errorf("%w: node %s: bad answer to %s: %v", ErrWorker, n.Name, path, err)
		}
	}
	return nil
}

func unwrapURLError(err error) error {
	if ue, ok := err.(interface{ Unwrap() error }); ok && ue.Unwrap() != nil {
		return ue.Unwrap()
	}
	return err
}

// Health probes GET /health with the given timeout.
func (c *Client) Health(ctx context.Context, n *store.Node, timeout time.Duration) (worker.HealthResponse, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var h worker.HealthResponse
	err := c.call(ctx, n, http.MethodGet, worker.PathHealth, nil, nil, &h)
	return h, err
}

// Connect performs the HMAC handshake and returns the worker's new secret.
func (c *Client) Connect(ctx context.Context, n *store.Node, masterName, clusterKey string) (worker.ConnectResponse, error) {
	ctx, cancel := context.WithTimeout(ctx, c.Timeout)
	defer cancel()
	ts := strconv.FormatInt(time.Now().Unix(), 10)
	nonce := worker.NewNonce()
	headers := map[string]string{
		worker.HeaderMaster:     masterName,
		worker.HeaderNameTo:     n.Name,
		worker.HeaderTimestamp:  ts,
		worker.HeaderNonce:      nonce,
		worker.HeaderConnection: worker.ConnectMAC(clusterKey, masterName, n.Name, ts, nonce),
	}
	body := worker.ConnectRequest{Node: worker.NodeConfig{
		Name: n.Name, Protocol: n.Protocol, Host: n.Host, Priority: n.Priority, MaxConcurrency: n.MaxConcurrency,
	}}
	var out worker.ConnectResponse
	if err := c.call(ctx, n, http.MethodPost, worker.PathConnect, headers, body, &out); err != nil {
		return out, err
	}
	if out.Secret == "" || out.Node != n.Name {
		return out, fmt.Errorf("%w: node %s: connect answer names node %q and carries no secret", ErrWorker, n.Name, out.Node)
	}
	return out, nil
}

// Startup tells the worker to start scheduling the given tasks.
func (c *Client) Startup(ctx context.Context, n *store.Node, tasks []worker.TaskSpec) error {
	ctx, cancel := context.WithTimeout(ctx, c.Timeout)
	defer cancel()
	if tasks == nil {
		tasks = []worker.TaskSpec{}
	}
	return c.call(ctx, n, http.MethodPost, worker.PathStartup, map[string]string{worker.HeaderSecret: n.Secret}, worker.StartupRequest{Tasks: tasks}, nil)
}

// Shutdown tells the worker to stop scheduling; the worker waits for running jobs.
func (c *Client) Shutdown(ctx context.Context, n *store.Node, wait time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, c.Timeout+wait)
	defer cancel()
	return c.call(ctx, n, http.MethodPost, worker.PathShutdown, map[string]string{worker.HeaderSecret: n.Secret}, struct{}{}, nil)
}

// TaskStart pushes a task's full definition to a worker (idempotent there).
func (c *Client) TaskStart(ctx context.Context, n *store.Node, spec worker.TaskSpec) error {
	ctx, cancel := context.WithTimeout(ctx, c.Timeout)
	defer cancel()
	return c.call(ctx, n, http.MethodPost, worker.PathTaskStart, map[string]string{worker.HeaderSecret: n.Secret}, spec, nil)
}

// TaskOp sends stop, pause or resume of one task to a worker.
func (c *Client) TaskOp(ctx context.Context, n *store.Node, path, taskID string) error {
	ctx, cancel := context.WithTimeout(ctx, c.Timeout)
	defer cancel()
	return c.call(ctx, n, http.MethodPost, path, map[string]string{worker.HeaderSecret: n.Secret}, worker.TaskRef{ID: taskID}, nil)
}

// TaskRunOnce asks a worker to run a task now.
func (c *Client) TaskRunOnce(ctx context.Context, n *store.Node, spec worker.TaskSpec) error {
	ctx, cancel := context.WithTimeout(ctx, c.Timeout)
	defer cancel()
	return c.call(ctx, n, http.MethodPost, worker.PathTaskRunOnce, map[string]string{worker.HeaderSecret: n.Secret},
		worker.RunOnceRequest{ID: spec.ID, Task: &spec}, nil)
}
