// Package kafkatask runs kafka tasks: one record produced to a topic with
// acks=all (every in-sync replica has it before the run succeeds), through
// one pooled franz-go client per connection.
package kafkatask

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/schedulemaster-go/schedulemaster/protocol"
	"github.com/schedulemaster-go/schedulemaster/worker/executor"
)

// Bounds of a client's requests. A run never waits past its own timeout
// (it stops waiting at ctx's end), but these keep what the client does on
// its own after a run gave up short.
const (
	dialTimeout    = 10 * time.Second
	produceTimeout = 10 * time.Second
)

// Executor produces the records of kafka tasks.
type Executor struct {
	log  *slog.Logger
	pool *executor.Pool[*client]
	// opts are added to every client's options (tests shorten retries).
	opts []kgo.Opt
}

// New returns a kafka executor logging to log.
func New(log *slog.Logger) *Executor {
	e := &Executor{log: log}
	e.pool = executor.NewPool(e.open, func(c *client) error { c.cl.Close(); return nil }, executor.PoolOptions{})
	return e
}

// client is a pooled franz-go client and the last connection error its
// brokers gave, which a run that timed out quotes.
type client struct {
	cl      *kgo.Client
	lastErr atomic.Pointer[connErr]
}

type connErr struct {
	at  time.Time
	err error
}

// OnBrokerConnect implements kgo.HookBrokerConnect: it keeps the last
// failed connection.
func (c *client) OnBrokerConnect(_ kgo.BrokerMetadata, _ time.Duration, _ net.Conn, err error) {
	if err != nil {
		c.lastErr.Store(&connErr{at: time.Now(), err: err})
	}
}

// Type implements executor.Executor.
func (*Executor) Type() string { return protocol.TaskKafka }

// Validate implements executor.Executor: the definition is there, and the
// connection, when the task has it, can authenticate as it says.
func (*Executor) Validate(t *executor.Task) error {
	if t.Def == nil || t.Def.Kafka == nil {
		return ErrNoSpec
	}
	if t.Conn != nil {
		if _, err := options(t.Conn); err != nil {
			return err
		}
	}
	return nil
}

// Close implements executor.Closer: it closes the pooled clients.
func (e *Executor) Close() error { return e.pool.Close() }

// Len is how many clients the executor's pool holds.
func (e *Executor) Len() int { return e.pool.Len() }

// options are the client options of connection c.
func options(c *protocol.ConnectionSpec) ([]kgo.Opt, error) {
	if c.Kind != "" && c.Kind != protocol.ConnKafka {
		return nil, fmt.Errorf("the connection %q is of kind %s, not kafka", c.Name, c.Kind)
	}
	addrs := c.Addresses()
	if len(addrs) == 0 {
		return nil, fmt.Errorf("the connection %q has no broker address", c.Name)
	}
	opts := []kgo.Opt{
		kgo.SeedBrokers(addrs...),
		kgo.ClientID("schedulemaster"),
		// acks=all is kgo's default, and required by its idempotent
		// producer (on: a retried request cannot duplicate the record);
		// said here so that a change of default cannot weaken it.
		kgo.RequiredAcks(kgo.AllISRAcks()),
		// One record per run: nothing to batch it with.
		kgo.ProducerLinger(0),
		kgo.DialTimeout(dialTimeout),
		kgo.ProduceRequestTimeout(produceTimeout),
		kgo.RetryTimeout(produceTimeout),
		// A topic that does not exist fails the run after one metadata
		// answer saying so, rather than four (the default).
		kgo.UnknownTopicRetries(1),
	}
	tlsCfg, err := executor.TLSConfig(c)
	if err != nil {
		return nil, err
	}
	if tlsCfg != nil {
		opts = append(opts, kgo.DialTLSConfig(tlsCfg))
	}
	mech, err := mechanism(c)
	if err != nil {
		return nil, err
	}
	if mech != nil {
		opts = append(opts, kgo.SASL(mech))
	}
	return opts, nil
}

// mechanism is the SASL mechanism of c, or nil when it does not
// authenticate.
func mechanism(c *protocol.ConnectionSpec) (sasl.Mechanism, error) {
	name := c.Options["sasl"]
	if name == "" && c.User == "" && c.Secret == "" {
		return nil, nil
	}
	if name == "" || c.User == "" {
		return nil, ErrSASLUser
	}
	switch name {
	case "plain":
		return plain.Auth{User: c.User, Pass: c.Secret}.AsMechanism(), nil
	case "scram-sha-256":
		return scram.Auth{User: c.User, Pass: c.Secret}.AsSha256Mechanism(), nil
	case "scram-sha-512":
		return scram.Auth{User: c.User, Pass: c.Secret}.AsSha512Mechanism(), nil
	}
	return nil, fmt.Errorf("sasl %q is not plain, scram-sha-256 or scram-sha-512", name)
}

// open makes the client of c; it connects at its first request.
func (e *Executor) open(_ context.Context, c *protocol.ConnectionSpec) (*client, error) {
	opts, err := options(c)
	if err != nil {
		return nil, err
	}
	cl := &client{}
	kc, err := kgo.NewClient(append(append(opts, kgo.WithHooks(cl)), e.opts...)...)
	if err != nil {
		return nil, fmt.Errorf("kafka client: %w", err)
	}
	cl.cl = kc
	e.log.Debug("kafka client made", "connection", c.Name, "brokers", c.Address)
	return cl, nil
}

