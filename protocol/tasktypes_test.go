package protocol_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/schedulemaster-go/schedulemaster/protocol"
)

// fieldOf returns the message of field in err's FieldErrors ("" when none).
func fieldOf(t *testing.T, err error, field string) string {
	t.Helper()
	var fe protocol.FieldErrors
	if err == nil || !errors.As(err, &fe) {
		return ""
	}
	return fe[field]
}

// TestConnectionSpecRefusals: each bad connection is refused with the field
// named, a good one of each kind passes, and normalizing trims and lowers.
func TestConnectionSpecRefusals(t *testing.T) {
	t.Parallel()
	good := func() protocol.ConnectionSpec {
		return protocol.ConnectionSpec{Name: "bus", Kind: protocol.ConnNATS, Address: "127.0.0.1:4222,nats-2:4222", User: "u", Secret: "s"}
	}
	for _, kind := range protocol.ConnectionKinds() {
		c := good()
		c.Kind, c.Address = kind, "db.local:5432"
		if kind == protocol.ConnPostgres || kind == protocol.ConnMySQL {
			c.Database = "app"
		}
		if err := c.Validate(); err != nil {
			t.Errorf("a good %s connection: %v", kind, err)
		}
	}
	for _, tc := range []struct {
		field string
		edit  func(c *protocol.ConnectionSpec)
	}{
		{"name", func(c *protocol.ConnectionSpec) { c.Name = "" }},
		{"name", func(c *protocol.ConnectionSpec) { c.Name = "has space" }},
		{"name", func(c *protocol.ConnectionSpec) { c.Name = "bad\x00" }},
		{"kind", func(c *protocol.ConnectionSpec) { c.Kind = "ftp" }},
		{"address", func(c *protocol.ConnectionSpec) { c.Address = "" }},
		{"address", func(c *protocol.ConnectionSpec) { c.Address = "nats://127.0.0.1:4222" }},
		{"address", func(c *protocol.ConnectionSpec) { c.Address = "127.0.0.1:99999" }},
		{"address", func(c *protocol.ConnectionSpec) { c.Address = "127.0.0.1" }},
		{"address", func(c *protocol.ConnectionSpec) { c.Address = strings.Repeat("a", 1000) + ":1" }},
		{"address", func(c *protocol.ConnectionSpec) { c.Kind, c.Address = protocol.ConnRedis, "a:1,b:2" }},
		{"database", func(c *protocol.ConnectionSpec) { c.Kind = protocol.ConnPostgres }},
		{"database", func(c *protocol.ConnectionSpec) { c.Kind, c.Database = protocol.ConnRedis, "x" }},
		{"user", func(c *protocol.ConnectionSpec) { c.User = "a\nb" }},
		{"secret", func(c *protocol.ConnectionSpec) { c.Secret = strings.Repeat("s", protocol.MaxConnectionSecret+1) }},
		{"secret", func(c *protocol.ConnectionSpec) { c.Secret = "\xff" }},
		{"tls.ca", func(c *protocol.ConnectionSpec) { c.TLS = &protocol.ConnectionTLS{Enabled: true, CA: "not pem"} }},
		{"options", func(c *protocol.ConnectionSpec) { c.Options = map[string]string{"protocol_version": "5"} }},
		{"options", func(c *protocol.ConnectionSpec) {
			c.Kind, c.Options = protocol.ConnMQTT, map[string]string{"protocol_version": "4"}
		}},
	} {
		c := good()
		tc.edit(&c)
		c.Normalize()
		if msg := fieldOf(t, c.Validate(), tc.field); msg == "" {
			t.Errorf("%+v: no refusal of %s", c, tc.field)
		}
	}
	c := protocol.ConnectionSpec{Name: " bus ", Kind: " NATS ", Address: " a:1 , ,b:2 ", Options: map[string]string{" Protocol_Version ": " 5 "}}
	c.Normalize()
	if c.Name != "bus" || c.Kind != "nats" || c.Address != "a:1,b:2" || c.Options["protocol_version"] != "5" || len(c.Options) != 1 {
		t.Fatalf("normalized: %+v", c)
	}
}

