package redistask

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

	"github.com/redis/go-redis/v9"

	"github.com/schedulemaster-go/schedulemaster/protocol"
	"github.com/schedulemaster-go/schedulemaster/worker/executor"
	"github.com/schedulemaster-go/schedulemaster/worker/executor/executortest"
)

const (
	redisAddr  = "127.0.0.1:6379"
	testSecret = "redis-S3cret-4711"
)

func unique(t *testing.T) string {
	t.Helper()
	var b [6]byte
	_, _ = rand.Read(b[:])
	return "smtest:" + hex.EncodeToString(b[:])
}

func connTo(addr string) *protocol.ConnectionSpec {
	return &protocol.ConnectionSpec{Name: "cache", Kind: protocol.ConnRedis, Address: addr, Database: "0"}
}

func taskDef(spec protocol.RedisSpec, params map[string]string) *protocol.TaskDef {
	spec.Connection = "cache"
	return &protocol.TaskDef{ID: "t1", Title: "redis", Type: protocol.TaskRedis, Params: params,
		Timeout:  protocol.Duration(10 * time.Second),
		Schedule: protocol.Schedule{Kind: protocol.ScheduleInterval, Every: protocol.Duration(time.Hour)},
		Redis:    &spec}
}

func newExec(t *testing.T) *Executor {
	t.Helper()
	e := New(nil)
	t.Cleanup(func() { _ = e.Close() })
	return e
}

// testClient is the test's own client, deleting keys at cleanup.
func testClient(t *testing.T, keys ...string) *redis.Client {
	t.Helper()
	executortest.Service(t, "Redis", redisAddr)
	c := redis.NewClient(&redis.Options{Addr: redisAddr, Protocol: 2, DisableIdentity: true})
	t.Cleanup(func() {
		if len(keys) > 0 {
			_ = c.Del(context.Background(), keys...).Err()
		}
		_ = c.Close()
	})
	return c
}

func run(t *testing.T, e *Executor, def *protocol.TaskDef, conn *protocol.ConnectionSpec) string {
	t.Helper()
	res, out := executortest.Run(t, e, def, conn, 5*time.Second)
	if res.Result != protocol.ResultSuccess {
		t.Fatalf("run = %s %q, want success", res.Result, out)
	}
	return out
}

