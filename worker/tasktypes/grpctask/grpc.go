// Package grpctask runs grpc tasks: one unary call, its method described
// by the server's reflection service or by the task's descriptor set, the
// request and the reply as JSON (dynamic protobuf messages), through one
// pooled client connection per connection definition.
package grpctask

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	rpb "google.golang.org/grpc/reflection/grpc_reflection_v1"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/dynamicpb"

	"github.com/schedulemaster-go/schedulemaster/protocol"
	"github.com/schedulemaster-go/schedulemaster/worker/executor"
)

// maxReply bounds the reply's JSON in the run's output.
const maxReply = 16 << 10

// Executor makes the calls of grpc tasks.
type Executor struct {
	log  *slog.Logger
	pool *executor.Pool[*conn]
}

// New returns a grpc executor logging to log.
func New(log *slog.Logger) *Executor {
	e := &Executor{log: log}
	e.pool = executor.NewPool(e.open, func(c *conn) error { return c.cc.Close() }, executor.PoolOptions{})
	return e
}

// conn is a pooled client connection and the methods resolved on it.
type conn struct {
	cc      *grpc.ClientConn
	mu      sync.Mutex
	methods map[string]*method
}

// Type implements executor.Executor.
func (*Executor) Type() string { return protocol.TaskGRPC }

// Validate implements executor.Executor: the definition is there, its
// descriptor set (if any) describes its method, and the connection (when
// the task has it) may carry its secret.
func (*Executor) Validate(t *executor.Task) error {
	if t.Def == nil || t.Def.GRPC == nil {
		return ErrNoSpec
	}
	if t.Conn != nil {
		if err := checkConn(t.Conn); err != nil {
			return err
		}
	}
	if set := t.Def.GRPC.DescriptorSet; set != "" {
		c := &conn{methods: map[string]*method{}}
		if _, err := c.method(context.Background(), t.Def.GRPC.Method, set); err != nil {
			return err
		}
	}
	return nil
}

// Close implements executor.Closer: it closes the pooled connections.
func (e *Executor) Close() error { return e.pool.Close() }

// Len is how many client connections the executor's pool holds.
func (e *Executor) Len() int { return e.pool.Len() }

// checkConn says what stops c from being used.
func checkConn(c *protocol.ConnectionSpec) error {
	if c.Kind != "" && c.Kind != protocol.ConnGRPC {
		return fmt.Errorf("the connection %q is of kind %s, not grpc", c.Name, c.Kind)
	}
	if c.Address == "" || strings.Contains(c.Address, ",") {
		return fmt.Errorf("the connection %q must have one address host:port", c.Name)
	}
	if c.Secret != "" && (c.TLS == nil || !c.TLS.Enabled) && !loopback(c.Address) {
		return ErrBearerPlaintext
	}
	return nil
}

// loopback says addr (host:port) is on this machine.
func loopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// dial makes the client connection of c; it connects at its first call.
func dial(c *protocol.ConnectionSpec) (*grpc.ClientConn, error) {
	if err := checkConn(c); err != nil {
		return nil, err
	}
	tlsCfg, err := executor.TLSConfig(c)
	if err != nil {
		return nil, err
	}
	creds := insecure.NewCredentials()
	if tlsCfg != nil {
		creds = credentials.NewTLS(tlsCfg)
	}
	cc, err := grpc.NewClient("dns:///"+c.Address,
		grpc.WithTransportCredentials(creds),
		grpc.WithUserAgent("schedulemaster"),
		// A server back from a restart is reached again within seconds,
		// not after the default backoff of up to two minutes.
		grpc.WithConnectParams(grpc.ConnectParams{
			Backoff:           backoff.Config{BaseDelay: time.Second, Multiplier: 1.6, Jitter: 0.2, MaxDelay: 10 * time.Second},
			MinConnectTimeout: 5 * time.Second,
		}))
	if err != nil {
		return nil, fmt.Errorf("grpc client: %w", err)
	}
	return cc, nil
}

func (e *Executor) open(_ context.Context, c *protocol.ConnectionSpec) (*conn, error) {
	cc, err := dial(c)
	if err != nil {
		return nil, err
	}
	e.log.Debug("grpc client connection made", "connection", c.Name, "address", c.Address)
	return &conn{cc: cc, methods: map[string]*method{}}, nil
}

// outgoing is ctx with the call's metadata: the task's, and the
// connection's secret as a bearer token (which wins over a task's own
// authorization).
func outgoing(ctx context.Context, t *executor.Task, c *protocol.ConnectionSpec) context.Context {
	md := metadata.MD{}
	if t != nil {
		for k, v := range t.Def.GRPC.Metadata {
			md.Set(k, t.Param(v))
		}
	}
	if c.Secret != "" {
		md.Set("authorization", "Bearer "+c.Secret)
	}
	return metadata.NewOutgoingContext(ctx, md)
}

