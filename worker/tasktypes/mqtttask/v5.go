package mqtttask

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strings"

	"github.com/eclipse/paho.golang/packets"
	"github.com/eclipse/paho.golang/paho"

	"github.com/schedulemaster-go/schedulemaster/protocol"
)

// v5Session is an MQTT 5 client (paho.golang's paho: the pool and link do
// what autopaho would, reconnecting only when a run needs it).
type v5Session struct {
	c  *paho.Client
	nc net.Conn // the socket, for tests that cut it
}

func connectV5(ctx context.Context, nc net.Conn, c *protocol.ConnectionSpec, id string, log *slog.Logger) (session, string, error) {
	cl := paho.NewClient(paho.ClientConfig{
		Conn:          &deadlineConn{Conn: nc},
		PacketTimeout: ackTimeout,
		OnClientError: func(err error) {
			log.Debug("MQTT 5 connection ended", "connection", c.Name, "error", err)
		},
		OnServerDisconnect: func(d *paho.Disconnect) {
			log.Info("the MQTT broker disconnected", "connection", c.Name, "reason", v5Reason(d.ReasonCode, disconnectReason(d)))
		},
	})
	cp := &paho.Connect{ClientID: id, CleanStart: true, KeepAlive: uint16(keepAlive.Seconds())}
	if c.User != "" {
		cp.Username, cp.UsernameFlag = c.User, true
	}
	if c.Secret != "" {
		cp.Password, cp.PasswordFlag = []byte(c.Secret), true
	}
	ca, err := cl.Connect(ctx, cp)
	if err != nil {
		// paho closed the connection.
		if ca != nil && ca.ReasonCode >= 0x80 {
			return nil, "", fmt.Errorf("%w: %s", ErrRefused, connackReason(ca))
		}
		if ctx.Err() != nil {
			return nil, "", fmt.Errorf("no CONNACK from %s: %w", c.Address, ctx.Err())
		}
		return nil, "", fmt.Errorf("MQTT 5 handshake with %s: %w", c.Address, err)
	}
	return &v5Session{c: cl, nc: nc}, connackSummary(ca), nil
}

func (s *v5Session) alive() bool {
	select {
	case <-s.c.Done():
		return false
	default:
		return true
	}
}

func (s *v5Session) close() {
	// Disconnect closes the socket whether or not the packet went out.
	_ = s.c.Disconnect(&paho.Disconnect{ReasonCode: 0})
}

func (s *v5Session) publish(ctx context.Context, m message) (string, error) {
	p := &paho.Publish{Topic: m.topic, Payload: m.payload, QoS: m.qos, Retain: m.retain}
	resp, err := await(ctx, func() (*paho.PublishResponse, error) { return s.c.Publish(ctx, p) })
	if err != nil {
		if resp != nil && resp.ReasonCode >= 0x80 {
			return "", fmt.Errorf("%w: %s", ErrRejected, v5Reason(resp.ReasonCode, pubReason(resp)))
		}
		return "", err
	}
	if m.qos == 0 {
		return "sent", nil
	}
	if resp == nil {
		return "", errors.New("no answer from the broker")
	}
	if resp.ReasonCode >= 0x80 {
		// A PUBREC with an error ends a QoS 2 flow without an error from
		// paho.
		return "", fmt.Errorf("%w: %s", ErrRejected, v5Reason(resp.ReasonCode, pubReason(resp)))
	}
	done := "acknowledged"
	if m.qos == 2 {
		done = "completed"
	}
	if resp.ReasonCode != 0 {
		done += ", " + v5Reason(resp.ReasonCode, pubReason(resp))
	}
	return done, nil
}

