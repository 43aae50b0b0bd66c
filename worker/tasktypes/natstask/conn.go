package natstask

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/schedulemaster-go/schedulemaster/protocol"
	"github.com/schedulemaster-go/schedulemaster/worker/executor"
)

// maxConnectTimeout bounds a connect (each server's dial and handshake)
// when the run's ctx allows more.
const maxConnectTimeout = 10 * time.Second

// ctxMargin is how much later than the run's ctx the client's own
// deadlines of a connect fall.
const ctxMargin = 100 * time.Millisecond

// client is what the pool keeps per connection definition: the current
// *nats.Conn, replaced by a fresh one when it was closed (the server went
// away: the connection does not reconnect on its own, see connect).
type client struct {
	spec protocol.ConnectionSpec
	log  *slog.Logger
	// sem is held (one token) by whoever reads or replaces nc; a channel
	// so that a run waiting for it gives up with its ctx.
	sem    chan struct{}
	nc     *nats.Conn
	js     jetstream.JetStream
	closed bool
}

func newClient(ctx context.Context, c *protocol.ConnectionSpec, log *slog.Logger) (*client, error) {
	cl := &client{spec: *c, log: log, sem: make(chan struct{}, 1)}
	if _, _, err := cl.get(ctx); err != nil {
		return nil, err
	}
	return cl, nil
}

// get returns the client's connection, connecting anew when the last one
// was closed.
func (cl *client) get(ctx context.Context) (*nats.Conn, jetstream.JetStream, error) {
	select {
	case cl.sem <- struct{}{}:
	case <-ctx.Done():
		return nil, nil, ctx.Err()
	}
	defer func() { <-cl.sem }()
	if cl.closed {
		return nil, nil, executor.ErrPoolClosed
	}
	if cl.nc != nil && !cl.nc.IsClosed() {
		return cl.nc, cl.js, nil
	}
	if cl.nc != nil {
		cl.log.Info("nats connection closed: connecting again", "connection", cl.spec.Name, "last_error", errText(cl.nc.LastError()))
	}
	nc, err := connect(ctx, &cl.spec, cl.log)
	if err != nil {
		return nil, nil, err
	}
	js, err := jetstream.New(nc)
	if err != nil {
		nc.Close()
		return nil, nil, err
	}
	cl.nc, cl.js = nc, js
	return nc, js, nil
}

// close closes the client's connection for good; the pool calls it once
// no run uses the client.
func (cl *client) close() error {
	cl.sem <- struct{}{} // a connect in progress is bounded by its run's ctx
	defer func() { <-cl.sem }()
	cl.closed = true
	if cl.nc != nil {
		cl.nc.Close()
	}
	return nil
}

func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// connect opens a connection to c's servers within ctx. The connection
// does not reconnect by itself (NoReconnect): a reconnect loop would make
// the runs during an outage buffer and wait for their timeout instead of
// failing at once with the reason; a closed connection is replaced by
// client.get at the next run instead, which tries every server again.
func connect(ctx context.Context, c *protocol.ConnectionSpec, log *slog.Logger) (*nats.Conn, error) {
	tlsCfg, err := executor.TLSConfig(c)
	if err != nil {
		return nil, err
	}
	addrs := c.Addresses()
	if len(addrs) == 0 {
		return nil, ErrNoAddress
	}
	scheme := "nats://"
	if tlsCfg != nil {
		scheme = "tls://"
	}
	urls := make([]string, len(addrs))
	for i, a := range addrs {
		urls[i] = scheme + a
	}
	// When ctx ends first, abort ends the handshake: nats' own timeout is
	// a little later, so that the run says it timed out rather than an
	// i/o timeout of its own.
	timeout := maxConnectTimeout
	if dl, ok := ctx.Deadline(); ok {
		timeout = min(timeout, max(time.Until(dl), 0)+ctxMargin)
	}
	d := &dialer{ctx: ctx, timeout: timeout}
	opts := []nats.Option{
		nats.Name("schedulemaster worker"),
		nats.Timeout(timeout),
		nats.NoReconnect(),
		nats.RetryOnFailedConnect(false),
		nats.SetCustomDialer(d),
		nats.SkipHostLookup(), // the dialer resolves, within ctx
		nats.NoCallbacksAfterClientClose(),
		nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
			log.Warn("nats asynchronous error", "connection", c.Name, "err", err)
		}),
	}
	if tlsCfg != nil {
		opts = append(opts, nats.Secure(tlsCfg))
	}
	// User and secret: user/password. A secret alone: a token.
	switch {
	case c.User != "":
		opts = append(opts, nats.UserInfo(c.User, c.Secret))
	case c.Secret != "":
		opts = append(opts, nats.Token(c.Secret))
	}
	stop := context.AfterFunc(ctx, d.abort)
	nc, err := nats.Connect(strings.Join(urls, ","), opts...)
	if !stop() {
		// ctx ended during the connect: whatever it made is not used.
		if nc != nil {
			nc.Close()
		}
		return nil, ctx.Err()
	}
	d.finish()
	if err != nil {
		return nil, d.explain(err)
	}
	return nc, nil
}

// dialer dials the servers of a first connect within its run's ctx and
// remembers why each dial failed (nats itself reports a refused
// connection only as "no servers available").
type dialer struct {
	timeout time.Duration

	mu      sync.Mutex
	ctx     context.Context // nil once the connect ended
	cur     net.Conn        // in its handshake
	aborted bool
	errs    []string
}

// Dial implements nats.CustomDialer.
func (d *dialer) Dial(network, address string) (net.Conn, error) {
	d.mu.Lock()
	ctx := d.ctx
	d.mu.Unlock()
	if ctx == nil {
		ctx = context.Background()
	}
	ctx, cancel := context.WithTimeout(ctx, d.timeout)
	defer cancel()
	conn, err := (&net.Dialer{}).DialContext(ctx, network, address)
	d.mu.Lock()
	defer d.mu.Unlock()
	if err != nil {
		if len(d.errs) < 16 {
			d.errs = append(d.errs, dialError(address, err))
		}
		return nil, err
	}
	if d.aborted {
		_ = conn.Close()
		return nil, context.Canceled
	}
	d.cur = conn
	return conn, nil
}

// abort ends the handshake in progress: the run's ctx ended.
func (d *dialer) abort() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.aborted = true
	if d.cur != nil {
		_ = d.cur.SetDeadline(time.Unix(1, 0))
	}
}

// finish forgets the run's ctx and connection: the connect ended.
func (d *dialer) finish() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.ctx, d.cur = nil, nil
}

// explain returns the connect's error with what the dials said when nats
// only says no server was available.
func (d *dialer) explain(err error) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if errors.Is(err, nats.ErrNoServers) && len(d.errs) > 0 {
		return errors.New(strings.Join(d.errs, "; "))
	}
	var op *net.OpError
	if errors.As(err, &op) && op.Op == "dial" {
		return errors.New(dialError(op.Addr.String(), err))
	}
	return err
}

// dialError says why dialing address failed, without Go's "dial tcp"
// wording: "connect to 127.0.0.1:4222: connection refused".
func dialError(address string, err error) string {
	var op *net.OpError
	if errors.As(err, &op) {
		var sys *os.SyscallError
		if errors.As(op.Err, &sys) {
			return fmt.Sprintf("connect to %s: %v", address, sys.Err)
		}
		if errors.Is(op.Err, context.DeadlineExceeded) || op.Timeout() {
			return fmt.Sprintf("connect to %s: no answer in time", address)
		}
		return fmt.Sprintf("connect to %s: %v", address, op.Err)
	}
	return fmt.Sprintf("connect to %s: %v", address, err)
}
