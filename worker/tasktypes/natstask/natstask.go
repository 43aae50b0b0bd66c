// Package natstask runs the tasks of type nats: a core NATS publish
// (flushed, so the server has it), a JetStream publish whose stream's ack
// is awaited, or a request whose reply is the run's output. Runs share one
// connection per connection definition (executor.Pool).
package natstask

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/schedulemaster-go/schedulemaster/protocol"
	"github.com/schedulemaster-go/schedulemaster/worker/executor"
)

// MaxReply is how much of a request's reply the output shows.
const MaxReply = 32 << 10

// Executor runs nats tasks.
type Executor struct {
	log  *slog.Logger
	pool *executor.Pool[*client]
}

// New returns the nats executor; log is told of connections replaced and
// of the servers' asynchronous errors.
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
func (*Executor) Type() string { return protocol.TaskNATS }

// Validate implements executor.Executor.
func (*Executor) Validate(t *executor.Task) error {
	if t.Def == nil || t.Def.NATS == nil {
		return ErrNoSpec
	}
	return nil
}

// Close implements executor.Closer: it closes the pooled connections.
func (e *Executor) Close() error { return e.pool.Close() }

// Run implements executor.Executor.
func (e *Executor) Run(ctx context.Context, t *executor.Task, _ io.Writer) executor.Result {
	if err := e.Validate(t); err != nil {
		return failed(err.Error())
	}
	if t.Conn == nil {
		return failed(executor.ErrNoConnection.Error())
	}
	spec := t.Def.NATS
	msg, err := message(t, spec)
	if err != nil {
		return failed(err.Error())
	}
	cl, release, err := e.pool.Get(ctx, t.Conn)
	if err != nil {
		return ended(ctx, t, "connect", err)
	}
	defer release()
	nc, js, err := cl.get(ctx)
	if err != nil {
		return ended(ctx, t, "connect", err)
	}
	// A publish the server refuses for want of permission is told
	// asynchronously: it shows as the connection's last error changing.
	before := nc.LastError()
	switch spec.Mode {
	case protocol.NATSJetStream:
		ack, err := js.PublishMsg(ctx, msg)
		if err != nil {
			if errors.Is(err, jetstream.ErrNoStreamResponse) {
				err = fmt.Errorf("no stream stores subject %s (%w)", msg.Subject, err)
			}
			return ended(ctx, t, "jetstream publish to "+msg.Subject, denied(nc, before, msg.Subject, err))
		}
		s := fmt.Sprintf("stored %d bytes from %s in stream %s as sequence %d", len(msg.Data), msg.Subject, ack.Stream, ack.Sequence)
		if ack.Duplicate {
			s += " (duplicate: the stream had this message id already and did not store it again)"
		}
		return executor.Result{Result: protocol.ResultSuccess, Output: s}
	case protocol.NATSRequest:
		reply, err := nc.RequestMsgWithContext(ctx, msg)
		if err != nil {
			if errors.Is(err, nats.ErrNoResponders) {
				return failed("no responders on subject " + msg.Subject)
			}
			return ended(ctx, t, "no reply on "+msg.Subject, denied(nc, before, msg.Subject, err))
		}
		return executor.Result{Result: protocol.ResultSuccess, Output: replyText(reply.Data)}
	default:
		if err := nc.PublishMsg(msg); err != nil {
			return ended(ctx, t, "publish to "+msg.Subject, err)
		}
		// Flush waits for the server's answer to a ping sent after the
		// message: the server has processed the message then.
		if err := nc.FlushWithContext(ctx); err != nil {
			return ended(ctx, t, "publish to "+msg.Subject+" (waiting for the server)", err)
		}
		if err := denied(nc, before, msg.Subject, nil); err != nil {
			return failed("publish to " + msg.Subject + ": " + err.Error())
		}
		return executor.Result{Result: protocol.ResultSuccess, Output: fmt.Sprintf("published %d bytes to %s", len(msg.Data), msg.Subject)}
	}
}

// message is the run's message: subject, payload and headers with the
// task's params expanded.
func message(t *executor.Task, spec *protocol.NATSSpec) (*nats.Msg, error) {
	subject := t.Param(spec.Subject)
	if subject == "" || strings.ContainsAny(subject, " \t\r\n\x00*>") || strings.HasPrefix(subject, ".") ||
		strings.HasSuffix(subject, ".") || strings.Contains(subject, "..") || !utf8.ValidString(subject) {
		return nil, fmt.Errorf("subject %q: %w", subject, ErrBadSubject)
	}
	msg := nats.NewMsg(subject)
	msg.Data = []byte(t.Param(spec.Payload))
	for k, v := range spec.Headers {
		k, v = t.Param(k), t.Param(v)
		if strings.ContainsAny(k, "\r\n: ") || strings.ContainsAny(v, "\r\n") {
			return nil, fmt.Errorf("header %q: %w", k, ErrBadHeader)
		}
		msg.Header.Set(k, v)
	}
	if len(msg.Header) == 0 {
		msg.Header = nil // a message without headers stays a plain PUB
	}
	return msg, nil
}

// denied returns the server's permission violation for a publish to
// subject when the connection's last error changed since before to one,
// else err.
func denied(nc *nats.Conn, before error, subject string, err error) error {
	last := nc.LastError()
	if last != nil && last != before && errors.Is(last, nats.ErrPermissionViolation) &&
		strings.Contains(strings.ToLower(last.Error()), strings.ToLower(`publish to "`+subject+`"`)) {
		return last
	}
	return err
}

// replyText is a reply's payload as the run's output, bounded.
func replyText(b []byte) string {
	if len(b) == 0 {
		return "(empty reply)"
	}
	if len(b) > MaxReply {
		return string(b[:MaxReply]) + fmt.Sprintf("\n[reply cut: %d more bytes]", len(b)-MaxReply)
	}
	return string(b)
}

func failed(msg string) executor.Result {
	return executor.Result{Result: protocol.ResultFailed, Output: msg}
}

// ended is the result of err in what: a timeout when the run's time was
// up, else failed with err.
func ended(ctx context.Context, t *executor.Task, what string, err error) executor.Result {
	if errors.Is(ctx.Err(), context.DeadlineExceeded) || errors.Is(err, context.DeadlineExceeded) || errors.Is(err, nats.ErrTimeout) {
		return executor.Result{Result: protocol.ResultTimeout, Output: fmt.Sprintf("%s: timed out after %s", what, t.Timeout.Round(time.Millisecond))}
	}
	if strings.HasPrefix(err.Error(), "connect to ") {
		return failed(err.Error()) // says what it did already
	}
	return failed(what + ": " + err.Error())
}

// Test implements executor.Tester: it connects to c (not through the
// pool) and says which server answered and whether it runs JetStream.
func (e *Executor) Test(ctx context.Context, c *protocol.ConnectionSpec) (string, error) {
	if c == nil {
		return "", executor.ErrNoConnection
	}
	nc, err := connect(ctx, c, e.log)
	if err != nil {
		if ctx.Err() != nil {
			return "", fmt.Errorf("connect: %w", ctx.Err())
		}
		return "", err
	}
	defer nc.Close()
	js := "JetStream disabled"
	if on, _ := nc.ConnectedServerJetStream(); on {
		js = "JetStream enabled"
	}
	s := fmt.Sprintf("NATS server %s (%s), %s, max payload %d bytes", nc.ConnectedServerVersion(), nc.ConnectedServerName(), js, nc.MaxPayload())
	if cluster := nc.ConnectedClusterName(); cluster != "" {
		s += ", cluster " + cluster
	}
	return s, nil
}
