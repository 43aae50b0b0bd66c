// Package redistask runs tasks of type redis: one PUBLISH, XADD or LPUSH
// of the task's payload, or one command of protocol.RedisAllowedCommands,
// through a pooled go-redis client per connection.
package redistask

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/maintnotifications"

	"github.com/schedulemaster-go/schedulemaster/protocol"
	"github.com/schedulemaster-go/schedulemaster/worker/executor"
)

// Bounds of a client: each run's ctx ends its reads and writes earlier
// (ContextTimeoutEnabled); these apply when it has no deadline.
const (
	poolSize     = 10
	dialTimeout  = 5 * time.Second
	ioTimeout    = 10 * time.Second
	maxArgs      = 100
	maxReplyText = 4096 // bytes of one string of a reply shown
	maxReplyElem = 100  // elements of an array reply shown
)

// Executor runs redis tasks.
type Executor struct {
	log  *slog.Logger
	pool *executor.Pool[*redis.Client]
}

// New returns the redis executor.
func New(log *slog.Logger) *Executor {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	e := &Executor{log: log}
	e.pool = executor.NewPool(func(_ context.Context, c *protocol.ConnectionSpec) (*redis.Client, error) {
		return newClient(c, poolSize)
	}, (*redis.Client).Close, executor.PoolOptions{})
	return e
}

// newClient makes the client of c; it connects at its first command.
func newClient(c *protocol.ConnectionSpec, size int) (*redis.Client, error) {
	db := 0
	if c.Database != "" {
		n, err := strconv.Atoi(c.Database)
		if err != nil || n < 0 || n > 255 {
			return nil, fmt.Errorf("%w: database %q is not a number from 0 to 255", ErrDefinition, c.Database)
		}
		db = n
	}
	tlsCfg, err := executor.TLSConfig(c)
	if err != nil {
		return nil, err
	}
	return redis.NewClient(&redis.Options{
		Addr:     c.Address,
		DB:       db,
		Username: c.User,
		Password: c.Secret,
		// RESP2: replies are strings, integers, arrays and nil, shown as
		// redis-cli shows them; no push notifications to handle.
		Protocol:  2,
		TLSConfig: tlsCfg,
		// A bounded pool: the connections a worker holds to one server.
		PoolSize:       size,
		MaxActiveConns: size,
		PoolTimeout:    ioTimeout,
		// One dial retry; the task's own retries do the rest.
		DialerRetries:         2,
		DialTimeout:           dialTimeout,
		ReadTimeout:           ioTimeout,
		WriteTimeout:          ioTimeout,
		ContextTimeoutEnabled: true,
		// No retry of a command: PUBLISH, XADD or LPUSH sent twice after a
		// lost reply would be delivered twice.
		MaxRetries:               -1,
		ConnMaxIdleTime:          5 * time.Minute,
		DisableIdentity:          true,
		MaintNotificationsConfig: &maintnotifications.Config{Mode: maintnotifications.ModeDisabled},
	}), nil
}

// Type implements executor.Executor.
func (*Executor) Type() string { return protocol.TaskRedis }

// Validate implements executor.Executor: the command and, for "command",
// the allow-list (again: a definition may reach the worker another way
// than through the master's checks).
func (*Executor) Validate(t *executor.Task) error {
	if t.Def == nil || t.Def.Redis == nil {
		return fmt.Errorf("%w: the task has no redis definition", ErrDefinition)
	}
	s := t.Def.Redis
	switch strings.ToLower(strings.TrimSpace(s.Command)) {
	case protocol.RedisPublish, protocol.RedisXAdd, protocol.RedisLPush:
		if strings.TrimSpace(s.Key) == "" {
			return fmt.Errorf("%w: the key is required: the channel, stream or list", ErrDefinition)
		}
	case protocol.RedisCommand:
		if len(s.Args) == 0 {
			return fmt.Errorf("%w: args are required: the command and its arguments", ErrDefinition)
		}
		if err := allowed(s.Args[0]); err != nil {
			return err
		}
		if len(s.Args) > maxArgs {
			return fmt.Errorf("%w: at most %d arguments", ErrDefinition, maxArgs)
		}
	default:
		return fmt.Errorf("%w: command %q is not publish, xadd, lpush or command", ErrDefinition, s.Command)
	}
	if t.Conn != nil && t.Conn.Kind != "" && t.Conn.Kind != protocol.ConnRedis {
		return fmt.Errorf("%w: connection %q is a %s connection, not redis", ErrDefinition, t.Conn.Name, t.Conn.Kind)
	}
	return nil
}

