package amqptask

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/schedulemaster-go/schedulemaster/protocol"
	"github.com/schedulemaster-go/schedulemaster/worker/executor/executortest"
)

const amqpAddr = "127.0.0.1:5672"

func unique(t *testing.T) string {
	t.Helper()
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

func liveConn(t *testing.T) *protocol.ConnectionSpec {
	t.Helper()
	return &protocol.ConnectionSpec{Name: "amqp-test", Kind: protocol.ConnAMQP, Address: executortest.Service(t, "RabbitMQ", amqpAddr),
		User: "guest", Secret: "guest"}
}

func def(spec *protocol.AMQPSpec, params map[string]string) *protocol.TaskDef {
	spec.Connection = "amqp-test"
	return &protocol.TaskDef{ID: "t1", Title: "amqp", Type: protocol.TaskAMQP, Timeout: protocol.Duration(5 * time.Second),
		Schedule: protocol.Schedule{Kind: protocol.ScheduleInterval, Every: protocol.Duration(time.Hour)}, Params: params, AMQP: spec}
}

func newExec(t *testing.T) *Executor {
	t.Helper()
	ex := New(nil)
	t.Cleanup(func() { _ = ex.Close() })
	return ex
}

// observer is the test's own channel on the broker.
func observer(t *testing.T) *amqp.Channel {
	t.Helper()
	conn, err := amqp.Dial("amqp://guest:guest@" + amqpAddr + "/")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	ch, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	return ch
}

// queue declares a queue of a unique name, deleted after the test.
func queue(t *testing.T, ch *amqp.Channel) string {
	t.Helper()
	q, err := ch.QueueDeclare("sm-test-"+unique(t), false, false, false, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = ch.QueueDelete(q.Name, false, false, false) })
	return q.Name
}

// exactly takes the n messages of queue q, and fails unless there are
// exactly n: a run's publish is confirmed once the broker enqueued it.
func exactly(t *testing.T, ch *amqp.Channel, q string, n int) []amqp.Delivery {
	t.Helper()
	var got []amqp.Delivery
	for {
		d, ok, err := ch.Get(q, true)
		if err != nil {
			t.Fatal(err)
		}
		if !ok {
			break
		}
		got = append(got, d)
	}
	if len(got) != n {
		t.Fatalf("queue %s held %d messages, want %d (one per run)", q, len(got), n)
	}
	return got
}

func TestExecutorAMQPPublishDeliversOncePerRun(t *testing.T) {
	t.Parallel()
	conn := liveConn(t)
	ch := observer(t)
	q := queue(t, ch)
	ex := newExec(t)
	const runs = 3
	var ids []string
	for i := range runs {
		d := def(&protocol.AMQPSpec{RoutingKey: "{{Q}}", Payload: `{"n":{{N}}}`, Headers: map[string]string{"X-Run": "{{N}}", "X-Fixed": "yes"}},
			map[string]string{"Q": q, "N": fmt.Sprint(i)})
		res, out := executortest.Run(t, ex, d, conn, 5*time.Second)
		prefix := fmt.Sprintf("published 7 bytes to the default exchange, routing key %s: confirmed (message id ", q)
		if res.Result != protocol.ResultSuccess || !strings.HasPrefix(out, prefix) {
			t.Fatalf("run %d: %s %q, want success %q...", i, res.Result, out, prefix)
		}
		ids = append(ids, strings.TrimSuffix(strings.TrimPrefix(out, prefix), ")"))
		executortest.NoSecret(t, out, "guest")
		if n := ex.pool.Len(); n != 1 {
			t.Fatalf("pool holds %d clients after run %d, want 1", n, i)
		}
	}
	for i, d := range exactly(t, ch, q, runs) {
		if string(d.Body) != fmt.Sprintf(`{"n":%d}`, i) || d.Headers["X-Run"] != fmt.Sprint(i) || d.Headers["X-Fixed"] != "yes" ||
			d.DeliveryMode != amqp.Persistent || d.ContentType != "application/json" || d.MessageId != ids[i] || d.AppId != "schedulemaster" {
			t.Fatalf("message %d = %q headers %v mode %d type %q id %q (want %q)", i, d.Body, d.Headers, d.DeliveryMode, d.ContentType, d.MessageId, ids[i])
		}
	}
	cl, release, err := ex.pool.Get(context.Background(), conn)
	if err != nil {
		t.Fatal(err)
	}
	c := cl.conn
	release()
	if err := ex.Close(); err != nil {
		t.Fatal(err)
	}
	if !c.IsClosed() {
		t.Fatal("Close left the pooled connection open")
	}
}

