package views

import (
	"context"
	"slices"
	"strings"

	"github.com/schedulemaster-go/schedulemaster/protocol"
)

// NATSFields are a nats task's fields as typed.
type NATSFields struct {
	Connection, Mode, Subject, Payload string
	Headers                            string // "Name: value" lines
}

// AMQPFields are an amqp task's fields as typed.
type AMQPFields struct {
	Connection, Exchange, RoutingKey, Payload, ContentType string
	Headers                                                string // "Name: value" lines
	Transient                                              bool
}

// MQTTFields are an mqtt task's fields as typed.
type MQTTFields struct {
	Connection, Topic, Payload string
	QoS                        string // 0, 1 or 2
	Retain                     bool
}

// RedisFields are a redis task's fields as typed.
type RedisFields struct {
	Connection, Command, Key, Payload string
	Fields                            string // "Name: value" lines (xadd)
	Args                              string // one per line (command)
}

// KafkaFields are a kafka task's fields as typed.
type KafkaFields struct {
	Connection, Topic, Key, Payload string
	Headers                         string // "Name: value" lines
}

// SQLFields are an sql task's fields as typed.
type SQLFields struct {
	Connection, Statement string
	Script                bool
}

// GRPCFields are a grpc task's fields as typed.
type GRPCFields struct {
	Connection, Method, Request, DescriptorSet string
	Metadata                                   string // "Name: value" lines
}

// TypeFields are the fields of the task types beyond HTTP and shell, as
// typed: only those of the chosen type are read.
type TypeFields struct {
	NATS  NATSFields
	AMQP  AMQPFields
	MQTT  MQTTFields
	Redis RedisFields
	Kafka KafkaFields
	SQL   SQLFields
	GRPC  GRPCFields
}

// ConnOption is a connection the task form offers for the chosen type.
type ConnOption struct {
	Name string
	Kind string
	// Project is its project, "" for one of every project.
	Project string
}

// TypeRunnersVM says which running workers run a task type, under the
// task form's type select.
type TypeRunnersVM struct {
	// Type is the task type; "" (or http, which every worker runs) shows
	// nothing.
	Type string
	// Run, Unknown and Refuse are the running workers that run it, could
	// not say, and do not.
	Run, Unknown, Refuse []string
}

// Flag is the worker option that allows the type.
func (vm TypeRunnersVM) Flag() string { return TypeFlag(vm.Type) }

// TypeFlag is the worker option that allows tasks of typ.
func TypeFlag(typ string) string {
	if typ == protocol.TaskShell {
		return "--allow-shell"
	}
	return "--allow-types " + typ
}

// connectionFor is the connection name the chosen type's fields hold.
func (f TypeFields) connectionFor(typ string) string {
	switch typ {
	case protocol.TaskNATS:
		return f.NATS.Connection
	case protocol.TaskAMQP:
		return f.AMQP.Connection
	case protocol.TaskMQTT:
		return f.MQTT.Connection
	case protocol.TaskRedis:
		return f.Redis.Connection
	case protocol.TaskKafka:
		return f.Kafka.Connection
	case protocol.TaskSQL:
		return f.SQL.Connection
	case protocol.TaskGRPC:
		return f.GRPC.Connection
	}
	return ""
}

// connChoices are the connections a select of type typ offers: those given,
// and the one chosen even when it is not among them (deleted, of another
// kind), so that an edit shows what the task names.
func connChoices(conns []ConnOption, chosen string) []ConnOption {
	if chosen == "" || slices.ContainsFunc(conns, func(c ConnOption) bool { return c.Name == chosen }) {
		return conns
	}
	return append(slices.Clip(conns), ConnOption{Name: chosen})
}

// connOptionLabel names a connection in the select: its name, its kind and
// where it is defined.
func connOptionLabel(ctx context.Context, c ConnOption) string {
	if c.Kind == "" {
		return c.Name + " " + T(ctx, "ConnUnknownHere")
	}
	where := c.Project
	if where == "" {
		where = T(ctx, "ConnAllProjects")
	}
	return c.Name + " (" + ConnKindName(ctx, c.Kind) + ", " + where + ")"
}

// newConnectionURL is where the task form's link defines a connection for
// tasks of typ.
func newConnectionURL(typ string) string {
	kinds := protocol.ConnectionKindsOf(typ)
	if len(kinds) == 0 {
		return "/connections/new"
	}
	return "/connections/new?kind=" + kinds[0]
}

// TaskTypeName names a task type in the reader's language (the type
// select's option).
func TaskTypeName(ctx context.Context, typ string) string {
	if id, ok := taskTypeIDs[typ]; ok {
		return T(ctx, id)
	}
	return typ
}

var taskTypeIDs = map[string]string{
	protocol.TaskHTTP: "OptTypeHTTP", protocol.TaskShell: "OptTypeShell", protocol.TaskNATS: "OptTypeNATS",
	protocol.TaskAMQP: "OptTypeAMQP", protocol.TaskMQTT: "OptTypeMQTT", protocol.TaskRedis: "OptTypeRedis",
	protocol.TaskKafka: "OptTypeKafka", protocol.TaskSQL: "OptTypeSQL", protocol.TaskGRPC: "OptTypeGRPC",
}

// taskTypeHintIDs are the lines of the type select's hint, one per type.
var taskTypeHintIDs = map[string]string{
	protocol.TaskHTTP: "TaskTypeHTTP", protocol.TaskShell: "TaskTypeShell", protocol.TaskNATS: "TaskTypeNATS",
	protocol.TaskAMQP: "TaskTypeAMQP", protocol.TaskMQTT: "TaskTypeMQTT", protocol.TaskRedis: "TaskTypeRedis",
	protocol.TaskKafka: "TaskTypeKafka", protocol.TaskSQL: "TaskTypeSQL", protocol.TaskGRPC: "TaskTypeGRPC",
}

// ConnKindName names a connection kind (the product it reaches).
func ConnKindName(ctx context.Context, kind string) string {
	if id, ok := connKindIDs[kind]; ok {
		return T(ctx, id)
	}
	return kind
}

var connKindIDs = map[string]string{
	protocol.ConnNATS: "ConnKindNATS", protocol.ConnAMQP: "ConnKindAMQP", protocol.ConnMQTT: "ConnKindMQTT",
	protocol.ConnRedis: "ConnKindRedis", protocol.ConnKafka: "ConnKindKafka", protocol.ConnPostgres: "ConnKindPostgres",
	protocol.ConnMySQL: "ConnKindMySQL", protocol.ConnGRPC: "ConnKindGRPC",
}

// connKindsText lists the kinds a task type's connection may be, for the
// hint under its select ("postgres or mysql").
func connKindsText(ctx context.Context, typ string) string {
	var names []string
	for _, k := range protocol.ConnectionKindsOf(typ) {
		names = append(names, ConnKindName(ctx, k))
	}
	return strings.Join(names, T(ctx, "ListOr"))
}