// allowed checks name against protocol.RedisAllowedCommands, whatever its
// case or spaces.
func allowed(name string) error {
	n := strings.ToUpper(strings.TrimSpace(name))
	if !slices.Contains(protocol.RedisAllowedCommands(), n) {
		return fmt.Errorf("%w: %q is not one of %s", ErrNotAllowed, name, strings.Join(protocol.RedisAllowedCommands(), ", "))
	}
	return nil
}

// Run implements executor.Executor.
func (e *Executor) Run(ctx context.Context, t *executor.Task, out io.Writer) executor.Result {
	if err := e.Validate(t); err != nil {
		return done(ctx, out, "", err)
	}
	if t.Conn == nil {
		return done(ctx, out, "", executor.ErrNoConnection)
	}
	s := t.Def.Redis
	cmd := strings.ToLower(strings.TrimSpace(s.Command))
	key := t.Param(s.Key)
	if key == "" && cmd != protocol.RedisCommand {
		return done(ctx, out, "", fmt.Errorf("%w: the key is empty once its params are expanded", ErrDefinition))
	}
	cl, release, err := e.pool.Get(ctx, t.Conn)
	if err != nil {
		return done(ctx, out, "", err)
	}
	defer release()
	switch cmd {
	case protocol.RedisPublish:
		n, err := cl.Publish(ctx, key, t.Param(s.Payload)).Result()
		if err != nil {
			return done(ctx, out, "PUBLISH "+key, err)
		}
		who := "subscribers"
		if n == 1 {
			who = "subscriber"
		}
		fmt.Fprintf(out, "published to channel %s: %d %s received it\n", key, n, who)
	case protocol.RedisXAdd:
		var values []any
		if len(s.Fields) == 0 {
			values = []any{"payload", t.Param(s.Payload)}
		} else {
			// Sorted: the entry's fields in a stable order.
			for _, k := range slices.Sorted(func(yield func(string) bool) {
				for k := range s.Fields {
					if !yield(k) {
						return
					}
				}
			}) {
				values = append(values, t.Param(k), t.Param(s.Fields[k]))
			}
		}
		id, err := cl.XAdd(ctx, &redis.XAddArgs{Stream: key, ID: "*", Values: values}).Result()
		if err != nil {
			return done(ctx, out, "XADD "+key, err)
		}
		fmt.Fprintf(out, "added entry %s to stream %s\n", id, key)
	case protocol.RedisLPush:
		n, err := cl.LPush(ctx, key, t.Param(s.Payload)).Result()
		if err != nil {
			return done(ctx, out, "LPUSH "+key, err)
		}
		fmt.Fprintf(out, "pushed to list %s: its length is %d\n", key, n)
	case protocol.RedisCommand:
		args := make([]any, len(s.Args))
		for i, a := range s.Args {
			args[i] = t.Param(a)
		}
		name := strings.ToUpper(strings.TrimSpace(s.Args[0]))
		args[0] = name
		head := name
		if len(args) > 1 {
			head += " " + clip(args[1].(string), 200)
		}
		v, err := cl.Do(ctx, args...).Result()
		if err != nil && !errors.Is(err, redis.Nil) {
			return done(ctx, out, head, err)
		}
		var b strings.Builder
		reply(&b, v, "")
		fmt.Fprintf(out, "%s: %s\n", head, b.String())
	}
	return executor.Result{Result: protocol.ResultSuccess}
}

// clip is s cut to n bytes at most, marked when cut.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return strings.ToValidUTF8(s[:n], "") + "…"
}