func TestExecutorAMQPPublishToADirectExchange(t *testing.T) {
	t.Parallel()
	conn := liveConn(t)
	ch := observer(t)
	q := queue(t, ch)
	exchange := "sm-test-x-" + unique(t)
	if err := ch.ExchangeDeclare(exchange, amqp.ExchangeDirect, false, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ch.ExchangeDelete(exchange, false, false) })
	if err := ch.QueueBind(q, "orders.close", exchange, false, nil); err != nil {
		t.Fatal(err)
	}
	ex := newExec(t)
	for i := range 2 {
		d := def(&protocol.AMQPSpec{Exchange: "{{X}}", RoutingKey: "orders.{{ACTION}}", Payload: "close order {{N}}", Transient: i == 1,
			Headers: map[string]string{"X-Run": "{{N}}"}}, map[string]string{"X": exchange, "ACTION": "close", "N": fmt.Sprint(i)})
		res, out := executortest.Run(t, ex, d, conn, 5*time.Second)
		prefix := fmt.Sprintf("published 13 bytes to exchange %s, routing key orders.close: confirmed (message id ", exchange)
		if res.Result != protocol.ResultSuccess || !strings.HasPrefix(out, prefix) {
			t.Fatalf("run %d: %s %q, want success %q...", i, res.Result, out, prefix)
		}
		got := exactly(t, ch, q, 1)[0]
		mode := amqp.Persistent
		if i == 1 {
			mode = amqp.Transient
		}
		if string(got.Body) != fmt.Sprintf("close order %d", i) || got.Headers["X-Run"] != fmt.Sprint(i) || got.DeliveryMode != mode ||
			got.ContentType != "text/plain" || got.Exchange != exchange || got.RoutingKey != "orders.close" {
			t.Fatalf("run %d delivered %q headers %v mode %d type %q via %s/%s", i, got.Body, got.Headers, got.DeliveryMode, got.ContentType, got.Exchange, got.RoutingKey)
		}
	}
}

func TestExecutorAMQPUnroutableFails(t *testing.T) {
	t.Parallel()
	conn := liveConn(t)
	ch := observer(t)
	exchange := "sm-test-x-" + unique(t)
	if err := ch.ExchangeDeclare(exchange, amqp.ExchangeDirect, false, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ch.ExchangeDelete(exchange, false, false) })
	ex := newExec(t)
	res, out := executortest.Run(t, ex, def(&protocol.AMQPSpec{Exchange: exchange, RoutingKey: "nobody"}, nil), conn, 5*time.Second)
	if want := "unroutable: no queue bound to exchange " + exchange + " with routing key nobody: NO_ROUTE (312)"; res.Result != protocol.ResultFailed || out != want {
		t.Fatalf("%s %q, want failed %q", res.Result, out, want)
	}
	q := "sm-test-none-" + unique(t)
	res, out = executortest.Run(t, ex, def(&protocol.AMQPSpec{RoutingKey: q}, nil), conn, 5*time.Second)
	if want := "unroutable: no queue named " + q + " (default exchange): NO_ROUTE (312)"; res.Result != protocol.ResultFailed || out != want {
		t.Fatalf("%s %q, want failed %q", res.Result, out, want)
	}
	missing := "sm-test-missing-" + unique(t)
	res, out = executortest.Run(t, ex, def(&protocol.AMQPSpec{Exchange: missing, RoutingKey: "k"}, nil), conn, 5*time.Second)
	if res.Result != protocol.ResultFailed || !strings.Contains(out, "the broker closed the channel: NOT_FOUND - no exchange '"+missing+"'") {
		t.Fatalf("missing exchange: %s %q", res.Result, out)
	}
	// Channel errors leave the shared connection open.
	cl, release, err := ex.pool.Get(context.Background(), conn)
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	if cl.conn.IsClosed() || ex.pool.Len() != 1 {
		t.Fatal("a failed publish closed the shared connection")
	}
}