func TestExecutorRedisPublishDeliversOncePerRun(t *testing.T) {
	t.Parallel()
	channel := unique(t) + ":events"
	c := testClient(t)
	ctx := context.Background()
	ps := c.Subscribe(ctx, channel)
	defer ps.Close()
	if _, err := ps.Receive(ctx); err != nil { // the subscription's confirmation
		t.Fatal(err)
	}
	msgs := ps.Channel()
	e := newExec(t)
	conn := connTo(redisAddr)
	const runs = 3
	var want []string
	for i := range runs {
		def := taskDef(protocol.RedisSpec{Command: protocol.RedisPublish, Key: channel, Payload: `{"job":"{{JOB}}","n":{{N}}}`},
			map[string]string{"JOB": "nightly", "N": fmt.Sprint(i)})
		out := run(t, e, def, conn)
		if line := "published to channel " + channel + ": 1 subscriber received it"; !strings.Contains(out, line) {
			t.Fatalf("output %q, want %q", out, line)
		}
		want = append(want, fmt.Sprintf(`{"job":"nightly","n":%d}`, i))
		if n := e.pool.Len(); n != 1 {
			t.Fatalf("pool holds %d clients after run %d, want 1 (reused)", n, i)
		}
	}
	// A marker published after the runs: what came before it is all.
	if err := c.Publish(ctx, channel, "marker").Err(); err != nil {
		t.Fatal(err)
	}
	var got []string
	timeout := time.After(10 * time.Second)
	for {
		select {
		case m := <-msgs:
			if m.Payload != "marker" {
				got = append(got, m.Payload)
				continue
			}
		case <-timeout:
			t.Fatalf("the marker never came; got %q", got)
		}
		break
	}
	if !slices.Equal(got, want) {
		t.Fatalf("subscriber saw %q, want each run's message once: %q", got, want)
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	if n := e.pool.Len(); n != 0 {
		t.Fatalf("pool holds %d clients after Close", n)
	}
	res, out := executortest.Run(t, e, taskDef(protocol.RedisSpec{Command: protocol.RedisPublish, Key: channel}, nil), conn, 5*time.Second)
	if res.Result != protocol.ResultFailed {
		t.Fatalf("run after Close = %s %q", res.Result, out)
	}
}

func TestExecutorRedisXAddAddsOneEntryPerRunWithExpandedFields(t *testing.T) {
	t.Parallel()
	stream := unique(t) + ":stream"
	c := testClient(t, stream)
	e := newExec(t)
	const runs = 3
	for i := range runs {
		def := taskDef(protocol.RedisSpec{Command: protocol.RedisXAdd, Key: stream,
			Fields: map[string]string{"device": "{{DEVICE}}", "n": "{{N}}"}}, map[string]string{"DEVICE": "pump-7", "N": fmt.Sprint(i)})
		if out := run(t, e, def, connTo(redisAddr)); !strings.Contains(out, "added entry ") || !strings.Contains(out, " to stream "+stream) {
			t.Fatalf("output %q", out)
		}
	}
	// Without fields: one field "payload".
	run(t, e, taskDef(protocol.RedisSpec{Command: protocol.RedisXAdd, Key: stream, Payload: "raw {{N}}"}, map[string]string{"N": "x"}), connTo(redisAddr))
	entries, err := c.XRange(context.Background(), stream, "-", "+").Result()
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != runs+1 {
		t.Fatalf("stream holds %d entries, want %d", len(entries), runs+1)
	}
	for i := range runs {
		if v := entries[i].Values; len(v) != 2 || v["device"] != "pump-7" || v["n"] != fmt.Sprint(i) {
			t.Fatalf("entry %d = %v", i, v)
		}
	}
	if v := entries[runs].Values; len(v) != 1 || v["payload"] != "raw x" {
		t.Fatalf("payload entry = %v", v)
	}
}

func TestExecutorRedisLPushSaysTheListLength(t *testing.T) {
	t.Parallel()
	list := unique(t) + ":list"
	c := testClient(t, list)
	e := newExec(t)
	for i := 1; i <= 3; i++ {
		out := run(t, e, taskDef(protocol.RedisSpec{Command: protocol.RedisLPush, Key: list, Payload: "job {{N}}"}, map[string]string{"N": fmt.Sprint(i)}), connTo(redisAddr))
		if want := fmt.Sprintf("pushed to list %s: its length is %d", list, i); !strings.Contains(out, want) {
			t.Fatalf("output %q, want %q", out, want)
		}
	}
	got, err := c.LRange(context.Background(), list, 0, -1).Result()
	if err != nil || !slices.Equal(got, []string{"job 3", "job 2", "job 1"}) {
		t.Fatalf("list = %q, %v", got, err)
	}
}

func TestExecutorRedisCommandSetThenGet(t *testing.T) {
	t.Parallel()
	key := unique(t) + ":k"
	c := testClient(t, key, key+":n")
	e := newExec(t)
	conn := connTo(redisAddr)
	params := map[string]string{"KEY": key, "V": "hello world"}
	if out := run(t, e, taskDef(protocol.RedisSpec{Command: protocol.RedisCommand, Args: []string{"set", "{{KEY}}", "{{V}}", "EX", "60"}}, params), conn); !strings.Contains(out, "SET "+key+": OK") {
		t.Fatalf("SET output %q", out)
	}
	if v, err := c.Get(context.Background(), key).Result(); err != nil || v != "hello world" {
		t.Fatalf("the key holds %q, %v", v, err)
	}
	if out := run(t, e, taskDef(protocol.RedisSpec{Command: protocol.RedisCommand, Args: []string{"GET", "{{KEY}}"}}, params), conn); !strings.Contains(out, `GET `+key+`: "hello world"`) {
		t.Fatalf("GET output %q", out)
	}
	if out := run(t, e, taskDef(protocol.RedisSpec{Command: protocol.RedisCommand, Args: []string{"INCRBY", key + ":n", "5"}}, nil), conn); !strings.Contains(out, "INCRBY "+key+":n: (integer) 5") {
		t.Fatalf("INCRBY output %q", out)
	}
	if out := run(t, e, taskDef(protocol.RedisSpec{Command: protocol.RedisCommand, Args: []string{"GET", key + ":none"}}, nil), conn); !strings.Contains(out, "(nil)") {
		t.Fatalf("GET of a missing key: %q", out)
	}
	// A server error (a string key is not a list) fails the run with it.
	res, out := executortest.Run(t, e, taskDef(protocol.RedisSpec{Command: protocol.RedisCommand, Args: []string{"LPUSH", key, "x"}}, nil), conn, 5*time.Second)
	if res.Result != protocol.ResultFailed || !strings.Contains(out, "WRONGTYPE") {
		t.Fatalf("LPUSH on a string = %s %q", res.Result, out)
	}
}

func TestExecutorRedisRefusesACommandOffTheAllowListEvenWithoutValidate(t *testing.T) {
	t.Parallel()
	c := testClient(t)
	e := newExec(t)
	name := strings.ReplaceAll(unique(t), ":", "-")
	for _, args := range [][]string{{"CLIENT", "SETNAME", name}, {"client", "setname", name}, {" Flushall "}, {"CONFIG", "SET", "maxmemory", "1"}, {"KEYS", "*"}} {
		// Built by hand, as a definition that skipped protocol validation.
		def := taskDef(protocol.RedisSpec{Command: protocol.RedisCommand, Args: args}, nil)
		var out executortest.Output
		res := e.Run(context.Background(), &executor.Task{Def: def, Conn: connTo(redisAddr)}, &out)
		if res.Result != protocol.ResultFailed || !strings.Contains(out.String(), "is not one of") {
			t.Fatalf("%q = %s %q, want refused", args, res.Result, out.String())
		}
		if err := e.Validate(&executor.Task{Def: def}); err == nil {
			t.Fatalf("Validate accepted %q", args)
		}
	}
	if n := e.pool.Len(); n != 0 {
		t.Fatalf("a refused command made a client (%d)", n)
	}
	list, err := c.ClientList(context.Background()).Result()
	if err != nil || strings.Contains(list, name) {
		t.Fatalf("CLIENT SETNAME reached the server: %v\n%s", err, list)
	}
}

// silentServer accepts connections and never answers.
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

func TestExecutorRedisSilentServerTimesOut(t *testing.T) {
	t.Parallel()
	e := newExec(t)
	start := time.Now()
	res, out := executortest.Run(t, e, taskDef(protocol.RedisSpec{Command: protocol.RedisLPush, Key: "smtest:silent", Payload: "x"}, nil), connTo(silentServer(t)), 300*time.Millisecond)
	if res.Result != protocol.ResultTimeout || !strings.Contains(out, "LPUSH smtest:silent: timed out") {
		t.Fatalf("run = %s %q, want timeout", res.Result, out)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("the timeout took %s", d)
	}
}

func TestExecutorRedisDownServerFailsQuickly(t *testing.T) {
	t.Parallel()
	addr := executortest.ClosedPort(t)
	conn := connTo(addr)
	conn.User, conn.Secret = "sm-user", testSecret
	e := newExec(t)
	start := time.Now()
	res, out := executortest.Run(t, e, taskDef(protocol.RedisSpec{Command: protocol.RedisPublish, Key: "smtest:down"}, nil), conn, 5*time.Second)
	if res.Result != protocol.ResultFailed || !strings.Contains(out, "connect to "+addr+": connection refused") {
		t.Fatalf("run = %s %q, want failed: connection refused", res.Result, out)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("a down server took %s to fail", d)
	}
	executortest.NoSecret(t, out, testSecret)
	_, err := e.Test(context.Background(), conn)
	if err == nil || !strings.Contains(err.Error(), "connection refused") {
		t.Fatalf("Test of a down server = %v", err)
	}
	executortest.NoSecret(t, err.Error(), testSecret)
}

func TestExecutorRedisWrongPasswordFailsWithoutShowingIt(t *testing.T) {
	t.Parallel()
	key := unique(t) + ":auth"
	testClient(t, key)
	e := newExec(t)
	conn := connTo(redisAddr)
	conn.User, conn.Secret = "sm-nobody", testSecret
	res, out := executortest.Run(t, e, taskDef(protocol.RedisSpec{Command: protocol.RedisLPush, Key: key, Payload: "x"}, nil), conn, 5*time.Second)
	if res.Result != protocol.ResultFailed || !strings.Contains(out, "LPUSH "+key+": WRONGPASS") {
		t.Fatalf("run = %s %q, want an authentication failure", res.Result, out)
	}
	executortest.NoSecret(t, out, testSecret)
	_, err := e.Test(context.Background(), conn)
	if err == nil || !strings.Contains(err.Error(), "WRONGPASS") {
		t.Fatalf("Test with a wrong password = %v", err)
	}
	executortest.NoSecret(t, err.Error(), testSecret)

	// A password without a user is the default user's: a server whose
	// default user has none (this one) takes any, and it must not show.
	conn.User = ""
	res, out = executortest.Run(t, e, taskDef(protocol.RedisSpec{Command: protocol.RedisLPush, Key: key, Payload: "x"}, nil), conn, 5*time.Second)
	if res.Result != protocol.ResultSuccess {
		t.Fatalf("password only = %s %q", res.Result, out)
	}
	executortest.NoSecret(t, out, testSecret)
}

func TestExecutorRedisTestSaysTheServerVersion(t *testing.T) {
	t.Parallel()
	testClient(t)
	e := newExec(t)
	msg, err := e.Test(context.Background(), connTo(redisAddr))
	if err != nil || !strings.HasPrefix(msg, "Redis ") || !strings.Contains(msg, "database 0: PONG") {
		t.Fatalf("Test = %q, %v", msg, err)
	}
	t.Logf("Test: %s", msg)
}