// done is a run that ended with err at step: a timeout when ctx's
// deadline passed, failed otherwise.
func done(ctx context.Context, out io.Writer, step string, err error) executor.Result {
	prefix := ""
	if step != "" {
		prefix = step + ": "
	}
	if timedOut(ctx) {
		fmt.Fprintf(out, "%stimed out: the task's timeout passed (%s)\n", prefix, reason(err))
		return executor.Result{Result: protocol.ResultTimeout}
	}
	fmt.Fprintf(out, "%s%s\n", prefix, reason(err))
	return executor.Result{Result: protocol.ResultFailed}
}

// timedOut says ctx's deadline passed: the socket's deadline, set to it,
// may end a read a moment before ctx itself says so.
func timedOut(ctx context.Context) bool {
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return true
	}
	dl, ok := ctx.Deadline()
	return ok && !time.Now().Before(dl)
}

// reason is err said plainly: a failed dial as "connect to host:port:
// connection refused".
func reason(err error) string {
	var op *net.OpError
	if errors.As(err, &op) && op.Op == "dial" && op.Err != nil {
		why := op.Err.Error()
		var sys *os.SyscallError
		if errors.As(op.Err, &sys) {
			why = sys.Err.Error()
		}
		addr := ""
		if op.Addr != nil {
			addr = op.Addr.String()
		}
		return fmt.Sprintf("connect to %s: %s", addr, why)
	}
	return err.Error()
}

// reply writes v as redis-cli shows it: strings quoted ("OK" bare),
// (integer) n, (nil), arrays numbered, bounded.
func reply(b *strings.Builder, v any, indent string) {
	switch v := v.(type) {
	case nil:
		b.WriteString("(nil)")
	case string:
		if v == "OK" || v == "PONG" || v == "QUEUED" {
			b.WriteString(v)
			return
		}
		if len(v) > maxReplyText {
			fmt.Fprintf(b, "%q… (%d bytes in all)", v[:maxReplyText], len(v))
			return
		}
		b.WriteString(strconv.Quote(v))
	case int64:
		fmt.Fprintf(b, "(integer) %d", v)
	case float64:
		fmt.Fprintf(b, "(double) %s", strconv.FormatFloat(v, 'g', -1, 64))
	case bool:
		fmt.Fprintf(b, "(boolean) %t", v)
	case []any:
		if len(v) == 0 {
			b.WriteString("(empty array)")
			return
		}
		for i, el := range v {
			if i == maxReplyElem {
				fmt.Fprintf(b, "\n%s… (%d elements in all)", indent, len(v))
				return
			}
			fmt.Fprintf(b, "\n%s%d) ", indent, i+1)
			reply(b, el, indent+"   ")
		}
	case error:
		fmt.Fprintf(b, "(error) %s", v.Error())
	default:
		fmt.Fprintf(b, "%v", v)
	}
}

// Test implements executor.Tester: PING, then the server's version and
// mode from INFO server, over a client of its own.
func (e *Executor) Test(ctx context.Context, c *protocol.ConnectionSpec) (string, error) {
	cl, err := newClient(c, 1)
	if err != nil {
		return "", err
	}
	defer cl.Close()
	pong, err := cl.Ping(ctx).Result()
	if err != nil {
		return "", errors.New(reason(err))
	}
	info, err := cl.Info(ctx, "server").Result()
	if err != nil {
		return "", fmt.Errorf("INFO server: %s", reason(err))
	}
	fields := map[string]string{}
	for line := range strings.SplitSeq(info, "\n") {
		if k, v, ok := strings.Cut(strings.TrimSpace(line), ":"); ok {
			fields[k] = v
		}
	}
	msg := "Redis"
	if v := fields["redis_version"]; v != "" {
		msg += " " + v
	}
	if m := fields["redis_mode"]; m != "" {
		msg += " (" + m + ")"
	}
	db := c.Database
	if db == "" {
		db = "0"
	}
	return fmt.Sprintf("%s, database %s: %s", msg, db, pong), nil
}

// Close implements executor.Closer: it closes every pooled client.
func (e *Executor) Close() error { return e.pool.Close() }
