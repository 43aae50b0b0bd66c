// Package executortest helps the tests of task types reach the local
// servers they run against.
package executortest

import (
	"bytes"
	"context"
	"net"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/schedulemaster-go/schedulemaster/protocol"
	"github.com/schedulemaster-go/schedulemaster/worker/executor"
)

// Service returns addr when a server listens there; otherwise the test is
// skipped with the reason, or fails under SM_TEST_REQUIRE_ALL=1 (CI).
func Service(t testing.TB, name, addr string) string {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 2*time.Second)
	if err != nil {
		if os.Getenv("SM_TEST_REQUIRE_ALL") == "1" {
			t.Fatalf("%s is required (SM_TEST_REQUIRE_ALL=1) but does not answer on %s: %v", name, addr, err)
		}
		t.Skipf("no %s on %s (%v): start it to run this test", name, addr, err)
	}
	_ = c.Close()
	return addr
}

// ClosedPort returns a loopback address nothing listens on: a port just
// bound and released.
func ClosedPort(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	_ = l.Close()
	return addr
}

// Output is a bounded, concurrency-safe writer a test passes as a run's
// output.
type Output struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

// Write implements io.Writer, keeping at most protocol.MaxOutputBytes.
func (o *Output) Write(p []byte) (int, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if room := protocol.MaxOutputBytes - o.buf.Len(); room > 0 {
		o.buf.Write(p[:min(len(p), room)])
	}
	return len(p), nil
}

// String is what was written.
func (o *Output) String() string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.buf.String()
}

// Run runs def with conn on ex within timeout and returns the result and
// the whole output (what was written, then Result.Output).
func Run(t testing.TB, ex executor.Executor, def *protocol.TaskDef, conn *protocol.ConnectionSpec, timeout time.Duration) (executor.Result, string) {
	t.Helper()
	def.Normalize()
	if err := def.Validate(time.Now()); err != nil {
		t.Fatalf("definition: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	var out Output
	res := ex.Run(ctx, &executor.Task{Def: def, Conn: conn, Timeout: timeout}, &out)
	return res, out.String() + res.Output
}

// NoSecret fails the test when text holds secret.
func NoSecret(t testing.TB, text, secret string) {
	t.Helper()
	if secret != "" && strings.Contains(text, secret) {
		t.Fatalf("the output shows the connection's secret %q:\n%s", secret, text)
	}
}
