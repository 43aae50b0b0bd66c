package mqtttask

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	mqtt "github.com/eclipse/paho.mqtt.golang"

	"github.com/schedulemaster-go/schedulemaster/protocol"
	"github.com/schedulemaster-go/schedulemaster/worker/executor"
	"github.com/schedulemaster-go/schedulemaster/worker/executor/executortest"
)

const (
	brokerAddr = "127.0.0.1:1883"
	// testSecret is the connection's password: Mosquitto here is
	// anonymous and ignores it, so it must only never show.
	testSecret = "mqtt-S3cret-4711"
)

var versions = []string{"5", "3.1.1"}

func unique(t *testing.T) string {
	t.Helper()
	var b [6]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

func connTo(addr, version string) *protocol.ConnectionSpec {
	return &protocol.ConnectionSpec{Name: "broker", Kind: protocol.ConnMQTT, Address: addr, User: "sm-user", Secret: testSecret,
		Options: map[string]string{"protocol_version": version}}
}

func taskDef(spec protocol.MQTTSpec, params map[string]string) *protocol.TaskDef {
	spec.Connection = "broker"
	return &protocol.TaskDef{ID: "t1", Title: "mqtt", Type: protocol.TaskMQTT, Params: params,
		Timeout:  protocol.Duration(10 * time.Second),
		Schedule: protocol.Schedule{Kind: protocol.ScheduleInterval, Every: protocol.Duration(time.Hour)},
		MQTT:     &spec}
}

func newExec(t *testing.T) *Executor {
	t.Helper()
	e := New(nil)
	t.Cleanup(func() { _ = e.Close() })
	return e
}

// got is one message a test subscriber received.
type got struct {
	topic, payload string
	qos            byte
	retained       bool
}

// subscriber is a 3.1.1 client of the test that collects what arrives on
// its topic filter.
type subscriber struct {
	c     mqtt.Client
	topic string
	mu    sync.Mutex
	msgs  []got
}

func subscribe(t *testing.T, topic string) *subscriber {
	t.Helper()
	s := &subscriber{topic: topic}
	opts := mqtt.NewClientOptions().AddBroker("tcp://" + brokerAddr).SetClientID("smtest" + unique(t)).
		SetCleanSession(true).SetAutoReconnect(false).SetProtocolVersion(4).SetOrderMatters(true)
	s.c = mqtt.NewClient(opts)
	if tok := s.c.Connect(); !tok.WaitTimeout(5*time.Second) || tok.Error() != nil {
		t.Fatalf("test subscriber connect: %v", tok.Error())
	}
	t.Cleanup(func() { s.c.Disconnect(100) })
	tok := s.c.Subscribe(topic, 2, func(_ mqtt.Client, m mqtt.Message) {
		s.mu.Lock()
		defer s.mu.Unlock()
		s.msgs = append(s.msgs, got{topic: m.Topic(), payload: string(m.Payload()), qos: m.Qos(), retained: m.Retained()})
	})
	if !tok.WaitTimeout(5*time.Second) || tok.Error() != nil {
		t.Fatalf("test subscribe: %v", tok.Error())
	}
	return s
}

func (s *subscriber) all() []got {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.msgs)
}

