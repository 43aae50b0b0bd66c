package kafkatask_test

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/schedulemaster-go/schedulemaster/protocol"
	"github.com/schedulemaster-go/schedulemaster/worker/executor"
	"github.com/schedulemaster-go/schedulemaster/worker/executor/executortest"
	"github.com/schedulemaster-go/schedulemaster/worker/tasktypes/kafkatask"
)

// cluster starts an in-process Kafka cluster (franz-go's kfake): topics
// are not created on first use.
func cluster(t *testing.T, opts ...kfake.Opt) *kfake.Cluster {
	t.Helper()
	c, err := kfake.NewCluster(opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

func newExec(t *testing.T) *kafkatask.Executor {
	t.Helper()
	ex := kafkatask.New(slog.New(slog.DiscardHandler))
	t.Cleanup(func() { _ = ex.Close() })
	return ex
}

func conn(c *kfake.Cluster) *protocol.ConnectionSpec {
	return &protocol.ConnectionSpec{Name: "k", Kind: protocol.ConnKafka, Address: strings.Join(c.ListenAddrs(), ",")}
}

func def(spec *protocol.KafkaSpec, params map[string]string) *protocol.TaskDef {
	spec.Connection = "k"
	return &protocol.TaskDef{ID: "t1", Title: "kafka", Type: protocol.TaskKafka, Kafka: spec, Params: params,
		Timeout:  protocol.Duration(10 * time.Second),
		Schedule: protocol.Schedule{Kind: protocol.ScheduleInterval, Every: protocol.Duration(time.Hour)}}
}

// consume reads topic from its start until n records came, then for a
// short while more, so that a record too many shows.
func consume(t *testing.T, c *kfake.Cluster, topic string, n int, opts ...kgo.Opt) []*kgo.Record {
	t.Helper()
	cl, err := kgo.NewClient(append(opts, kgo.SeedBrokers(c.ListenAddrs()...), kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))...)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	var got []*kgo.Record
	deadline := time.Now().Add(10 * time.Second)
	for len(got) < n && time.Now().Before(deadline) {
		ctx, cancel := context.WithDeadline(context.Background(), deadline)
		fs := cl.PollFetches(ctx)
		cancel()
		got = append(got, fs.Records()...)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	got = append(got, cl.PollFetches(ctx).Records()...)
	cancel()
	return got
}

func TestExecutorKafkaProduceDeliversOncePerRunWithAcksAll(t *testing.T) {
	t.Parallel()
	const topic = "orders"
	c := cluster(t, kfake.NumBrokers(3), kfake.SeedTopics(3, topic))
	var mu sync.Mutex
	var acks []int16
	c.ControlKey(int16(kmsg.Produce), func(req kmsg.Request) (kmsg.Response, error, bool) {
		mu.Lock()
		acks = append(acks, req.(*kmsg.ProduceRequest).Acks)
		mu.Unlock()
		return nil, nil, false // observed only: the cluster handles it
	})
	ex := newExec(t)
	cn := conn(c)
	const runs = 3
	for i := range runs {
		d := def(&protocol.KafkaSpec{Topic: topic, Key: "order-{{ID}}", Payload: `{"id":"{{ID}}","n":` + string(rune('0'+i)) + `}`,
			Headers: map[string]string{"source": "schedulemaster", "trace": "t-{{ID}}"}}, map[string]string{"ID": "42"})
		res, out := executortest.Run(t, ex, d, cn, 10*time.Second)
		if res.Result != protocol.ResultSuccess {
			t.Fatalf("run %d: %s %q", i, res.Result, out)
		}
		if !strings.HasPrefix(out, "produced 17 bytes to orders partition ") || !strings.Contains(out, " offset ") {
			t.Fatalf("run %d output %q", i, out)
		}
		if n := ex.Len(); n != 1 {
			t.Fatalf("pool holds %d clients after run %d, want 1 (reused)", n, i)
		}
	}
	got := consume(t, c, topic, runs)
	if len(got) != runs {
		t.Fatalf("consumer saw %d records, want exactly %d (one per run)", len(got), runs)
	}
	for _, r := range got {
		if string(r.Key) != "order-42" || !strings.HasPrefix(string(r.Value), `{"id":"42","n":`) {
			t.Fatalf("record key %q value %q: params not expanded", r.Key, r.Value)
		}
		h := map[string]string{}
		for _, kv := range r.Headers {
			h[kv.Key] = string(kv.Value)
		}
		if len(h) != 2 || h["source"] != "schedulemaster" || h["trace"] != "t-42" {
			t.Fatalf("record headers %v", h)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if len(acks) == 0 {
		t.Fatal("the cluster saw no produce request")
	}
	for _, a := range acks {
		if a != -1 {
			t.Fatalf("produce request with acks=%d, want -1 (all in-sync replicas)", a)
		}
	}
	if err := ex.Close(); err != nil {
		t.Fatal(err)
	}
	if n := ex.Len(); n != 0 {
		t.Fatalf("pool holds %d clients after Close", n)
	}
}

func TestExecutorKafkaMissingTopicFails(t *testing.T) {
	t.Parallel()
	c := cluster(t) // no topic; auto-creation off
	start := time.Now()
	res, out := executortest.Run(t, newExec(t), def(&protocol.KafkaSpec{Topic: "no-such-topic", Payload: "x"}, nil), conn(c), 10*time.Second)
	if res.Result != protocol.ResultFailed || !strings.Contains(out, "produce to no-such-topic: UNKNOWN_TOPIC_OR_PARTITION") {
		t.Fatalf("%s %q, want failed with UNKNOWN_TOPIC_OR_PARTITION", res.Result, out)
	}
	if d := time.Since(start); d > 8*time.Second {
		t.Fatalf("took %s", d)
	}
	t.Log(out)
}

func TestExecutorKafkaSASLWrongPasswordFailsWithoutSecret(t *testing.T) {
	t.Parallel()
	const topic = "sasl-topic"
	c := cluster(t, kfake.EnableSASL(), kfake.Superuser("PLAIN", "alice", "right-password"), kfake.SeedTopics(1, topic))
	ex := newExec(t)
	cn := conn(c)
	cn.User, cn.Options = "alice", map[string]string{"sasl": "plain"}

	cn.Secret = "wrong-secret-s3cr3t"
	res, out := executortest.Run(t, ex, def(&protocol.KafkaSpec{Topic: topic, Payload: "x"}, nil), cn, 5*time.Second)
	if res.Result != protocol.ResultFailed || !strings.Contains(out, "no broker answered") || !strings.Contains(out, "authenticating") {
		t.Fatalf("%s %q, want failed authenticating", res.Result, out)
	}
	executortest.NoSecret(t, out, cn.Secret)
	if _, err := ex.Test(context.Background(), cn); err == nil {
		t.Fatal("Test with a wrong password passed")
	} else {
		executortest.NoSecret(t, err.Error(), cn.Secret)
	}

	good := *cn
	good.Secret = "right-password"
	res, out = executortest.Run(t, ex, def(&protocol.KafkaSpec{Topic: topic, Payload: "x"}, nil), &good, 5*time.Second)
	if res.Result != protocol.ResultSuccess {
		t.Fatalf("with the right password: %s %q", res.Result, out)
	}
	executortest.NoSecret(t, out, good.Secret)
}

func TestExecutorKafkaUserWithoutSASLOptionFails(t *testing.T) {
	t.Parallel()
	cn := &protocol.ConnectionSpec{Name: "k", Kind: protocol.ConnKafka, Address: "127.0.0.1:9092", User: "alice", Secret: "pw-xyz"}
	ex := newExec(t)
	d := def(&protocol.KafkaSpec{Topic: "x", Payload: "x"}, nil)
	if err := ex.Validate(&executor.Task{Def: d, Conn: cn}); err == nil {
		t.Fatal("Validate passed a user without the sasl option")
	}
	res, out := executortest.Run(t, ex, d, cn, time.Second)
	if res.Result != protocol.ResultFailed || !strings.Contains(out, "sasl option") {
		t.Fatalf("%s %q", res.Result, out)
	}
	executortest.NoSecret(t, out, cn.Secret)
}

func TestExecutorKafkaDownBrokerFailsQuickly(t *testing.T) {
	t.Parallel()
	cn := &protocol.ConnectionSpec{Name: "k", Kind: protocol.ConnKafka, Address: executortest.ClosedPort(t)}
	ex := newExec(t)
	start := time.Now()
	res, out := executortest.Run(t, ex, def(&protocol.KafkaSpec{Topic: "x", Payload: "x"}, nil), cn, 5*time.Second)
	if res.Result != protocol.ResultFailed || !strings.Contains(out, "no broker answered") || !strings.Contains(out, "connection refused") {
		t.Fatalf("%s %q, want failed: connection refused", res.Result, out)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("a down broker took %s to fail", d)
	}
	if _, err := ex.Test(context.Background(), cn); err == nil || !strings.Contains(err.Error(), "connection refused") {
		t.Fatalf("Test of a down broker: %v", err)
	}
}

func TestExecutorKafkaUnackedProduceTimesOut(t *testing.T) {
	t.Parallel()
	const topic = "slow"
	c := cluster(t, kfake.SeedTopics(1, topic))
	c.ControlKey(int16(kmsg.Produce), func(kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		return nil, nil, true // swallowed: no ack ever comes
	})
	start := time.Now()
	res, out := executortest.Run(t, newExec(t), def(&protocol.KafkaSpec{Topic: topic, Payload: "x"}, nil), conn(c), 500*time.Millisecond)
	if res.Result != protocol.ResultTimeout || !strings.Contains(out, "no ack for the record to slow within 500ms") {
		t.Fatalf("%s %q, want timeout", res.Result, out)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("timeout took %s", d)
	}
}

func TestExecutorKafkaTestReportsBrokersAndCluster(t *testing.T) {
	t.Parallel()
	c := cluster(t, kfake.NumBrokers(3), kfake.ClusterID("sm-test-cluster"))
	msg, err := newExec(t).Test(context.Background(), conn(c))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(msg, "3 brokers (") || !strings.Contains(msg, "cluster id sm-test-cluster") {
		t.Fatalf("Test = %q", msg)
	}
	t.Log(msg)
}

func TestExecutorKafkaSCRAMProduces(t *testing.T) {
	t.Parallel()
	const topic = "scram-topic"
	c := cluster(t, kfake.EnableSASL(), kfake.Superuser("SCRAM-SHA-512", "bob", "scram-pw-123"), kfake.SeedTopics(1, topic))
	cn := conn(c)
	cn.User, cn.Secret, cn.Options = "bob", "scram-pw-123", map[string]string{"sasl": "scram-sha-512"}
	res, out := executortest.Run(t, newExec(t), def(&protocol.KafkaSpec{Topic: topic, Payload: "hello"}, nil), cn, 5*time.Second)
	if res.Result != protocol.ResultSuccess || out != "produced 5 bytes to scram-topic partition 0 offset 0" {
		t.Fatalf("%s %q", res.Result, out)
	}
}

func TestExecutorKafkaClusterGoneAfterRunsFailsQuickly(t *testing.T) {
	t.Parallel()
	const topic = "gone"
	c, err := kfake.NewCluster(kfake.SeedTopics(1, topic))
	if err != nil {
		t.Fatal(err)
	}
	ex := newExec(t)
	cn := conn(c)
	d := def(&protocol.KafkaSpec{Topic: topic, Payload: "x"}, nil)
	if res, out := executortest.Run(t, ex, d, cn, 5*time.Second); res.Result != protocol.ResultSuccess {
		t.Fatalf("%s %q", res.Result, out)
	}
	t0 := time.Now()
	c.Close()
	t.Logf("kfake Close took %s", time.Since(t0))
	start := time.Now()
	res, out := executortest.Run(t, ex, d, cn, 5*time.Second)
	if res.Result != protocol.ResultFailed || !strings.Contains(out, "no broker answered") {
		t.Fatalf("%s %q, want failed: no broker answered", res.Result, out)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("a cluster gone took %s to fail", d)
	}
	t.Log(time.Since(start), out)
}