// TestTaskTypeDefinitions: a task of each type beyond HTTP and shell with
// its definition passes; without it, with another type's, or with a bad
// field, it is refused naming the field.
func TestTaskTypeDefinitions(t *testing.T) {
	t.Parallel()
	now := time.Now()
	base := func(typ string) protocol.TaskDef {
		d := validHTTP()
		d.Type, d.HTTP = typ, nil
		return d
	}
	specs := map[string]func(d *protocol.TaskDef){
		protocol.TaskNATS: func(d *protocol.TaskDef) { d.NATS = &protocol.NATSSpec{Connection: "c", Subject: "a.b"} },
		protocol.TaskAMQP: func(d *protocol.TaskDef) { d.AMQP = &protocol.AMQPSpec{Connection: "c", RoutingKey: "q"} },
		protocol.TaskMQTT: func(d *protocol.TaskDef) { d.MQTT = &protocol.MQTTSpec{Connection: "c", Topic: "a/b", QoS: 1} },
		protocol.TaskRedis: func(d *protocol.TaskDef) {
			d.Redis = &protocol.RedisSpec{Connection: "c", Command: "publish", Key: "k"}
		},
		protocol.TaskKafka: func(d *protocol.TaskDef) { d.Kafka = &protocol.KafkaSpec{Connection: "c", Topic: "orders"} },
		protocol.TaskSQL:   func(d *protocol.TaskDef) { d.SQL = &protocol.SQLSpec{Connection: "c", Statement: "SELECT 1"} },
		protocol.TaskGRPC:  func(d *protocol.TaskDef) { d.GRPC = &protocol.GRPCSpec{Connection: "c", Method: "a.B/C"} },
	}
	for typ, set := range specs {
		d := base(typ)
		set(&d)
		d.Normalize()
		if err := d.Validate(now); err != nil {
			t.Errorf("a good %s task: %v", typ, err)
		}
		if d.Spec() == nil || d.ConnectionName() != "c" || d.Spec().Target() == "" {
			t.Errorf("%s: Spec %v, connection %q", typ, d.Spec(), d.ConnectionName())
		}
		bare := base(typ)
		if fieldOf(t, bare.Validate(now), typ) == "" {
			t.Errorf("a %s task without its definition is not refused", typ)
		}
		mixed := d
		mixed.HTTP = &protocol.HTTPSpec{Method: "GET", URL: "http://x/"}
		if fieldOf(t, mixed.Validate(now), "http") == "" {
			t.Errorf("a %s task with an http definition is not refused", typ)
		}
	}
	for _, tc := range []struct {
		field string
		def   func(d *protocol.TaskDef)
	}{
		{"nats.subject", func(d *protocol.TaskDef) { d.NATS = &protocol.NATSSpec{Connection: "c", Subject: "a.*"} }},
		{"nats.mode", func(d *protocol.TaskDef) { d.NATS = &protocol.NATSSpec{Connection: "c", Subject: "a", Mode: "push"} }},
		{"nats.connection", func(d *protocol.TaskDef) { d.NATS = &protocol.NATSSpec{Subject: "a"} }},
		{"nats.payload", func(d *protocol.TaskDef) {
			d.NATS = &protocol.NATSSpec{Connection: "c", Subject: "a", Payload: strings.Repeat("x", 256<<10+1)}
		}},
		{"nats.headers", func(d *protocol.TaskDef) {
			d.NATS = &protocol.NATSSpec{Connection: "c", Subject: "a", Headers: map[string]string{"X": "a\r\nb"}}
		}},
		{"amqp.routing_key", func(d *protocol.TaskDef) { d.AMQP = &protocol.AMQPSpec{Connection: "c"} }},
		{"mqtt.qos", func(d *protocol.TaskDef) { d.MQTT = &protocol.MQTTSpec{Connection: "c", Topic: "a", QoS: 3} }},
		{"mqtt.topic", func(d *protocol.TaskDef) { d.MQTT = &protocol.MQTTSpec{Connection: "c", Topic: "a/#"} }},
		{"redis.args", func(d *protocol.TaskDef) {
			d.Redis = &protocol.RedisSpec{Connection: "c", Command: "command", Args: []string{"FLUSHALL"}}
		}},
		{"redis.command", func(d *protocol.TaskDef) { d.Redis = &protocol.RedisSpec{Connection: "c", Command: "eval", Key: "k"} }},
		{"kafka.topic", func(d *protocol.TaskDef) { d.Kafka = &protocol.KafkaSpec{Connection: "c", Topic: "bad topic"} }},
		{"sql.statement", func(d *protocol.TaskDef) { d.SQL = &protocol.SQLSpec{Connection: "c", Statement: "SELECT '\x00'"} }},
		{"grpc.method", func(d *protocol.TaskDef) { d.GRPC = &protocol.GRPCSpec{Connection: "c", Method: "nomethod"} }},
		{"grpc.request", func(d *protocol.TaskDef) { d.GRPC = &protocol.GRPCSpec{Connection: "c", Method: "a.B/C", Request: "{"} }},
	} {
		d := base(strings.Split(tc.field, ".")[0])
		tc.def(&d)
		d.Normalize()
		if fieldOf(t, d.Validate(now), tc.field) == "" {
			t.Errorf("no refusal of %s", tc.field)
		}
	}
}
