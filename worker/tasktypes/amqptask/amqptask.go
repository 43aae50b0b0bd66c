// Package amqptask runs the tasks of type amqp: one message published to
// RabbitMQ (AMQP 0-9-1) with publisher confirms and the mandatory flag, so
// that a run succeeds only when the broker confirmed the message and
// routed it to a queue. Runs share one connection per connection
// definition (executor.Pool) and each opens its own channel on it, closed
// after: a returned (unroutable) message is then surely this run's.
package amqptask

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/schedulemaster-go/schedulemaster/protocol"
	"github.com/schedulemaster-go/schedulemaster/worker/executor"
)

// exchangeRE is an exchange name as RabbitMQ accepts it.
var exchangeRE = regexp.MustCompile(`^[A-Za-z0-9_.:-]{0,255}$`)

// closeWait bounds closing a run's channel, whatever is left of the run's
// time.
const closeWait = 2 * time.Second

// Executor runs amqp tasks.
type Executor struct {
	log  *slog.Logger
	pool *executor.Pool[*client]
}

// New returns the amqp executor; log is told of connections replaced.
func New(log *slog.Logger) *Executor {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	e := &Executor{log: log}
	e.pool = executor.NewPool(func(ctx context.Context, c *protocol.ConnectionSpec) (*client, error) {
		return newClient(ctx, c, log)
	}, (*client).close, executor.PoolOptions{})
	return e
}

// Type implements executor.Executor.
func (*Executor) Type() string { return protocol.TaskAMQP }

// Validate implements executor.Executor.
func (*Executor) Validate(t *executor.Task) error {
	if t.Def == nil || t.Def.AMQP == nil {
		return ErrNoSpec
	}
	return nil
}

// Close implements executor.Closer: it closes the pooled connections.
func (e *Executor) Close() error { return e.pool.Close() }

// publishing is a run's message, its params expanded.
type publishing struct {
	exchange, key string
	msg           amqp.Publishing
}

// where says where a message goes, for the output.
func (p *publishing) where() string {
	if p.exchange == "" {
		return "the default exchange, routing key " + p.key
	}
	return "exchange " + p.exchange + ", routing key " + p.key
}

// Run implements executor.Executor.
func (e *Executor) Run(ctx context.Context, t *executor.Task, _ io.Writer) executor.Result {
	if err := e.Validate(t); err != nil {
		return failed(err.Error())
	}
	if t.Conn == nil {
		return failed(executor.ErrNoConnection.Error())
	}
	p, err := message(t, t.Def.AMQP)
	if err != nil {
		return failed(err.Error())
	}
	cl, release, err := e.pool.Get(ctx, t.Conn)
	if err != nil {
		return ended(ctx, t, "connect", err, nil)
	}
	defer release()
	conn, st, err := cl.get(ctx)
	if err != nil {
		return ended(ctx, t, "connect", err, nil)
	}
	var ch *amqp.Channel
	err = guard(ctx, conn, func() (err error) { ch, err = conn.Channel(); return err })
	if errors.Is(err, amqp.ErrClosed) && ctx.Err() == nil {
		// The connection died since it was last seen open: once more on a
		// fresh one.
		if conn, st, err = cl.get(ctx); err != nil {
			return ended(ctx, t, "connect", err, nil)
		}
		err = guard(ctx, conn, func() (err error) { ch, err = conn.Channel(); return err })
	}
	if err != nil {
		return ended(ctx, t, "open a channel", err, st)
	}
	defer func() {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), closeWait)
		defer cancel()
		_ = guard(cctx, conn, ch.Close)
	}()
	if err := guard(ctx, conn, func() error { return ch.Confirm(false) }); err != nil {
		return ended(ctx, t, "turn on publisher confirms", err, st)
	}
	// The channel is this run's alone: what it returns is this message.
	returns := ch.NotifyReturn(make(chan amqp.Return, 1))
	closes := ch.NotifyClose(make(chan *amqp.Error, 1))
	var dc *amqp.DeferredConfirmation
	err = guard(ctx, conn, func() (err error) {
		dc, err = ch.PublishWithDeferredConfirmWithContext(ctx, p.exchange, p.key, true, false, p.msg)
		return err
	})
	if err != nil {
		return ended(ctx, t, "publish to "+p.where(), err, st)
	}
	select {
	case <-dc.Done():
	case <-ctx.Done():
		return ended(ctx, t, "publish to "+p.where()+" (waiting for the broker's confirm)", ctx.Err(), st)
	}
	// RabbitMQ returns an unroutable mandatory message before it confirms
	// it, and the library hands the return over before the confirm.
	select {
	case r, ok := <-returns:
		if ok {
			return failed(unroutable(p, r))
		}
	default:
	}
	if !dc.Acked() {
		select {
		case e, ok := <-closes:
			if ok && e != nil {
				return failed(fmt.Sprintf("publish to %s: the broker closed the channel: %s (%d)", p.where(), e.Reason, e.Code))
			}
		default:
		}
		return failed("publish to " + p.where() + ": the broker refused the message (nack)")
	}
	return executor.Result{Result: protocol.ResultSuccess,
		Output: fmt.Sprintf("published %d bytes to %s: confirmed (message id %s)", len(p.msg.Body), p.where(), p.msg.MessageId)}
}