// upTo waits for n messages, or fails.
func (s *subscriber) upTo(t *testing.T, n int) []got {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		if m := s.all(); len(m) >= n {
			return m
		}
		if time.Now().After(deadline) {
			t.Fatalf("received %d messages, want %d: %+v", len(s.all()), n, s.all())
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// drained publishes a marker to topic and returns what arrived before it:
// the broker forwards in order, so a copy sent before the marker would be
// there (no bare sleep to see that nothing more comes).
func (s *subscriber) drained(t *testing.T, topic string) []got {
	t.Helper()
	marker := "marker-" + unique(t)
	if tok := s.c.Publish(topic, 1, false, marker); !tok.WaitTimeout(5*time.Second) || tok.Error() != nil {
		t.Fatalf("marker publish: %v", tok.Error())
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		m := s.all()
		if i := slices.IndexFunc(m, func(g got) bool { return g.payload == marker }); i >= 0 {
			return m[:i]
		}
		if time.Now().After(deadline) {
			t.Fatalf("the marker never arrived; got %+v", m)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestExecutorMQTTPublishDeliversOncePerRun(t *testing.T) {
	executortest.Service(t, "Mosquitto", brokerAddr)
	t.Parallel()
	for _, v := range versions {
		for _, qos := range []int{1, 2} {
			t.Run(fmt.Sprintf("v%s_qos%d", v, qos), func(t *testing.T) {
				t.Parallel()
				base := "smtest/" + unique(t)
				sub := subscribe(t, base+"/#")
				e := newExec(t)
				conn := connTo(brokerAddr, v)
				const runs = 3
				var want []string
				for i := range runs {
					params := map[string]string{"DEVICE": "pump-7", "N": fmt.Sprint(i)}
					def := taskDef(protocol.MQTTSpec{Topic: base + "/{{DEVICE}}/reset", Payload: `{"device":"{{DEVICE}}","n":{{N}}}`, QoS: qos}, params)
					res, out := executortest.Run(t, e, def, conn, 5*time.Second)
					payload := fmt.Sprintf(`{"device":"pump-7","n":%d}`, i)
					want = append(want, payload)
					line := fmt.Sprintf("published %d bytes to %s/pump-7/reset (QoS %d): %s", len(payload), base, qos, map[int]string{1: "acknowledged", 2: "completed"}[qos])
					if res.Result != protocol.ResultSuccess || !strings.Contains(out, line) {
						t.Fatalf("run %d = %s %q, want success with %q", i, res.Result, out, line)
					}
					executortest.NoSecret(t, out, testSecret)
					if n := e.pool.Len(); n != 1 {
						t.Fatalf("pool holds %d clients after run %d, want 1 (reused)", n, i)
					}
				}
				sub.upTo(t, runs)
				msgs := sub.drained(t, base+"/marker")
				var payloads []string
				for _, m := range msgs {
					if m.topic != base+"/pump-7/reset" || int(m.qos) != qos || m.retained {
						t.Fatalf("message %+v: want topic %s/pump-7/reset, QoS %d, not retained", m, base, qos)
					}
					payloads = append(payloads, m.payload)
				}
				if !slices.Equal(payloads, want) {
					t.Fatalf("subscriber saw %q, want each run's message exactly once: %q", payloads, want)
				}
				if err := e.Close(); err != nil {
					t.Fatal(err)
				}
				if n := e.pool.Len(); n != 0 {
					t.Fatalf("pool holds %d clients after Close", n)
				}
				def := taskDef(protocol.MQTTSpec{Topic: base + "/x", QoS: qos}, nil)
				if res, out := executortest.Run(t, e, def, conn, 5*time.Second); res.Result != protocol.ResultFailed {
					t.Fatalf("run after Close = %s %q, want failed", res.Result, out)
				}
			})
		}
	}
}

func TestExecutorMQTTQoS0IsSentAndDelivered(t *testing.T) {
	executortest.Service(t, "Mosquitto", brokerAddr)
	t.Parallel()
	for _, v := range versions {
		t.Run("v"+v, func(t *testing.T) {
			t.Parallel()
			topic := "smtest/" + unique(t) + "/q0"
			sub := subscribe(t, topic)
			e := newExec(t)
			res, out := executortest.Run(t, e, taskDef(protocol.MQTTSpec{Topic: topic, Payload: "hello"}, nil), connTo(brokerAddr, v), 5*time.Second)
			if res.Result != protocol.ResultSuccess || !strings.Contains(out, "published 5 bytes to "+topic+" (QoS 0): sent") {
				t.Fatalf("run = %s %q", res.Result, out)
			}
			if m := sub.upTo(t, 1); m[0].payload != "hello" {
				t.Fatalf("got %+v", m)
			}
		})
	}
}

func TestExecutorMQTTRetainedMessageReachesANewSubscriber(t *testing.T) {
	executortest.Service(t, "Mosquitto", brokerAddr)
	t.Parallel()
	for _, v := range versions {
		t.Run("v"+v, func(t *testing.T) {
			t.Parallel()
			topic := "smtest/" + unique(t) + "/state"
			e := newExec(t)
			conn := connTo(brokerAddr, v)
			t.Cleanup(func() {
				// An empty retained payload clears the retained message
				// (Mosquitto here persists it).
				res, out := executortest.Run(t, e, taskDef(protocol.MQTTSpec{Topic: topic, QoS: 1, Retain: true}, nil), conn, 5*time.Second)
				if res.Result != protocol.ResultSuccess {
					t.Errorf("clearing the retained message: %s %q", res.Result, out)
				}
			})
			def := taskDef(protocol.MQTTSpec{Topic: topic, Payload: "on {{WHO}}", QoS: 2, Retain: true}, map[string]string{"WHO": "ops"})
			res, out := executortest.Run(t, e, def, conn, 5*time.Second)
			if res.Result != protocol.ResultSuccess || !strings.Contains(out, "published 6 bytes to "+topic+" (QoS 2, retain): completed") {
				t.Fatalf("run = %s %q", res.Result, out)
			}
			// Subscribing after the publish: only the retained copy can come.
			sub := subscribe(t, topic)
			m := sub.upTo(t, 1)
			if m[0].payload != "on ops" || !m[0].retained {
				t.Fatalf("new subscriber got %+v, want the retained message", m[0])
			}
		})
	}
}

func TestExecutorMQTTDownServerFailsQuicklyWithoutTheSecret(t *testing.T) {
	t.Parallel()
	for _, v := range versions {
		t.Run("v"+v, func(t *testing.T) {
			t.Parallel()
			addr := executortest.ClosedPort(t)
			e := newExec(t)
			start := time.Now()
			res, out := executortest.Run(t, e, taskDef(protocol.MQTTSpec{Topic: "smtest/down", QoS: 1}, nil), connTo(addr, v), 5*time.Second)
			if res.Result != protocol.ResultFailed || !strings.Contains(out, "connect to "+addr+": connection refused") {
				t.Fatalf("run = %s %q, want failed: connection refused", res.Result, out)
			}
			if d := time.Since(start); d > 2*time.Second {
				t.Fatalf("a down server took %s to fail", d)
			}
			executortest.NoSecret(t, out, testSecret)
			if n := e.pool.Len(); n != 0 {
				t.Fatalf("a client that could not connect was pooled (%d)", n)
			}
			_, err := e.Test(context.Background(), connTo(addr, v))
			if err == nil || !strings.Contains(err.Error(), "connection refused") {
				t.Fatalf("Test of a down server = %v", err)
			}
			executortest.NoSecret(t, err.Error(), testSecret)
		})
	}
}

// silentServer accepts connections and never answers: no CONNACK comes.
func silentServer(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var conns []net.Conn
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		_ = l.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			_ = c.Close()
		}
	})
	return l.Addr().String()
}

func TestExecutorMQTTSilentBrokerTimesOut(t *testing.T) {
	t.Parallel()
	for _, v := range versions {
		t.Run("v"+v, func(t *testing.T) {
			t.Parallel()
			addr := silentServer(t)
			e := newExec(t)
			start := time.Now()
			res, out := executortest.Run(t, e, taskDef(protocol.MQTTSpec{Topic: "smtest/silent", QoS: 2}, nil), connTo(addr, v), 300*time.Millisecond)
			if res.Result != protocol.ResultTimeout || !strings.Contains(out, "timed out") {
				t.Fatalf("run = %s %q, want timeout", res.Result, out)
			}
			if d := time.Since(start); d > 2*time.Second {
				t.Fatalf("the timeout took %s", d)
			}
			executortest.NoSecret(t, out, testSecret)
		})
	}
}

func TestExecutorMQTTReplacesALostConnection(t *testing.T) {
	executortest.Service(t, "Mosquitto", brokerAddr)
	t.Parallel()
	for _, v := range versions {
		t.Run("v"+v, func(t *testing.T) {
			t.Parallel()
			topic := "smtest/" + unique(t) + "/again"
			sub := subscribe(t, topic)
			e := newExec(t)
			conn := connTo(brokerAddr, v)
			def := taskDef(protocol.MQTTSpec{Topic: topic, Payload: "{{N}}", QoS: 1}, map[string]string{"N": "1"})
			if res, out := executortest.Run(t, e, def, conn, 5*time.Second); res.Result != protocol.ResultSuccess {
				t.Fatalf("first run = %s %q", res.Result, out)
			}
			l, release, err := e.pool.Get(context.Background(), conn)
			if err != nil {
				t.Fatal(err)
			}
			s := l.live()
			release()
			// Take the client's id over with another client: the broker
			// drops the executor's connection, as a broker restart would.
			var id string
			switch s := s.(type) {
			case *v5Session:
				id = s.c.ClientID()
			case *v311Session:
				r := s.c.OptionsReader()
				id = r.ClientID()
			}
			thief := mqtt.NewClient(mqtt.NewClientOptions().AddBroker("tcp://" + brokerAddr).SetClientID(id).SetCleanSession(true).SetAutoReconnect(false))
			if tok := thief.Connect(); !tok.WaitTimeout(5*time.Second) || tok.Error() != nil {
				t.Fatalf("take over %s: %v", id, tok.Error())
			}
			defer thief.Disconnect(0)
			deadline := time.Now().Add(5 * time.Second)
			for s.alive() {
				if time.Now().After(deadline) {
					t.Fatal("the client did not notice the broker dropped its connection")
				}
				time.Sleep(5 * time.Millisecond)
			}
			def.Params["N"] = "2"
			if res, out := executortest.Run(t, e, def, conn, 5*time.Second); res.Result != protocol.ResultSuccess {
				t.Fatalf("run after the connection was lost = %s %q, want success on a new connection", res.Result, out)
			}
			if n := e.pool.Len(); n != 1 {
				t.Fatalf("pool holds %d clients, want the one link", n)
			}
			msgs := sub.upTo(t, 2)
			if msgs[0].payload != "1" || msgs[1].payload != "2" {
				t.Fatalf("got %+v", msgs)
			}
		})
	}
}

func TestExecutorMQTTTestSaysWhatTheBrokerAnswered(t *testing.T) {
	executortest.Service(t, "Mosquitto", brokerAddr)
	t.Parallel()
	e := newExec(t)
	for v, want := range map[string]string{"5": "MQTT 5: connected", "3.1.1": "MQTT 3.1.1: connected"} {
		msg, err := e.Test(context.Background(), connTo(brokerAddr, v))
		if err != nil || !strings.HasPrefix(msg, want) {
			t.Fatalf("Test(%s) = %q, %v; want %q", v, msg, err, want)
		}
		executortest.NoSecret(t, msg, testSecret)
		t.Logf("Test(%s): %s", v, msg)
	}
}

func TestExecutorMQTTRefusesWhatWouldBreakTheSharedConnection(t *testing.T) {
	t.Parallel()
	e := newExec(t)
	conn := connTo(executortest.ClosedPort(t), "5")
	// A param that puts a wildcard in the topic: refused before connecting.
	def := taskDef(protocol.MQTTSpec{Topic: "smtest/{{X}}", QoS: 1}, map[string]string{"X": "#"})
	if res, out := executortest.Run(t, e, def, conn, 5*time.Second); res.Result != protocol.ResultFailed || !strings.Contains(out, "wildcard") {
		t.Fatalf("wildcard topic = %s %q", res.Result, out)
	}
	def = taskDef(protocol.MQTTSpec{Topic: "{{X}}", QoS: 1}, map[string]string{"X": ""})
	if res, out := executortest.Run(t, e, def, conn, 5*time.Second); res.Result != protocol.ResultFailed || !strings.Contains(out, "empty") {
		t.Fatalf("empty topic = %s %q", res.Result, out)
	}
	bad := connTo(conn.Address, "4")
	if res, out := executortest.Run(t, e, taskDef(protocol.MQTTSpec{Topic: "a", QoS: 1}, nil), bad, 5*time.Second); res.Result != protocol.ResultFailed || !strings.Contains(out, "protocol_version") {
		t.Fatalf("bad protocol version = %s %q", res.Result, out)
	}
	task := &executor.Task{Def: taskDef(protocol.MQTTSpec{Topic: "a", QoS: 1}, nil)}
	if res := e.Run(context.Background(), task, &executortest.Output{}); res.Result != protocol.ResultFailed {
		t.Fatalf("no connection = %s", res.Result)
	}
}
