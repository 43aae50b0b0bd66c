// Package mqtttask runs tasks of type mqtt: it publishes one message to a
// topic of an MQTT broker, speaking MQTT 5 (paho.golang) or 3.1.1
// (paho.mqtt.golang) as the connection's protocol_version option says, and
// succeeds once the message's QoS is honoured: written (0), PUBACK (1),
// PUBREC/PUBREL/PUBCOMP completed (2).
package mqtttask

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"strings"
	"time"

	"github.com/schedulemaster-go/schedulemaster/protocol"
	"github.com/schedulemaster-go/schedulemaster/worker/executor"
)

// Executor runs mqtt tasks over one pooled client per connection, with a
// clean session and a client id of its own, reconnected by the first run
// that finds its connection lost.
type Executor struct {
	log  *slog.Logger
	pool *executor.Pool[*link]
}

// New returns the mqtt executor; log gets its connection events.
func New(log *slog.Logger) *Executor {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	e := &Executor{log: log}
	e.pool = executor.NewPool(e.open, (*link).close, executor.PoolOptions{})
	return e
}

// open makes the pooled link of c, connected: a broker that cannot be
// reached is not pooled, the next run tries again.
func (e *Executor) open(ctx context.Context, c *protocol.ConnectionSpec) (*link, error) {
	l, err := newLink(c, e.log)
	if err != nil {
		return nil, err
	}
	if _, err := l.session(ctx); err != nil {
		return nil, err
	}
	return l, nil
}

// Type implements executor.Executor.
func (*Executor) Type() string { return protocol.TaskMQTT }

// Validate implements executor.Executor: the definition and, when the
// worker has it, the connection's protocol version.
func (*Executor) Validate(t *executor.Task) error {
	if t.Def == nil || t.Def.MQTT == nil {
		return errors.New("the task has no mqtt definition")
	}
	if q := t.Def.MQTT.QoS; q < 0 || q > 2 {
		return fmt.Errorf("QoS %d is not 0, 1 or 2", q)
	}
	if t.Conn != nil {
		if t.Conn.Kind != "" && t.Conn.Kind != protocol.ConnMQTT {
			return fmt.Errorf("connection %q is a %s connection, not mqtt", t.Conn.Name, t.Conn.Kind)
		}
		if _, err := isV311(t.Conn); err != nil {
			return err
		}
	}
	return nil
}

// Run implements executor.Executor: it publishes the message and writes
// one line of what the broker answered.
func (e *Executor) Run(ctx context.Context, t *executor.Task, out io.Writer) executor.Result {
	if err := e.Validate(t); err != nil {
		return failed(out, err.Error())
	}
	if t.Conn == nil {
		return failed(out, executor.ErrNoConnection.Error())
	}
	spec := t.Def.MQTT
	m := message{topic: t.Param(spec.Topic), payload: []byte(t.Param(spec.Payload)), qos: byte(spec.QoS), retain: spec.Retain}
	if err := checkTopic(m.topic); err != nil {
		return failed(out, err.Error())
	}
	what := fmt.Sprintf("%d bytes to %s (QoS %d%s)", len(m.payload), m.topic, m.qos, map[bool]string{true: ", retain"}[m.retain])
	l, release, err := e.pool.Get(ctx, t.Conn)
	if err != nil {
		return ended(ctx, out, "connect to "+t.Conn.Address, err)
	}
	defer release()
	s, err := l.session(ctx)
	if err != nil {
		return ended(ctx, out, "connect to "+t.Conn.Address, err)
	}
	ack, err := s.publish(ctx, m)
	if err != nil {
		wait := map[byte]string{0: "sending", 1: "waiting for PUBACK", 2: "waiting for PUBCOMP"}[m.qos]
		return ended(ctx, out, "publish "+what+": "+wait, err)
	}
	fmt.Fprintf(out, "published %s: %s\n", what, ack)
	return executor.Result{Result: protocol.ResultSuccess}
}

// checkTopic refuses a topic the broker would answer by closing the
// connection every run shares.
func checkTopic(topic string) error {
	switch {
	case topic == "":
		return fmt.Errorf("%w: it is empty once its params are expanded", ErrTopic)
	case strings.ContainsAny(topic, "+#\x00"):
		return fmt.Errorf("%w: %q holds a wildcard (+ or #) or a NUL once its params are expanded", ErrTopic, topic)
	case len(topic) > 65535:
		return fmt.Errorf("%w: it is longer than 65535 bytes once its params are expanded", ErrTopic)
	}
	return nil
}

// Test implements executor.Tester: it connects with a fresh client, reads
// the CONNACK and disconnects.
func (e *Executor) Test(ctx context.Context, c *protocol.ConnectionSpec) (string, error) {
	v311, err := isV311(c)
	if err != nil {
		return "", err
	}
	s, said, err := connect(ctx, c, v311, e.log)
	if err != nil {
		if r := reason(err); r != err.Error() {
			return "", fmt.Errorf("connect to %s: %s", c.Address, r)
		}
		return "", fmt.Errorf("connect to %s: %w", c.Address, err)
	}
	s.close()
	return said, nil
}

// Close implements executor.Closer: it disconnects every pooled client.
func (e *Executor) Close() error { return e.pool.Close() }

// failed is a run that could not start: the definition or its params.
func failed(out io.Writer, msg string) executor.Result {
	fmt.Fprintln(out, msg)
	return executor.Result{Result: protocol.ResultFailed}
}

// ended is a run that failed at step, or timed out when ctx's deadline
// passed.
func ended(ctx context.Context, out io.Writer, step string, err error) executor.Result {
	if timedOut(ctx) {
		fmt.Fprintf(out, "%s: timed out: the task's timeout passed\n", step)
		return executor.Result{Result: protocol.ResultTimeout}
	}
	fmt.Fprintf(out, "%s: %s\n", step, reason(err))
	return executor.Result{Result: protocol.ResultFailed}
}

// timedOut says ctx's deadline passed: a socket deadline set from it may
// end a read a moment before ctx itself says so.
func timedOut(ctx context.Context) bool {
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return true
	}
	dl, ok := ctx.Deadline()
	return ok && !time.Now().Before(dl)
}

// reason is err without what its step already says: a failed dial's
// "dial tcp host:port: connect:" prefix.
func reason(err error) string {
	var op *net.OpError
	if errors.As(err, &op) && op.Op == "dial" && op.Err != nil {
		var sys *os.SyscallError
		if errors.As(op.Err, &sys) {
			return sys.Err.Error()
		}
		return op.Err.Error()
	}
	return err.Error()
}