// Run implements executor.Executor: it produces the task's record and
// waits for the brokers' ack, or the run's end.
func (e *Executor) Run(ctx context.Context, t *executor.Task, _ io.Writer) executor.Result {
	if t.Def == nil || t.Def.Kafka == nil {
		return failed(ErrNoSpec.Error())
	}
	if t.Conn == nil {
		return failed(executor.ErrNoConnection.Error())
	}
	spec := t.Def.Kafka
	start := time.Now()
	c, release, err := e.pool.Get(ctx, t.Conn)
	if err != nil {
		return ended(ctx, t, err.Error())
	}
	defer release()
	// One cheap request first (on the pooled connection, a broker-only
	// metadata request), so that brokers that are all down or refuse the
	// credentials fail the run at once with their error: the producer
	// itself retries them until the run's timeout.
	if err := c.cl.Ping(ctx); err != nil {
		if ctx.Err() != nil {
			return ended(ctx, t, fmt.Sprintf("%v within %s", ErrNoBroker, within(t)))
		}
		return failed(noBroker(t.Conn, err))
	}
	rec := &kgo.Record{Topic: spec.Topic, Value: []byte(t.Param(spec.Payload))}
	if spec.Key != "" {
		rec.Key = []byte(t.Param(spec.Key))
	}
	for _, k := range slices.Sorted(func(yield func(string) bool) {
		for k := range spec.Headers {
			if !yield(k) {
				return
			}
		}
	}) {
		rec.Headers = append(rec.Headers, kgo.RecordHeader{Key: k, Value: []byte(t.Param(spec.Headers[k]))})
	}
	// Produce with a promise rather than ProduceSync: an idempotent
	// producer does not give up a record already sent (it cannot know
	// whether the broker has it), so the run stops waiting at its end
	// while the client finishes on its own. The record's context is the
	// run's: one not yet sent is dropped then.
	done := make(chan error, 1)
	c.cl.Produce(ctx, rec, func(_ *kgo.Record, err error) { done <- err })
	select {
	case err = <-done:
	case <-ctx.Done():
		err = ctx.Err()
	}
	if err != nil {
		if ctx.Err() != nil {
			msg := fmt.Sprintf("no ack for the record to %s within %s", spec.Topic, within(t))
			if le := c.lastErr.Load(); le != nil && !le.at.Before(start) {
				msg += " (last broker error: " + le.err.Error() + ")"
			}
			return ended(ctx, t, msg)
		}
		return failed(fmt.Sprintf("produce to %s: %v", spec.Topic, err))
	}
	return executor.Result{Result: protocol.ResultSuccess,
		Output: fmt.Sprintf("produced %d bytes to %s partition %d offset %d", len(rec.Value), rec.Topic, rec.Partition, rec.Offset)}
}

// noBroker says why no broker of c answered.
func noBroker(c *protocol.ConnectionSpec, err error) string {
	msg := fmt.Sprintf("%v: %v", ErrNoBroker, err)
	// A broker may close the connection on bad credentials instead of
	// answering SASL_AUTHENTICATION_FAILED: say what is likely.
	if c.Options["sasl"] != "" && (errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF)) {
		msg += " (the broker closed the connection while authenticating: check the user, the secret and the sasl mechanism)"
	}
	return msg
}

// within is the run's timeout, as the messages of a timed out run say it.
func within(t *executor.Task) string {
	if t.Timeout <= 0 {
		return "the run's time"
	}
	return t.Timeout.String()
}

func failed(msg string) executor.Result {
	return executor.Result{Result: protocol.ResultFailed, Output: msg}
}

// ended is the result of a run whose ctx may have ended: a timeout when
// its deadline passed, else failed with msg.
func ended(ctx context.Context, t *executor.Task, msg string) executor.Result {
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return executor.Result{Result: protocol.ResultTimeout, Output: msg}
	}
	return failed(msg)
}

// Test implements executor.Tester: it asks a broker of c for the cluster's
// metadata (brokers and cluster id), with a client of its own.
func (e *Executor) Test(ctx context.Context, c *protocol.ConnectionSpec) (string, error) {
	opts, err := options(c)
	if err != nil {
		return "", err
	}
	cl, err := kgo.NewClient(append(opts, e.opts...)...)
	if err != nil {
		return "", fmt.Errorf("kafka client: %w", err)
	}
	defer cl.Close()
	// Ping tries each broker once: a down or refusing cluster answers at
	// once, where a request would be retried until ctx's end.
	if err := cl.Ping(ctx); err != nil {
		return "", errors.New(noBroker(c, err))
	}
	req := kmsg.NewPtrMetadataRequest()
	req.Topics = []kmsg.MetadataRequestTopic{} // none: brokers and cluster only
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return "", errors.New(noBroker(c, err))
	}
	brokers := make([]string, 0, len(resp.Brokers))
	for _, b := range resp.Brokers {
		brokers = append(brokers, net.JoinHostPort(b.Host, strconv.Itoa(int(b.Port))))
	}
	slices.Sort(brokers)
	noun := "brokers"
	if len(brokers) == 1 {
		noun = "broker"
	}
	msg := fmt.Sprintf("%d %s (%s)", len(brokers), noun, strings.Join(brokers, ", "))
	if resp.ClusterID != nil && *resp.ClusterID != "" {
		msg += ", cluster id " + *resp.ClusterID
	}
	if resp.ControllerID >= 0 {
		msg += ", controller " + strconv.Itoa(int(resp.ControllerID))
	}
	return msg, nil
}