// unroutable says why the broker returned the message.
func unroutable(p *publishing, r amqp.Return) string {
	why := fmt.Sprintf("%s (%d)", r.ReplyText, r.ReplyCode)
	if r.ReplyCode == amqp.NoRoute {
		if p.exchange == "" {
			return fmt.Sprintf("unroutable: no queue named %s (default exchange): %s", p.key, why)
		}
		return fmt.Sprintf("unroutable: no queue bound to exchange %s with routing key %s: %s", p.exchange, p.key, why)
	}
	return "returned by the broker: " + why
}

// message is the run's message: its params expanded, JSON's content type
// when the payload is JSON and none is given, persistent unless transient,
// with a message id of its own.
func message(t *executor.Task, spec *protocol.AMQPSpec) (*publishing, error) {
	p := &publishing{exchange: t.Param(spec.Exchange), key: t.Param(spec.RoutingKey)}
	if !exchangeRE.MatchString(p.exchange) {
		return nil, fmt.Errorf("exchange %q: %w", p.exchange, ErrBadExchange)
	}
	if len(p.key) > 255 || (p.exchange == "" && p.key == "") {
		return nil, fmt.Errorf("routing key %q: %w", p.key, ErrBadRoutingKey)
	}
	body := []byte(t.Param(spec.Payload))
	ct := t.Param(spec.ContentType)
	if ct == "" {
		ct = "text/plain"
		if len(body) > 0 && json.Valid(body) {
			ct = "application/json"
		}
	}
	mode := amqp.Persistent
	if spec.Transient {
		mode = amqp.Transient
	}
	var headers amqp.Table
	if len(spec.Headers) > 0 {
		headers = make(amqp.Table, len(spec.Headers))
		for k, v := range spec.Headers {
			headers[t.Param(k)] = t.Param(v)
		}
	}
	p.msg = amqp.Publishing{Headers: headers, ContentType: ct, DeliveryMode: mode, MessageId: uuid.NewString(),
		Timestamp: time.Now().UTC().Truncate(time.Second), AppId: "schedulemaster", Body: body}
	return p, nil
}

// guard runs f, a call to the broker that ctx does not end (a channel's
// open or close, a publish's write). Should ctx end first, the broker is
// not answering (blocked or hung): the connection is closed so that f
// returns, and the next run connects anew.
func guard(ctx context.Context, conn *amqp.Connection, f func() error) error {
	if err := ctx.Err(); err != nil {
		return err // not started: nothing to cut
	}
	var mu sync.Mutex
	done, cut := false, false
	stop := context.AfterFunc(ctx, func() {
		mu.Lock()
		if done {
			mu.Unlock()
			return
		}
		cut = true
		mu.Unlock()
		_ = conn.CloseDeadline(time.Now())
	})
	err := f()
	mu.Lock()
	done = true
	mu.Unlock()
	stop()
	if cut && err != nil {
		return fmt.Errorf("%w: %w", ErrAbandoned, err)
	}
	return err
}

func failed(msg string) executor.Result {
	return executor.Result{Result: protocol.ResultFailed, Output: msg}
}

// ended is the result of err in what: a timeout when the run's time was
// up (saying when the broker blocks publishers), else failed with err.
func ended(ctx context.Context, t *executor.Task, what string, err error, st *connState) executor.Result {
	if errors.Is(ctx.Err(), context.DeadlineExceeded) || errors.Is(err, context.DeadlineExceeded) {
		s := fmt.Sprintf("%s: timed out after %s", what, t.Timeout.Round(time.Millisecond))
		if st != nil {
			if b := st.blocked.Load(); b != nil {
				s += " (the broker blocks publishers: " + *b + ")"
			}
		}
		return executor.Result{Result: protocol.ResultTimeout, Output: s}
	}
	var ae *amqp.Error
	if errors.As(err, &ae) && !errors.Is(err, ErrAbandoned) {
		return failed(fmt.Sprintf("%s: %s (%d)", what, ae.Reason, ae.Code))
	}
	if strings.HasPrefix(err.Error(), "connect to ") {
		return failed(err.Error()) // says what it did already
	}
	return failed(what + ": " + err.Error())
}

// Test implements executor.Tester: it connects to c (not through the
// pool) and says which broker answered.
func (e *Executor) Test(ctx context.Context, c *protocol.ConnectionSpec) (string, error) {
	if c == nil {
		return "", executor.ErrNoConnection
	}
	conn, err := dial(ctx, c)
	if err != nil {
		if ctx.Err() != nil {
			return "", fmt.Errorf("connect: %w", ctx.Err())
		}
		return "", err
	}
	defer func() { _ = conn.CloseDeadline(time.Now().Add(2 * time.Second)) }()
	s := fmt.Sprintf("%v %v (AMQP %d-%d-1), virtual host %s", prop(conn.Properties, "product"), prop(conn.Properties, "version"), conn.Major, conn.Minor, conn.Config.Vhost)
	if name := prop(conn.Properties, "cluster_name"); name != "" {
		s += ", cluster " + name
	}
	return s, nil
}

// prop is a server property as text.
func prop(t amqp.Table, k string) string {
	switch v := t[k].(type) {
	case string:
		return v
	case []byte:
		return string(v)
	case nil:
		return ""
	default:
		return fmt.Sprint(v)
	}
}
