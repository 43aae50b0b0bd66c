package natstask

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/schedulemaster-go/schedulemaster/protocol"
	"github.com/schedulemaster-go/schedulemaster/worker/executor/executortest"
)

const natsAddr = "127.0.0.1:4222"

func unique(t *testing.T) string {
	t.Helper()
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

func liveConn(t *testing.T) *protocol.ConnectionSpec {
	t.Helper()
	return &protocol.ConnectionSpec{Name: "nats-test", Kind: protocol.ConnNATS, Address: executortest.Service(t, "NATS", natsAddr)}
}

func def(spec *protocol.NATSSpec, params map[string]string) *protocol.TaskDef {
	spec.Connection = "nats-test"
	return &protocol.TaskDef{ID: "t1", Title: "nats", Type: protocol.TaskNATS, Timeout: protocol.Duration(5 * time.Second),
		Schedule: protocol.Schedule{Kind: protocol.ScheduleInterval, Every: protocol.Duration(time.Hour)}, Params: params, NATS: spec}
}

// observer is the test's own connection to the server.
func observer(t *testing.T) *nats.Conn {
	t.Helper()
	nc, err := nats.Connect("nats://"+natsAddr, nats.Timeout(2*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	return nc
}

func newExec(t *testing.T) *Executor {
	t.Helper()
	ex := New(nil)
	t.Cleanup(func() { _ = ex.Close() })
	return ex
}

func TestExecutorNATSPublishDeliversOncePerRun(t *testing.T) {
	t.Parallel()
	conn := liveConn(t)
	conn.User, conn.Secret = "worker", "pw-"+unique(t) // the server has no auth: accepted, never shown
	sub := observer(t)
	prefix := "sm.test." + unique(t)
	s, err := sub.SubscribeSync(prefix + ".orders")
	if err != nil {
		t.Fatal(err)
	}
	if err := sub.Flush(); err != nil {
		t.Fatal(err)
	}
	ex := newExec(t)
	const runs = 3
	for i := range runs {
		d := def(&protocol.NATSSpec{Subject: prefix + ".{{KIND}}", Payload: `{"order":"{{ORDER}}"}`,
			Headers: map[string]string{"X-Order": "{{ORDER}}", "X-Fixed": "yes"}},
			map[string]string{"KIND": "orders", "ORDER": fmt.Sprint(i)})
		res, out := executortest.Run(t, ex, d, conn, 5*time.Second)
		want := fmt.Sprintf("published %d bytes to %s.orders", len(fmt.Sprintf(`{"order":"%d"}`, i)), prefix)
		if res.Result != protocol.ResultSuccess || out != want {
			t.Fatalf("run %d: %s %q, want success %q", i, res.Result, out, want)
		}
		executortest.NoSecret(t, out, conn.Secret)
		if n := ex.pool.Len(); n != 1 {
			t.Fatalf("pool holds %d clients after run %d, want 1", n, i)
		}
	}
	// The runs flushed: the server had every message before they ended, so
	// after a round trip of the subscriber's own they are all here.
	if err := sub.Flush(); err != nil {
		t.Fatal(err)
	}
	if n, _, _ := s.Pending(); n != runs {
		t.Fatalf("subscriber has %d messages, want %d (one per run)", n, runs)
	}
	for i := range runs {
		m, err := s.NextMsg(time.Second)
		if err != nil {
			t.Fatal(err)
		}
		if string(m.Data) != fmt.Sprintf(`{"order":"%d"}`, i) || m.Header.Get("X-Order") != fmt.Sprint(i) || m.Header.Get("X-Fixed") != "yes" {
			t.Fatalf("message %d = %q headers %v", i, m.Data, m.Header)
		}
	}
	cl, release, err := ex.pool.Get(context.Background(), conn)
	if err != nil {
		t.Fatal(err)
	}
	nc := cl.nc
	release()
	if err := ex.Close(); err != nil {
		t.Fatal(err)
	}
	if !nc.IsClosed() {
		t.Fatal("Close left the pooled connection open")
	}
}

func TestExecutorNATSJetStreamStoresOncePerRun(t *testing.T) {
	t.Parallel()
	conn := liveConn(t)
	nc := observer(t)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	id := unique(t)
	subject, stream := "sm.js."+id, "SMTEST_"+strings.ToUpper(id)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	st, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: stream, Subjects: []string{subject}, Storage: jetstream.MemoryStorage})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = js.DeleteStream(context.Background(), stream) })
	ex := newExec(t)
	const runs = 3
	for i := range runs {
		d := def(&protocol.NATSSpec{Mode: protocol.NATSJetStream, Subject: subject, Payload: "run {{N}}", Headers: map[string]string{"X-Run": "{{N}}"}},
			map[string]string{"N": fmt.Sprint(i)})
		res, out := executortest.Run(t, ex, d, conn, 5*time.Second)
		want := fmt.Sprintf("stored 5 bytes from %s in stream %s as sequence %d", subject, stream, i+1)
		if res.Result != protocol.ResultSuccess || out != want {
			t.Fatalf("run %d: %s %q, want success %q", i, res.Result, out, want)
		}
	}
	info, err := st.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if info.State.Msgs != runs {
		t.Fatalf("stream holds %d messages, want %d", info.State.Msgs, runs)
	}
	m, err := st.GetMsg(ctx, 2)
	if err != nil {
		t.Fatal(err)
	}
	if string(m.Data) != "run 1" || m.Header.Get("X-Run") != "1" {
		t.Fatalf("stored message 2 = %q %v", m.Data, m.Header)
	}

	// The same message id twice: the stream says the second is a duplicate.
	dup := def(&protocol.NATSSpec{Mode: protocol.NATSJetStream, Subject: subject, Payload: "once", Headers: map[string]string{"Nats-Msg-Id": "id-" + id}}, nil)
	if res, out := executortest.Run(t, ex, dup, conn, 5*time.Second); res.Result != protocol.ResultSuccess || strings.Contains(out, "duplicate") {
		t.Fatalf("first of a message id: %s %q", res.Result, out)
	}
	if res, out := executortest.Run(t, ex, dup, conn, 5*time.Second); res.Result != protocol.ResultSuccess || !strings.Contains(out, "as sequence 4 (duplicate") {
		t.Fatalf("second of a message id: %s %q, want a duplicate of sequence 4", res.Result, out)
	}

	// A subject no stream stores.
	none := def(&protocol.NATSSpec{Mode: protocol.NATSJetStream, Subject: "sm.nostream." + id}, nil)
	res, out := executortest.Run(t, ex, none, conn, 5*time.Second)
	if res.Result != protocol.ResultFailed || out != "jetstream publish to sm.nostream."+id+": no stream stores subject sm.nostream."+id+" (nats: no response from stream)" {
		t.Fatalf("no stream: %s %q", res.Result, out)
	}
}