// Run implements executor.Executor: it makes the task's call and returns
// the reply as JSON.
func (e *Executor) Run(ctx context.Context, t *executor.Task, _ io.Writer) executor.Result {
	if t.Def == nil || t.Def.GRPC == nil {
		return failed(ErrNoSpec.Error())
	}
	if t.Conn == nil {
		return failed(executor.ErrNoConnection.Error())
	}
	spec := t.Def.GRPC
	if err := checkConn(t.Conn); err != nil {
		return failed(err.Error())
	}
	c, release, err := e.pool.Get(ctx, t.Conn)
	if err != nil {
		return ended(ctx, t, err)
	}
	defer release()
	ctx = outgoing(ctx, t, t.Conn)
	m, err := c.method(ctx, spec.Method, spec.DescriptorSet)
	if err != nil {
		return ended(ctx, t, err)
	}
	req := dynamicpb.NewMessage(m.desc.Input())
	body := t.Param(spec.Request)
	if strings.TrimSpace(body) == "" {
		body = "{}"
	}
	if err := (protojson.UnmarshalOptions{Resolver: m.types}).Unmarshal([]byte(body), req); err != nil {
		return failed(fmt.Sprintf("request is not a %s: %v", m.desc.Input().FullName(), err))
	}
	reply := dynamicpb.NewMessage(m.desc.Output())
	path := "/" + string(m.desc.Parent().FullName()) + "/" + string(m.desc.Name())
	if err := c.cc.Invoke(ctx, path, req, reply); err != nil {
		if status.Code(err) == codes.Unimplemented {
			c.forget(spec.Method, spec.DescriptorSet)
		}
		return ended(ctx, t, err)
	}
	return executor.Result{Result: protocol.ResultSuccess, Output: replyJSON(reply, m.types)}
}

// replyJSON is the reply as compact JSON, cut at maxReply.
func replyJSON(reply *dynamicpb.Message, types *dynamicpb.Types) string {
	b, err := protojson.MarshalOptions{Resolver: types}.Marshal(reply)
	if err != nil {
		return "the reply cannot be shown as JSON: " + err.Error()
	}
	// protojson spaces its output at random, so that no one relies on
	// its bytes: compact it.
	var buf bytes.Buffer
	if json.Compact(&buf, b) == nil {
		b = buf.Bytes()
	}
	if len(b) > maxReply {
		n := maxReply
		for n > 0 && !utf8.RuneStart(b[n]) {
			n-- // cut between characters
		}
		return fmt.Sprintf("%s… (reply cut at %d of %d bytes)", b[:n], n, len(b))
	}
	return string(b)
}

func failed(msg string) executor.Result {
	return executor.Result{Result: protocol.ResultFailed, Output: msg}
}

// ended is the result of err: a timeout when the run's deadline passed or
// the server said DeadlineExceeded, else failed with err's text (a status:
// "rpc error: code = NotFound desc = ...").
func ended(ctx context.Context, t *executor.Task, err error) executor.Result {
	if errors.Is(ctx.Err(), context.DeadlineExceeded) || status.Code(err) == codes.DeadlineExceeded {
		within := "the run's time"
		if t.Timeout > 0 {
			within = t.Timeout.String()
		}
		return executor.Result{Result: protocol.ResultTimeout, Output: fmt.Sprintf("no reply within %s: %v", within, err)}
	}
	return failed(err.Error())
}

// Test implements executor.Tester: it lists the server's services through
// its reflection service, with a connection of its own.
func (e *Executor) Test(ctx context.Context, c *protocol.ConnectionSpec) (string, error) {
	cc, err := dial(c)
	if err != nil {
		return "", err
	}
	defer func() { _ = cc.Close() }()
	var names []string
	err = reflectSession(outgoing(ctx, nil, c), cc, func(ask askFunc) error {
		resp, err := ask(&rpb.ServerReflectionRequest{MessageRequest: &rpb.ServerReflectionRequest_ListServices{}})
		if err != nil {
			return err
		}
		for _, s := range resp.GetListServicesResponse().GetService() {
			if !strings.HasPrefix(s.GetName(), "grpc.reflection.") {
				names = append(names, s.GetName())
			}
		}
		return nil
	})
	switch {
	case errors.Is(err, ErrNoReflection):
		// The server answered (Unimplemented): it is there.
		return "reachable, no reflection service (tasks need a descriptor_set)", nil
	case err != nil:
		return "", err
	case len(names) == 0:
		return "reachable, reflection lists no service", nil
	}
	slices.Sort(names)
	const show = 20
	msg := "services: " + strings.Join(names[:min(len(names), show)], ", ")
	if len(names) > show {
		msg += fmt.Sprintf(" and %d more", len(names)-show)
	}
	return msg, nil
}