func TestExecutorAMQPWrongPasswordFails(t *testing.T) {
	t.Parallel()
	wrong := liveConn(t)
	wrong.Secret = "wrong-" + unique(t)
	ex := newExec(t)
	// RabbitMQ answers a wrong password after a pause (3 s here): the run
	// and Test side by side.
	t.Run("run", func(t *testing.T) {
		t.Parallel()
		res, out := executortest.Run(t, ex, def(&protocol.AMQPSpec{RoutingKey: "q"}, nil), wrong, 10*time.Second)
		if want := "connect to " + amqpAddr + ": username or password not allowed (403)"; res.Result != protocol.ResultFailed || out != want {
			t.Fatalf("%s %q, want failed %q", res.Result, out, want)
		}
		executortest.NoSecret(t, out, wrong.Secret)
		if n := ex.pool.Len(); n != 0 {
			t.Fatalf("pool keeps %d clients that could not connect", n)
		}
	})
	t.Run("test", func(t *testing.T) {
		t.Parallel()
		if _, err := ex.Test(context.Background(), wrong); err == nil || !strings.Contains(err.Error(), "(403)") {
			t.Fatalf("Test with a wrong password = %v, want access refused", err)
		} else {
			executortest.NoSecret(t, err.Error(), wrong.Secret)
		}
	})
	t.Run("vhost", func(t *testing.T) {
		t.Parallel()
		conn := liveConn(t)
		conn.Database = "sm-no-vhost-" + unique(t)
		res, out := executortest.Run(t, ex, def(&protocol.AMQPSpec{RoutingKey: "q"}, nil), conn, 5*time.Second)
		if want := "connect to " + amqpAddr + ": NOT_ALLOWED - vhost " + conn.Database + " not found (530)"; res.Result != protocol.ResultFailed || out != want {
			t.Fatalf("missing vhost: %s %q, want %q", res.Result, out, want)
		}
	})
}

func TestExecutorAMQPDownServerFailsQuickly(t *testing.T) {
	t.Parallel()
	addr := executortest.ClosedPort(t)
	conn := &protocol.ConnectionSpec{Name: "amqp-test", Kind: protocol.ConnAMQP, Address: addr, User: "u", Secret: "pw-" + unique(t)}
	ex := newExec(t)
	start := time.Now()
	res, out := executortest.Run(t, ex, def(&protocol.AMQPSpec{RoutingKey: "q"}, nil), conn, 5*time.Second)
	if res.Result != protocol.ResultFailed || out != "connect to "+addr+": connection refused" {
		t.Fatalf("%s %q, want failed: connection refused", res.Result, out)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("took %s against a closed port", d)
	}
	executortest.NoSecret(t, out, conn.Secret)
	if _, err := ex.Test(context.Background(), conn); err == nil || !strings.Contains(err.Error(), "connection refused") {
		t.Fatalf("Test on a down server = %v, want connection refused", err)
	}
}

// A server that accepts the connection but never speaks: the connect ends
// with the run's timeout.
func TestExecutorAMQPSilentServerTimesOut(t *testing.T) {
	t.Parallel()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			defer c.Close()
		}
	}()
	ex := newExec(t)
	conn := &protocol.ConnectionSpec{Name: "amqp-test", Kind: protocol.ConnAMQP, Address: l.Addr().String()}
	start := time.Now()
	res, out := executortest.Run(t, ex, def(&protocol.AMQPSpec{RoutingKey: "q"}, nil), conn, 300*time.Millisecond)
	if res.Result != protocol.ResultTimeout || out != "connect: timed out after 300ms" {
		t.Fatalf("%s %q, want a timeout", res.Result, out)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("took %s for a 300ms timeout", d)
	}
}