func TestExecutorNATSRequestReplyIsTheOutput(t *testing.T) {
	t.Parallel()
	conn := liveConn(t)
	nc := observer(t)
	subject := "sm.req." + unique(t)
	sub, err := nc.Subscribe(subject, func(m *nats.Msg) {
		_ = m.Respond([]byte("pong " + string(m.Data) + " " + m.Header.Get("X-Who")))
	})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = sub.Unsubscribe() }()
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	ex := newExec(t)
	for i := range 3 {
		d := def(&protocol.NATSSpec{Mode: protocol.NATSRequest, Subject: subject, Payload: "ping {{I}}", Headers: map[string]string{"X-Who": "w{{I}}"}},
			map[string]string{"I": fmt.Sprint(i)})
		res, out := executortest.Run(t, ex, d, conn, 5*time.Second)
		if want := fmt.Sprintf("pong ping %d w%d", i, i); res.Result != protocol.ResultSuccess || out != want {
			t.Fatalf("run %d: %s %q, want %q", i, res.Result, out, want)
		}
	}
	if n := ex.pool.Len(); n != 1 {
		t.Fatalf("pool holds %d clients, want 1", n)
	}
}

func TestExecutorNATSRequestWithoutResponderFails(t *testing.T) {
	t.Parallel()
	conn := liveConn(t)
	subject := "sm.nobody." + unique(t)
	ex := newExec(t)
	start := time.Now()
	res, out := executortest.Run(t, ex, def(&protocol.NATSSpec{Mode: protocol.NATSRequest, Subject: subject}, nil), conn, 5*time.Second)
	if res.Result != protocol.ResultFailed || out != "no responders on subject "+subject {
		t.Fatalf("%s %q, want failed: no responders", res.Result, out)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("took %s: no responders is known at once", d)
	}
}

func TestExecutorNATSRequestUnansweredTimesOut(t *testing.T) {
	t.Parallel()
	conn := liveConn(t)
	nc := observer(t)
	subject := "sm.silent." + unique(t)
	s, err := nc.SubscribeSync(subject) // there, so not "no responders", but never answers
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = s.Unsubscribe() }()
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	ex := newExec(t)
	start := time.Now()
	res, out := executortest.Run(t, ex, def(&protocol.NATSSpec{Mode: protocol.NATSRequest, Subject: subject}, nil), conn, 300*time.Millisecond)
	if res.Result != protocol.ResultTimeout || out != "no reply on "+subject+": timed out after 300ms" {
		t.Fatalf("%s %q, want a timeout", res.Result, out)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("took %s for a 300ms timeout", d)
	}
}

