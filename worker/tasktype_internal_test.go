package worker

import (
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/schedulemaster-go/schedulemaster/protocol"
	"github.com/schedulemaster-go/schedulemaster/store/storetest/testutil"
	"github.com/schedulemaster-go/schedulemaster/worker/executor/executortest"
)

// TestTaskTypesThroughTheRunner: a task of each type beyond HTTP and
// shell, with 2 retries, sent to a server that is down, runs through the
// real runner as 3 failed attempts, each saying precisely why and none
// showing the connection's secret; a runner whose worker does not allow
// the type refuses the task when it is sent (ErrTypeRefused, naming the
// flag) and fails a run of it saying so.
func TestTaskTypesThroughTheRunner(t *testing.T) {
	t.Parallel()
	const secret = "runner-s3cret-value"
	cases := []struct {
		typ  string
		def  func(d *protocol.TaskDef)
		conn protocol.ConnectionSpec
		want []string // in every attempt's output; {addr} is the server's address
	}{
		{protocol.TaskNATS, func(d *protocol.TaskDef) {
			d.NATS = &protocol.NATSSpec{Connection: "c", Subject: "orders.close", Payload: "x"}
		}, protocol.ConnectionSpec{Kind: protocol.ConnNATS}, []string{"connect to {addr}: connection refused"}},
		{protocol.TaskAMQP, func(d *protocol.TaskDef) {
			d.AMQP = &protocol.AMQPSpec{Connection: "c", Exchange: "orders", RoutingKey: "close", Payload: "x"}
		}, protocol.ConnectionSpec{Kind: protocol.ConnAMQP, User: "worker"}, []string{"connect to {addr}: connection refused"}},
		{protocol.TaskMQTT, func(d *protocol.TaskDef) {
			d.MQTT = &protocol.MQTTSpec{Connection: "c", Topic: "smtest/worker", Payload: "x", QoS: 1}
		}, protocol.ConnectionSpec{Kind: protocol.ConnMQTT, User: "u", Options: map[string]string{"protocol_version": "3.1.1"}},
			[]string{"connect to {addr}: connection refused"}},
		{protocol.TaskRedis, func(d *protocol.TaskDef) {
			d.Redis = &protocol.RedisSpec{Connection: "c", Command: protocol.RedisLPush, Key: "smtest:worker", Payload: "x"}
		}, protocol.ConnectionSpec{Kind: protocol.ConnRedis, User: "u"}, []string{"LPUSH smtest:worker: connect to {addr}: connection refused"}},
		{protocol.TaskKafka, func(d *protocol.TaskDef) {
			d.Kafka = &protocol.KafkaSpec{Connection: "c", Topic: "orders", Payload: "x"}
		}, protocol.ConnectionSpec{Kind: protocol.ConnKafka, User: "alice", Options: map[string]string{"sasl": "plain"}},
			[]string{"no broker answered", "connection refused"}},
		{protocol.TaskSQL, func(d *protocol.TaskDef) {
			d.SQL = &protocol.SQLSpec{Connection: "c", Statement: "UPDATE t SET v = 1"}
		}, protocol.ConnectionSpec{Kind: protocol.ConnPostgres, Database: "app", User: "app"},
			[]string{"connect to postgres {addr}", "connection refused"}},
		{protocol.TaskGRPC, func(d *protocol.TaskDef) {
			d.GRPC = &protocol.GRPCSpec{Connection: "c", Method: "grpc.health.v1.Health/Check", Request: `{}`}
		}, protocol.ConnectionSpec{Kind: protocol.ConnGRPC}, []string{"code = Unavailable", "connection refused"}},
	}
	for _, c := range cases {
		t.Run(c.typ, func(t *testing.T) {
			t.Parallel()
			addr := executortest.ClosedPort(t)
			conn := c.conn
			conn.Name, conn.Address, conn.Secret = "c", addr, secret
			spec := protocol.TaskSpec{TaskDef: protocol.TaskDef{ID: "t-" + c.typ, Title: c.typ, Type: c.typ, Retries: 2,
				Timeout:  protocol.Duration(5 * time.Second),
				Schedule: protocol.Schedule{Kind: protocol.ScheduleInterval, Every: protocol.Duration(time.Hour)}},
				Executors: 1, Connection: &conn}
			c.def(&spec.TaskDef)

			refusing, refused := newLiveRunner(t, time.Hour) // HTTP and shell only
			if _, err := refusing.startSpec(spec); !errors.Is(err, ErrTypeRefused) || !strings.Contains(err.Error(), "--allow-types "+c.typ) {
				t.Fatalf("startSpec on a worker without %s: %v, want ErrTypeRefused naming the flag", c.typ, err)
			}
			refusing.runOnce(spec, nil)
			waitFor(t, "the refused run's report", func() bool {
				for _, rep := range refused.all() {
					if rep.Result == protocol.ResultFailed {
						if !strings.Contains(rep.Output, "does not run "+c.typ+" tasks") {
							t.Fatalf("refused run's output %q", rep.Output)
						}
						return true
					}
				}
				return false
			})

			execs, err := newRegistry(http.DefaultClient, false, []string{c.typ}, testutil.Discard())
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = execs.Close() })
			r, sink := newLiveRunner(t, time.Hour)
			r.execs = execs
			r.runOnce(spec, nil)
			var finals []protocol.RunReport
			waitFor(t, "3 failed attempts", func() bool {
				finals = finals[:0]
				for _, rep := range sink.all() {
					if rep.Result != protocol.ResultRunning {
						finals = append(finals, rep)
					}
				}
				return len(finals) >= 3
			})
			for i, rep := range finals[:3] {
				if rep.Result != protocol.ResultFailed || rep.Attempt != i+1 {
					t.Fatalf("attempt %d: %s attempt=%d %q", i+1, rep.Result, rep.Attempt, rep.Output)
				}
				for _, w := range c.want {
					if w = strings.ReplaceAll(w, "{addr}", addr); !strings.Contains(rep.Output, w) {
						t.Fatalf("attempt %d output %q lacks %q", i+1, rep.Output, w)
					}
				}
				executortest.NoSecret(t, rep.Output, secret)
			}
		})
	}
}