func TestExecutorAMQPReplacesAClosedConnection(t *testing.T) {
	t.Parallel()
	conn := liveConn(t)
	ch := observer(t)
	q := queue(t, ch)
	ex := newExec(t)
	d := def(&protocol.AMQPSpec{RoutingKey: q, Payload: "x"}, nil)
	if res, out := executortest.Run(t, ex, d, conn, 5*time.Second); res.Result != protocol.ResultSuccess {
		t.Fatalf("%s %q", res.Result, out)
	}
	cl, release, err := ex.pool.Get(context.Background(), conn)
	if err != nil {
		t.Fatal(err)
	}
	old := cl.conn
	release()
	_ = old.Close() // as when the broker restarted
	if res, out := executortest.Run(t, ex, d, conn, 5*time.Second); res.Result != protocol.ResultSuccess {
		t.Fatalf("after the connection closed: %s %q", res.Result, out)
	}
	if cl.conn == old || cl.conn.IsClosed() || ex.pool.Len() != 1 {
		t.Fatalf("closed connection not replaced in place (pool len %d)", ex.pool.Len())
	}
	exactly(t, ch, q, 2)
}

func TestExecutorAMQPTest(t *testing.T) {
	t.Parallel()
	conn := liveConn(t)
	msg, err := newExec(t).Test(context.Background(), conn)
	if err != nil {
		t.Fatal(err)
	}
	t.Log(msg)
	if !strings.HasPrefix(msg, "RabbitMQ ") || !strings.Contains(msg, "(AMQP 0-9-1), virtual host /") {
		t.Fatalf("Test = %q, want the broker's product and version", msg)
	}
}

func TestExecutorAMQPBadExpandedNamesFail(t *testing.T) {
	t.Parallel()
	ex := newExec(t)
	conn := &protocol.ConnectionSpec{Name: "amqp-test", Kind: protocol.ConnAMQP, Address: "127.0.0.1:1"}
	res, out := executortest.Run(t, ex, def(&protocol.AMQPSpec{Exchange: "x{{X}}", RoutingKey: "k"}, map[string]string{"X": " y"}), conn, time.Second)
	if res.Result != protocol.ResultFailed || !strings.Contains(out, `exchange "x y"`) {
		t.Fatalf("%s %q", res.Result, out)
	}
	res, out = executortest.Run(t, ex, def(&protocol.AMQPSpec{RoutingKey: "{{Q}}"}, map[string]string{"Q": ""}), conn, time.Second)
	if res.Result != protocol.ResultFailed || !strings.Contains(out, `routing key ""`) {
		t.Fatalf("%s %q", res.Result, out)
	}
	res, out = executortest.Run(t, ex, def(&protocol.AMQPSpec{RoutingKey: "q"}, nil), nil, time.Second)
	if res.Result != protocol.ResultFailed || !strings.Contains(out, "connection is not defined") {
		t.Fatalf("no connection: %s %q", res.Result, out)
	}
}

// A call to the broker that ctx cannot end (a channel's open on a broker
// that blocks the connection) is cut by closing the connection when the
// run's time is up.
func TestExecutorAMQPGuardCutsAHungCall(t *testing.T) {
	t.Parallel()
	conn, err := dial(context.Background(), liveConn(t))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = conn.Close() }()
	closed := conn.NotifyClose(make(chan *amqp.Error, 1))
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	start := time.Now()
	err = guard(ctx, conn, func() error {
		<-closed // hangs until the connection closes
		return amqp.ErrClosed
	})
	if !errors.Is(err, ErrAbandoned) || !conn.IsClosed() {
		t.Fatalf("guard = %v, closed %v: want the call cut and the connection closed", err, conn.IsClosed())
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("took %s to cut a call after 100ms", d)
	}
	// A call that ends in time leaves the connection alone.
	conn2, err := dial(context.Background(), liveConn(t))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = conn2.Close() }()
	ctx2, cancel2 := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel2()
	if err := guard(ctx2, conn2, func() error {
		ch, err := conn2.Channel()
		if err == nil {
			err = ch.Close()
		}
		return err
	}); err != nil || conn2.IsClosed() {
		t.Fatalf("guard of a quick call = %v, closed %v", err, conn2.IsClosed())
	}
}
