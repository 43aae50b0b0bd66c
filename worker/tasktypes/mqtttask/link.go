package mqtttask

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/hex"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"time"

	"github.com/schedulemaster-go/schedulemaster/protocol"
	"github.com/schedulemaster-go/schedulemaster/worker/executor"
)

// Bounds of a connection to a broker.
const (
	// dialTimeout bounds the TCP (and TLS) dial when ctx allows longer.
	dialTimeout = 10 * time.Second
	// handshakeTimeout bounds CONNECT/CONNACK when ctx allows longer.
	handshakeTimeout = 10 * time.Second
	// writeTimeout bounds one write on the socket: a broker that stops
	// reading must not hold the writers (and the pinger) for ever; the
	// connection dies and a later run replaces it.
	writeTimeout = 10 * time.Second
	// keepAlive makes the client ping an idle broker, so a silently dead
	// connection is noticed within about 1.5 times it.
	keepAlive = 30 * time.Second
	// ackTimeout bounds the wait for PUBACK/PUBCOMP when ctx allows longer.
	ackTimeout = 30 * time.Second
)

// message is one publish, params expanded.
type message struct {
	topic   string
	payload []byte
	qos     byte
	retain  bool
}

// session is one connected MQTT client of either protocol version.
type session interface {
	// publish sends m and waits for what its QoS requires; it returns how
	// the broker answered ("completed", "acknowledged", ...).
	publish(ctx context.Context, m message) (string, error)
	// alive says the connection is still up.
	alive() bool
	// close disconnects; it does not wait for the broker.
	close()
}

// link is the pooled client of one connection: the session it holds now,
// replaced by the next run that finds it dead (one run at a time does
// so, the others wait for it within their ctx).
type link struct {
	conn protocol.ConnectionSpec
	v311 bool
	log  *slog.Logger

	turn chan struct{} // one slot: who (re)connects; waiting respects ctx

	mu     sync.Mutex
	cur    session
	closed bool
}

func newLink(c *protocol.ConnectionSpec, log *slog.Logger) (*link, error) {
	v311, err := isV311(c)
	if err != nil {
		return nil, err
	}
	return &link{conn: *c, v311: v311, log: log, turn: make(chan struct{}, 1)}, nil
}

// isV311 reads the connection's protocol_version option: "5" (or none)
// or "3.1.1".
func isV311(c *protocol.ConnectionSpec) (bool, error) {
	switch v := c.Options["protocol_version"]; v {
	case "", "5":
		return false, nil
	case "3.1.1":
		return true, nil
	default:
		return false, fmt.Errorf("protocol_version %q is not 3.1.1 or 5", v)
	}
}

// session returns the link's live session, connecting a new one when it
// has none or its connection was lost.
func (l *link) session(ctx context.Context) (session, error) {
	if s := l.live(); s != nil {
		return s, nil
	}
	select {
	case l.turn <- struct{}{}:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	defer func() { <-l.turn }()
	// Another run may have reconnected while this one waited.
	if s := l.live(); s != nil {
		return s, nil
	}
	l.mu.Lock()
	old, closed := l.cur, l.closed
	l.cur = nil
	l.mu.Unlock()
	if closed {
		return nil, ErrClosed
	}
	if old != nil {
		l.log.Info("MQTT connection lost: connecting again", "connection", l.conn.Name, "address", l.conn.Address)
		go old.close() // it is dead: nothing to wait for
	}
	s, _, err := connect(ctx, &l.conn, l.v311, l.log)
	if err != nil {
		return nil, err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		go s.close()
		return nil, ErrClosed
	}
	l.cur = s
	return s, nil
}

func (l *link) live() session {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.cur != nil && l.cur.alive() {
		return l.cur
	}
	return nil
}

// close disconnects the link's session; a run using it sees its publish
// fail.
func (l *link) close() error {
	l.mu.Lock()
	s := l.cur
	l.cur, l.closed = nil, true
	l.mu.Unlock()
	if s != nil {
		s.close()
	}
	return nil
}

// connect dials c and makes the MQTT handshake of its version; it returns
// the session and what the broker's CONNACK said, for Test.
func connect(ctx context.Context, c *protocol.ConnectionSpec, v311 bool, log *slog.Logger) (session, string, error) {
	nc, err := dial(ctx, c)
	if err != nil {
		return nil, "", err
	}
	id, err := clientID()
	if err != nil {
		_ = nc.Close()
		return nil, "", err
	}
	hctx, cancel := context.WithTimeout(ctx, handshakeTimeout)
	defer cancel()
	if v311 {
		return connectV311(hctx, nc, c, id, log)
	}
	return connectV5(hctx, nc, c, id, log)
}

// dial opens the TCP connection to c's address, with TLS when c says so,
// within ctx.
func dial(ctx context.Context, c *protocol.ConnectionSpec) (net.Conn, error) {
	tlsCfg, err := executor.TLSConfig(c)
	if err != nil {
		return nil, err
	}
	d := &net.Dialer{Timeout: dialTimeout, KeepAlive: keepAlive}
	if tlsCfg != nil {
		td := &tls.Dialer{NetDialer: d, Config: tlsCfg}
		return td.DialContext(ctx, "tcp", c.Address)
	}
	return d.DialContext(ctx, "tcp", c.Address)
}

// clientID is a fresh client id: "sm" and 20 hex digits, 22 characters of
// letters and digits, which every 3.1.1 broker must accept (MQTT-3.1.3-5),
// unique per connection so two workers never take over each other's.
func clientID() (string, error) {
	var b [10]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("client id: %w", err)
	}
	return "sm" + hex.EncodeToString(b[:]), nil
}

// deadlineConn bounds every write and serializes writers (paho's packets
// lock a net.Conn that is a sync.Locker around each packet), so a write
// that cannot progress ends the connection instead of blocking for ever.
type deadlineConn struct {
	net.Conn
	sync.Mutex
}

func (c *deadlineConn) Write(p []byte) (int, error) {
	_ = c.SetWriteDeadline(time.Now().Add(writeTimeout))
	return c.Conn.Write(p)
}

// await runs f and returns its answer, or ctx's error when ctx ends first:
// f may block in a socket write (bounded by writeTimeout) that ctx cannot
// end, and the run must not wait for it.
func await[T any](ctx context.Context, f func() (T, error)) (T, error) {
	type answer struct {
		v   T
		err error
	}
	ch := make(chan answer, 1)
	go func() {
		v, err := f()
		ch <- answer{v, err}
	}()
	select {
	case a := <-ch:
		return a.v, a.err
	case <-ctx.Done():
		var zero T
		return zero, ctx.Err()
	}
}
