package amqptask

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/schedulemaster-go/schedulemaster/protocol"
	"github.com/schedulemaster-go/schedulemaster/worker/executor"
)

// maxConnectTimeout bounds a connect (dial, TLS and AMQP handshakes) when
// the run's ctx allows more.
const maxConnectTimeout = 10 * time.Second

// ctxMargin is how much later than the run's ctx the socket's deadline of
// a connect falls.
const ctxMargin = 100 * time.Millisecond

// client is what the pool keeps per connection definition: the current
// *amqp.Connection, replaced by a fresh one at the next run once it was
// closed (the broker restarted, a heartbeat was missed): the pool keys
// clients by definition and would otherwise hand out a dead connection
// for as long as the definition is used.
type client struct {
	spec protocol.ConnectionSpec
	log  *slog.Logger
	// sem is held (one token) by whoever reads or replaces conn; a
	// channel so that a run waiting for it gives up with its ctx.
	sem    chan struct{}
	conn   *amqp.Connection
	state  *connState
	closed bool
}

// connState is what a connection's notifications said: why it closed,
// and whether the broker blocks its publishers.
type connState struct {
	closes  chan *amqp.Error
	blocked atomic.Pointer[string] // the broker's reason, nil when not blocked
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
func (cl *client) get(ctx context.Context) (*amqp.Connection, *connState, error) {
	select {
	case cl.sem <- struct{}{}:
	case <-ctx.Done():
		return nil, nil, ctx.Err()
	}
	defer func() { <-cl.sem }()
	if cl.closed {
		return nil, nil, executor.ErrPoolClosed
	}
	if cl.conn != nil && !cl.conn.IsClosed() {
		return cl.conn, cl.state, nil
	}
	if cl.conn != nil {
		reason := "closed"
		select {
		case e, ok := <-cl.state.closes:
			if ok && e != nil {
				reason = e.Error()
			}
		default:
		}
		cl.log.Info("amqp connection closed: connecting again", "connection", cl.spec.Name, "reason", reason)
	}
	conn, err := dial(ctx, &cl.spec)
	if err != nil {
		return nil, nil, err
	}
	st := &connState{closes: conn.NotifyClose(make(chan *amqp.Error, 1))}
	// The broker says when it blocks publishers (memory or disk alarm); a
	// run that times out then says why. The goroutine ends when the
	// connection closes (the library closes the channel).
	blocks := conn.NotifyBlocked(make(chan amqp.Blocking, 1))
	go func() {
		for b := range blocks {
			if b.Active {
				reason := b.Reason
				st.blocked.Store(&reason)
			} else {
				st.blocked.Store(nil)
			}
		}
	}()
	cl.conn, cl.state = conn, st
	return conn, st, nil
}

// close closes the client's connection for good; the pool calls it once
// no run uses the client.
func (cl *client) close() error {
	cl.sem <- struct{}{} // a connect in progress is bounded by its run's ctx
	defer func() { <-cl.sem }()
	cl.closed = true
	if cl.conn != nil && !cl.conn.IsClosed() {
		return cl.conn.CloseDeadline(time.Now().Add(5 * time.Second))
	}
	return nil
}

// dial connects to c within ctx: the TCP dial with ctx, the TLS and AMQP
// handshakes under a deadline at ctx's, ended at once when ctx is
// cancelled.
func dial(ctx context.Context, c *protocol.ConnectionSpec) (*amqp.Connection, error) {
	tlsCfg, err := executor.TLSConfig(c)
	if err != nil {
		return nil, err
	}
	addrs := c.Addresses()
	if len(addrs) == 0 {
		return nil, ErrNoAddress
	}
	addr := addrs[0]
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, fmt.Errorf("address %q: %w", addr, err)
	}
	scheme := "amqp"
	if tlsCfg != nil {
		scheme = "amqps"
	}
	// The URL holds no user nor password (they go in SASL): it may be
	// quoted by errors.
	url := scheme + "://" + net.JoinHostPort(host, port) + "/"
	user, pass := c.User, c.Secret
	if user == "" && pass == "" {
		user, pass = "guest", "guest" // RabbitMQ's default account
	}
	vhost := c.Database
	if vhost == "" {
		vhost = "/"
	}
	// When ctx ends first, the AfterFunc below ends the handshake; the
	// socket's own deadline is a little later, so that the run says it
	// timed out rather than an i/o timeout.
	deadline := time.Now().Add(maxConnectTimeout)
	if dl, ok := ctx.Deadline(); ok && dl.Add(ctxMargin).Before(deadline) {
		deadline = dl.Add(ctxMargin)
	}
	var (
		mu      sync.Mutex
		netConn net.Conn
		aborted bool
	)
	cfg := amqp.Config{
		SASL:            []amqp.Authentication{&amqp.PlainAuth{Username: user, Password: pass}},
		Vhost:           vhost,
		TLSClientConfig: tlsCfg,
		Heartbeat:       10 * time.Second,
		Properties: amqp.Table{
			"product":         "ScheduleMaster worker",
			"platform":        "Go",
			"connection_name": "schedulemaster " + c.Name,
		},
		Dial: func(network, address string) (net.Conn, error) {
			dctx, cancel := context.WithDeadline(ctx, deadline)
			defer cancel()
			nc, err := (&net.Dialer{}).DialContext(dctx, network, address)
			if err != nil {
				return nil, errors.New(dialError(address, err))
			}
			// Cleared by the library once the AMQP handshake is done.
			_ = nc.SetDeadline(deadline)
			mu.Lock()
			defer mu.Unlock()
			if aborted {
				_ = nc.Close()
				return nil, context.Canceled
			}
			netConn = nc
			return nc, nil
		},
	}
	stop := context.AfterFunc(ctx, func() {
		mu.Lock()
		defer mu.Unlock()
		aborted = true
		if netConn != nil {
			_ = netConn.SetDeadline(time.Unix(1, 0))
		}
	})
	conn, err := amqp.DialConfig(url, cfg)
	if !stop() {
		if conn != nil {
			_ = conn.CloseDeadline(time.Now())
		}
		return nil, ctx.Err()
	}
	if err != nil {
		var ae *amqp.Error
		if errors.As(err, &ae) {
			return nil, fmt.Errorf("connect to %s: %s (%d)", addr, ae.Reason, ae.Code)
		}
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			return nil, fmt.Errorf("connect to %s: no answer to the AMQP handshake in time", addr)
		}
		return nil, err
	}
	return conn, nil
}

// dialError says why dialing address failed, without Go's "dial tcp"
// wording: "connect to 127.0.0.1:5672: connection refused".
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