func TestExecutorNATSDownServerFailsQuickly(t *testing.T) {
	t.Parallel()
	addr := executortest.ClosedPort(t)
	conn := &protocol.ConnectionSpec{Name: "nats-test", Kind: protocol.ConnNATS, Address: addr, Secret: "tok-" + unique(t)}
	ex := newExec(t)
	start := time.Now()
	res, out := executortest.Run(t, ex, def(&protocol.NATSSpec{Subject: "a.b"}, nil), conn, 5*time.Second)
	if res.Result != protocol.ResultFailed || out != "connect to "+addr+": connection refused" {
		t.Fatalf("%s %q, want failed: connection refused", res.Result, out)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("took %s against a closed port", d)
	}
	executortest.NoSecret(t, out, conn.Secret)
	if n := ex.pool.Len(); n != 0 {
		t.Fatalf("pool keeps %d clients that could not connect", n)
	}
	// Two servers, both down: both reasons.
	addr2 := executortest.ClosedPort(t)
	conn.Address = addr + "," + addr2
	res, out = executortest.Run(t, ex, def(&protocol.NATSSpec{Subject: "a.b"}, nil), conn, 5*time.Second)
	if res.Result != protocol.ResultFailed || !strings.Contains(out, addr+": connection refused") || !strings.Contains(out, addr2+": connection refused") {
		t.Fatalf("two down servers: %s %q", res.Result, out)
	}
	if _, err := ex.Test(context.Background(), conn); err == nil || !strings.Contains(err.Error(), "connection refused") {
		t.Fatalf("Test on a down server = %v, want connection refused", err)
	} else {
		executortest.NoSecret(t, err.Error(), conn.Secret)
	}
}

// A server that accepts the connection but never speaks: the connect ends
// with the run's timeout, not nats' own.
func TestExecutorNATSSilentServerTimesOut(t *testing.T) {
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
	conn := &protocol.ConnectionSpec{Name: "nats-test", Kind: protocol.ConnNATS, Address: l.Addr().String()}
	start := time.Now()
	res, out := executortest.Run(t, ex, def(&protocol.NATSSpec{Subject: "a.b"}, nil), conn, 300*time.Millisecond)
	if res.Result != protocol.ResultTimeout || out != "connect: timed out after 300ms" {
		t.Fatalf("%s %q, want a timeout", res.Result, out)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("took %s for a 300ms timeout", d)
	}
}

func TestExecutorNATSReplacesAClosedConnection(t *testing.T) {
	t.Parallel()
	conn := liveConn(t)
	ex := newExec(t)
	d := def(&protocol.NATSSpec{Subject: "sm.replace." + unique(t)}, nil)
	if res, out := executortest.Run(t, ex, d, conn, 5*time.Second); res.Result != protocol.ResultSuccess {
		t.Fatalf("%s %q", res.Result, out)
	}
	cl, release, err := ex.pool.Get(context.Background(), conn)
	if err != nil {
		t.Fatal(err)
	}
	old := cl.nc
	release()
	old.Close() // as when the server went away
	if res, out := executortest.Run(t, ex, d, conn, 5*time.Second); res.Result != protocol.ResultSuccess {
		t.Fatalf("after the connection closed: %s %q", res.Result, out)
	}
	if cl.nc == old || cl.nc.IsClosed() || ex.pool.Len() != 1 {
		t.Fatalf("closed connection not replaced in place (pool len %d)", ex.pool.Len())
	}
}

func TestExecutorNATSTest(t *testing.T) {
	t.Parallel()
	conn := liveConn(t)
	conn.Secret = "tok-" + unique(t)
	msg, err := newExec(t).Test(context.Background(), conn)
	if err != nil {
		t.Fatal(err)
	}
	t.Log(msg)
	if !strings.HasPrefix(msg, "NATS server 2.") || !strings.Contains(msg, "JetStream enabled") {
		t.Fatalf("Test = %q, want the server's version and JetStream enabled", msg)
	}
	executortest.NoSecret(t, msg, conn.Secret)
}

func TestExecutorNATSBadExpandedSubjectFails(t *testing.T) {
	t.Parallel()
	ex := newExec(t)
	conn := &protocol.ConnectionSpec{Name: "nats-test", Kind: protocol.ConnNATS, Address: "127.0.0.1:1"}
	res, out := executortest.Run(t, ex, def(&protocol.NATSSpec{Subject: "a.{{X}}"}, map[string]string{"X": "b c"}), conn, time.Second)
	if res.Result != protocol.ResultFailed || !strings.Contains(out, `subject "a.b c"`) {
		t.Fatalf("%s %q", res.Result, out)
	}
	res, out = executortest.Run(t, ex, def(&protocol.NATSSpec{Subject: "a.b"}, nil), nil, time.Second)
	if res.Result != protocol.ResultFailed || !strings.Contains(out, "connection is not defined") {
		t.Fatalf("no connection: %s %q", res.Result, out)
	}
}
