package mqtttask

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"sync"
	"time"

	mqtt "github.com/eclipse/paho.mqtt.golang"
	"github.com/eclipse/paho.mqtt.golang/packets"

	"github.com/schedulemaster-go/schedulemaster/protocol"
)

// v311Session is an MQTT 3.1.1 client (paho.mqtt.golang), its own
// reconnecting turned off: the link replaces it when a run needs it.
type v311Session struct {
	c  mqtt.Client
	nc net.Conn // the socket, for tests that cut it
}

func connectV311(ctx context.Context, nc net.Conn, c *protocol.ConnectionSpec, id string, log *slog.Logger) (session, string, error) {
	scheme := "tcp"
	if c.TLS != nil && c.TLS.Enabled {
		scheme = "tls"
	}
	// The socket is dialed already (within ctx, TLS included): the client
	// takes it once.
	var once sync.Once
	open := func(*url.URL, mqtt.ClientOptions) (net.Conn, error) {
		var conn net.Conn
		once.Do(func() { conn = nc })
		if conn == nil {
			return nil, errors.New("the connection was used already")
		}
		return conn, nil
	}
	handshake := handshakeTimeout
	if dl, ok := ctx.Deadline(); ok {
		handshake = max(time.Until(dl), time.Millisecond)
	}
	opts := mqtt.NewClientOptions().
		AddBroker(scheme + "://" + c.Address).
		SetClientID(id).
		SetProtocolVersion(4).
		SetCleanSession(true).
		SetAutoReconnect(false).
		SetConnectRetry(false).
		SetKeepAlive(keepAlive).
		SetPingTimeout(10 * time.Second).
		SetWriteTimeout(writeTimeout).
		SetConnectTimeout(handshake).
		SetOrderMatters(false).
		SetCustomOpenConnectionFn(open).
		SetConnectionLostHandler(func(_ mqtt.Client, err error) {
			log.Debug("MQTT 3.1.1 connection lost", "connection", c.Name, "error", err)
		})
	if c.User != "" {
		opts.SetUsername(c.User)
	}
	if c.Secret != "" {
		opts.SetPassword(c.Secret)
	}
	cl := mqtt.NewClient(opts)
	tok := cl.Connect()
	select {
	case <-tok.Done():
	case <-ctx.Done():
		// Closing the socket ends the handshake now; a client that
		// connected all the same is disconnected once it says so.
		_ = nc.Close()
		go func() {
			<-tok.Done()
			if tok.Error() == nil {
				cl.Disconnect(0)
			}
		}()
		return nil, "", fmt.Errorf("no CONNACK from %s: %w", c.Address, ctx.Err())
	}
	if err := tok.Error(); err != nil {
		ct, _ := tok.(*mqtt.ConnectToken)
		if ct != nil && ct.ReturnCode() != packets.Accepted && ct.ReturnCode() != packets.ErrNetworkError {
			return nil, "", fmt.Errorf("%w: %s (return code %d)", ErrRefused, packets.ConnackReturnCodes[ct.ReturnCode()], ct.ReturnCode())
		}
		_ = nc.Close()
		return nil, "", fmt.Errorf("MQTT 3.1.1 handshake with %s: %w", c.Address, err)
	}
	return &v311Session{c: cl, nc: nc}, "MQTT 3.1.1: connected", nil
}

func (s *v311Session) alive() bool { return s.c.IsConnectionOpen() }

func (s *v311Session) close() {
	// Disconnect waits up to its quiesce time for work in flight; runs
	// using this session see their publish fail.
	go s.c.Disconnect(100)
}

func (s *v311Session) publish(ctx context.Context, m message) (string, error) {
	// Publish may wait (up to writeTimeout) for the client's send queue:
	// await returns at ctx all the same.
	tok, err := await(ctx, func() (mqtt.Token, error) {
		return s.c.Publish(m.topic, m.qos, m.retain, m.payload), nil
	})
	if err != nil {
		return "", err
	}
	select {
	case <-tok.Done():
	case <-ctx.Done():
		return "", ctx.Err()
	}
	if err := tok.Error(); err != nil {
		return "", err
	}
	switch m.qos {
	case 0:
		return "sent", nil
	case 1:
		return "acknowledged", nil
	default:
		return "completed", nil
	}
}