// v5Reason names an MQTT 5 reason code of PUBACK, PUBREC, PUBCOMP or
// DISCONNECT, with the broker's reason string when it sent one.
func v5Reason(code byte, brokerSays string) string {
	name, ok := map[byte]string{
		0x00: "success", 0x04: "disconnect with will message", 0x10: "no matching subscribers",
		0x80: "unspecified error", 0x81: "malformed packet", 0x82: "protocol error",
		0x83: "implementation specific error", 0x87: "not authorized", 0x89: "server busy",
		0x8B: "server shutting down", 0x8D: "keep alive timeout", 0x8E: "session taken over",
		0x90: "topic name invalid", 0x91: "packet identifier in use", 0x92: "packet identifier not found",
		0x93: "receive maximum exceeded", 0x95: "packet too large", 0x96: "message rate too high",
		0x97: "quota exceeded", 0x98: "administrative action", 0x99: "payload format invalid",
		0x9A: "retain not supported", 0x9B: "QoS not supported", 0x9C: "use another server",
		0x9D: "server moved", 0x9F: "connection rate exceeded",
	}[code]
	if !ok {
		name = "reason code"
	}
	s := fmt.Sprintf("%s (0x%02X)", name, code)
	if brokerSays = strings.TrimSpace(brokerSays); brokerSays != "" {
		s += ": " + brokerSays
	}
	return s
}

func pubReason(r *paho.PublishResponse) string {
	if r.Properties != nil {
		return r.Properties.ReasonString
	}
	return ""
}

func disconnectReason(d *paho.Disconnect) string {
	if d.Properties != nil {
		return d.Properties.ReasonString
	}
	return ""
}

// connackReason is why a CONNACK refused: the code's name, and the
// broker's reason string when it sent one.
func connackReason(ca *paho.Connack) string {
	name, _, _ := strings.Cut((&packets.Connack{ReasonCode: ca.ReasonCode}).Reason(), " - ")
	if name == "" {
		name = "reason code"
	}
	s := fmt.Sprintf("%s (0x%02X)", name, ca.ReasonCode)
	if ca.Properties != nil && strings.TrimSpace(ca.Properties.ReasonString) != "" {
		s += ": " + strings.TrimSpace(ca.Properties.ReasonString)
	}
	return s
}

// connackSummary is what an MQTT 5 broker's CONNACK said of itself: the
// properties it set, for Test.
func connackSummary(ca *paho.Connack) string {
	p := ca.Properties
	if p == nil {
		return "MQTT 5: connected (the broker sent no properties)"
	}
	var parts []string
	if p.MaximumQoS != nil {
		parts = append(parts, fmt.Sprintf("maximum QoS %d", *p.MaximumQoS))
	}
	if !p.RetainAvailable {
		parts = append(parts, "retain not available")
	}
	if p.ReceiveMaximum != nil {
		parts = append(parts, fmt.Sprintf("receive maximum %d", *p.ReceiveMaximum))
	}
	if p.MaximumPacketSize != nil {
		parts = append(parts, fmt.Sprintf("maximum packet size %d bytes", *p.MaximumPacketSize))
	}
	if p.TopicAliasMaximum != nil {
		parts = append(parts, fmt.Sprintf("topic alias maximum %d", *p.TopicAliasMaximum))
	}
	if p.ServerKeepAlive != nil {
		parts = append(parts, fmt.Sprintf("server keep alive %ds", *p.ServerKeepAlive))
	}
	if !p.WildcardSubAvailable {
		parts = append(parts, "no wildcard subscriptions")
	}
	if !p.SharedSubAvailable {
		parts = append(parts, "no shared subscriptions")
	}
	if p.AssignedClientID != "" {
		parts = append(parts, "assigned client id "+p.AssignedClientID)
	}
	if p.ResponseInfo != "" {
		parts = append(parts, "response information "+p.ResponseInfo)
	}
	if p.ReasonString != "" {
		parts = append(parts, "reason: "+p.ReasonString)
	}
	if len(parts) == 0 {
		return "MQTT 5: connected (the broker set no limits)"
	}
	return "MQTT 5: connected; broker properties: " + strings.Join(parts, ", ")
}
