package protocol

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strings"
)

// Task types beyond HTTP and shell: each reaches another system through a
// named connection, and a worker runs it only when its operator allows the
// type (--allow-types).
const (
	TaskNATS  = "nats"
	TaskAMQP  = "amqp"
	TaskMQTT  = "mqtt"
	TaskRedis = "redis"
	TaskKafka = "kafka"
	TaskSQL   = "sql"
	TaskGRPC  = "grpc"
)

// TaskTypes lists every task type, in the order forms offer them.
func TaskTypes() []string {
	return []string{TaskHTTP, TaskShell, TaskNATS, TaskAMQP, TaskMQTT, TaskRedis, TaskKafka, TaskSQL, TaskGRPC}
}

// GatedTypes lists the task types a worker runs only when its operator
// allows them (--allow-types); shell has its own flag, --allow-shell.
func GatedTypes() []string {
	return []string{TaskNATS, TaskAMQP, TaskMQTT, TaskRedis, TaskKafka, TaskSQL, TaskGRPC}
}

// IsGatedType reports whether typ is one of GatedTypes.
func IsGatedType(typ string) bool { return slices.Contains(GatedTypes(), typ) }

// Limits on the definitions of the types beyond HTTP and shell.
const (
	maxPayload       = 256 << 10
	maxSubject       = 256
	maxStatement     = 64 << 10
	maxDescriptorSet = 1 << 20
)

// TypeSpec is the definition of a task of a type beyond HTTP and shell:
// what the protocol, the store, export/apply, the API and the console
// treat alike whatever the type.
type TypeSpec interface {
	// Conn names the connection the task uses.
	Conn() string
	// Target is the one line of what the task reaches that its page shows:
	// the subject, exchange, topic, key or the statement's first line.
	Target() string
	normalize()
	// validate records what is wrong under field names prefixed by the
	// type's JSON name ("nats.subject").
	validate(fe FieldErrors)
}

// Spec returns the definition of d's type when it is one beyond HTTP and
// shell and is present, else nil.
func (d *TaskDef) Spec() TypeSpec {
	switch d.Type {
	case TaskNATS:
		if d.NATS != nil {
			return d.NATS
		}
	case TaskAMQP:
		if d.AMQP != nil {
			return d.AMQP
		}
	case TaskMQTT:
		if d.MQTT != nil {
			return d.MQTT
		}
	case TaskRedis:
		if d.Redis != nil {
			return d.Redis
		}
	case TaskKafka:
		if d.Kafka != nil {
			return d.Kafka
		}
	case TaskSQL:
		if d.SQL != nil {
			return d.SQL
		}
	case TaskGRPC:
		if d.GRPC != nil {
			return d.GRPC
		}
	}
	return nil
}

// specsPresent lists the JSON names of the type definitions d holds.
func (d *TaskDef) specsPresent() []string {
	var out []string
	for name, present := range map[string]bool{
		TaskHTTP: d.HTTP != nil, TaskShell: d.Shell != nil, TaskNATS: d.NATS != nil, TaskAMQP: d.AMQP != nil,
		TaskMQTT: d.MQTT != nil, TaskRedis: d.Redis != nil, TaskKafka: d.Kafka != nil, TaskSQL: d.SQL != nil, TaskGRPC: d.GRPC != nil,
	} {
		if present {
			out = append(out, name)
		}
	}
	slices.Sort(out)
	return out
}

// ConnectionName is the connection d's type uses, or "".
func (d *TaskDef) ConnectionName() string {
	if s := d.Spec(); s != nil {
		return s.Conn()
	}
	return ""
}

// NATSSpec publishes to NATS: core NATS, JetStream with the stream's ack
// awaited, or a request whose reply is the run's output.
type NATSSpec struct {
	Connection string `json:"connection"`
	// Mode is NATSPublish (the default), NATSJetStream or NATSRequest.
	Mode    string            `json:"mode,omitempty"`
	Subject string            `json:"subject"`
	Payload string            `json:"payload,omitempty"`
	Headers map[string]string `json:"headers,omitempty"`
}

// NATS modes.
const (
	NATSPublish   = "publish"
	NATSJetStream = "jetstream"
	NATSRequest   = "request"
)

// Conn implements TypeSpec.
func (s *NATSSpec) Conn() string { return s.Connection }

// Target implements TypeSpec.
func (s *NATSSpec) Target() string { return s.Subject }

func (s *NATSSpec) normalize() {
	s.Connection, s.Subject = strings.TrimSpace(s.Connection), strings.TrimSpace(s.Subject)
	if s.Mode = strings.ToLower(strings.TrimSpace(s.Mode)); s.Mode == "" {
		s.Mode = NATSPublish
	}
}

func (s *NATSSpec) validate(fe FieldErrors) {
	checkConn(fe, "nats", s.Connection)
	if !slices.Contains([]string{NATSPublish, NATSJetStream, NATSRequest}, s.Mode) {
		fe["nats.mode"] = fmt.Sprintf("%q is not publish, jetstream or request", s.Mode)
	}
	switch {
	case s.Subject == "":
		fe["nats.subject"] = "is required"
	case len(s.Subject) > maxSubject:
		fe["nats.subject"] = fmt.Sprintf("is longer than %d bytes", maxSubject)
	case strings.ContainsAny(s.Subject, " \t\r\n\x00*>") || strings.HasPrefix(s.Subject, ".") || strings.HasSuffix(s.Subject, ".") || strings.Contains(s.Subject, ".."):
		fe["nats.subject"] = "must be tokens separated by dots, without spaces or the wildcards * and >"
	}
	checkPayload(fe, "nats.payload", s.Payload)
	checkHeaders(fe, "nats.headers", s.Headers)
}

// AMQPSpec publishes to RabbitMQ (AMQP 0-9-1) with publisher confirms.
type AMQPSpec struct {
	Connection string `json:"connection"`
	// Exchange is the exchange to publish to; "" is the default exchange,
	// which routes by queue name (RoutingKey).
	Exchange    string            `json:"exchange,omitempty"`
	RoutingKey  string            `json:"routing_key,omitempty"`
	Payload     string            `json:"payload,omitempty"`
	ContentType string            `json:"content_type,omitempty"`
	Headers     map[string]string `json:"headers,omitempty"`
	// Transient publishes without persistent delivery (persistent is the
	// default: the broker writes the message to disk on durable queues).
	Transient bool `json:"transient,omitempty"`
}

// amqpNameRE is an exchange name as RabbitMQ accepts it.
var amqpNameRE = regexp.MustCompile(`^[A-Za-z0-9_.:-]{0,255}$`)

// Conn implements TypeSpec.
func (s *AMQPSpec) Conn() string { return s.Connection }

// Target implements TypeSpec.
func (s *AMQPSpec) Target() string {
	if s.Exchange == "" {
		return "(default exchange) " + s.RoutingKey
	}
	return s.Exchange + " " + s.RoutingKey
}

func (s *AMQPSpec) normalize() {
	s.Connection, s.Exchange, s.RoutingKey = strings.TrimSpace(s.Connection), strings.TrimSpace(s.Exchange), strings.TrimSpace(s.RoutingKey)
	s.ContentType = strings.TrimSpace(s.ContentType)
}

func (s *AMQPSpec) validate(fe FieldErrors) {
	checkConn(fe, "amqp", s.Connection)
	// An exchange with {{params}} is checked once they are expanded, by
	// the worker.
	if !amqpNameRE.MatchString(s.Exchange) && !strings.Contains(s.Exchange, "{{") {
		fe["amqp.exchange"] = "must be at most 255 letters, digits, '-', '_', '.' or ':'"
	}
	switch {
	case s.Exchange == "" && s.RoutingKey == "":
		fe["amqp.routing_key"] = "is required with the default exchange: the queue's name"
	case len(s.RoutingKey) > 255 || badText(s.RoutingKey) || strings.ContainsAny(s.RoutingKey, controlChars):
		fe["amqp.routing_key"] = "must be at most 255 bytes of text"
	}
	if len(s.ContentType) > 255 || badText(s.ContentType) || strings.ContainsAny(s.ContentType, controlChars) {
		fe["amqp.content_type"] = "must be at most 255 bytes of text"
	}
	checkPayload(fe, "amqp.payload", s.Payload)
	checkHeaders(fe, "amqp.headers", s.Headers)
}

// MQTTSpec publishes to an MQTT broker (3.1.1 or 5, as the connection says).
type MQTTSpec struct {
	Connection string `json:"connection"`
	Topic      string `json:"topic"`
	Payload    string `json:"payload,omitempty"`
	// QoS is 0 (at most once), 1 (at least once, acknowledged) or 2
	// (exactly once, the four-step handshake completed).
	QoS    int  `json:"qos"`
	Retain bool `json:"retain,omitempty"`
}

// Conn implements TypeSpec.
func (s *MQTTSpec) Conn() string { return s.Connection }

// Target implements TypeSpec.
func (s *MQTTSpec) Target() string { return s.Topic }

func (s *MQTTSpec) normalize() {
	s.Connection, s.Topic = strings.TrimSpace(s.Connection), strings.TrimSpace(s.Topic)
}

func (s *MQTTSpec) validate(fe FieldErrors) {
	checkConn(fe, "mqtt", s.Connection)
	switch {
	case s.Topic == "":
		fe["mqtt.topic"] = "is required"
	case len(s.Topic) > 65535 || badText(s.Topic) || strings.ContainsAny(s.Topic, "+#\x00"):
		fe["mqtt.topic"] = "must be text without the wildcards + and #"
	}
	if s.QoS < 0 || s.QoS > 2 {
		fe["mqtt.qos"] = "must be 0, 1 or 2"
	}
	checkPayload(fe, "mqtt.payload", s.Payload)
}

// RedisSpec sends one command to Redis.
type RedisSpec struct {
	Connection string `json:"connection"`
	// Command is RedisPublish, RedisXAdd, RedisLPush or RedisCommand.
	Command string `json:"command"`
	// Key is the channel (publish), the stream (xadd) or the list (lpush).
	Key     string `json:"key,omitempty"`
	Payload string `json:"payload,omitempty"`
	// Fields are an xadd entry's fields; empty: one field "payload".
	Fields map[string]string `json:"fields,omitempty"`
	// Args is a RedisCommand's command and arguments; the command must be
	// one of RedisAllowedCommands.
	Args []string `json:"args,omitempty"`
}

// Redis commands a task sends.
const (
	RedisPublish = "publish"
	RedisXAdd    = "xadd"
	RedisLPush   = "lpush"
	RedisCommand = "command"
)

// RedisAllowedCommands lists what a redis task of command "command" may
// send: writes of one key and reads, never what reconfigures, scans or
// flushes the server.
func RedisAllowedCommands() []string {
	return []string{"APPEND", "DECR", "DECRBY", "DEL", "EXPIRE", "GET", "HDEL", "HGET", "HINCRBY", "HSET", "INCR", "INCRBY",
		"LPUSH", "LTRIM", "PEXPIRE", "PUBLISH", "RPUSH", "SADD", "SET", "SREM", "XADD", "XTRIM", "ZADD", "ZREM"}
}

// Conn implements TypeSpec.
func (s *RedisSpec) Conn() string { return s.Connection }

// Target implements TypeSpec.
func (s *RedisSpec) Target() string {
	if s.Command == RedisCommand {
		if len(s.Args) > 1 {
			return strings.ToUpper(s.Args[0]) + " " + s.Args[1]
		} else if len(s.Args) == 1 {
			return strings.ToUpper(s.Args[0])
		}
		return ""
	}
	return strings.ToUpper(s.Command) + " " + s.Key
}

func (s *RedisSpec) normalize() {
	s.Connection, s.Key = strings.TrimSpace(s.Connection), strings.TrimSpace(s.Key)
	s.Command = strings.ToLower(strings.TrimSpace(s.Command))
	if len(s.Args) > 0 {
		s.Args[0] = strings.ToUpper(strings.TrimSpace(s.Args[0]))
	}
}

func (s *RedisSpec) validate(fe FieldErrors) {
	checkConn(fe, "redis", s.Connection)
	switch s.Command {
	case RedisPublish, RedisXAdd, RedisLPush:
		if s.Key == "" {
			fe["redis.key"] = "is required: the channel, stream or list"
		}
		if len(s.Args) > 0 {
			fe["redis.args"] = "must be empty unless the command is \"command\""
		}
	case RedisCommand:
		switch {
		case len(s.Args) == 0:
			fe["redis.args"] = "is required: the command and its arguments"
		case !slices.Contains(RedisAllowedCommands(), s.Args[0]):
			fe["redis.args"] = fmt.Sprintf("%q is not one of the allowed commands: %s", s.Args[0], strings.Join(RedisAllowedCommands(), ", "))
		case len(s.Args) > 100:
			fe["redis.args"] = "at most 100 arguments"
		}
	default:
		fe["redis.command"] = fmt.Sprintf("%q is not publish, xadd, lpush or command", s.Command)
	}
	if len(s.Key) > 1024 || badText(s.Key) {
		fe["redis.key"] = "must be at most 1024 bytes of text"
	}
	if len(s.Fields) > 0 && s.Command != RedisXAdd {
		fe["redis.fields"] = "are only for xadd"
	}
	checkHeaders(fe, "redis.fields", s.Fields)
	total := len(s.Payload)
	for _, a := range s.Args {
		total += len(a)
		if badText(a) {
			fe["redis.args"] = "holds a NUL byte or invalid UTF-8"
		}
	}
	if total > maxPayload {
		fe["redis.payload"] = fmt.Sprintf("payload and arguments are longer than %d bytes", maxPayload)
	}
	if badText(s.Payload) {
		fe["redis.payload"] = "holds a NUL byte or invalid UTF-8"
	}
}

// KafkaSpec produces one record to Kafka with acks=all.
type KafkaSpec struct {
	Connection string            `json:"connection"`
	Topic      string            `json:"topic"`
	Key        string            `json:"key,omitempty"`
	Payload    string            `json:"payload,omitempty"`
	Headers    map[string]string `json:"headers,omitempty"`
}

var kafkaTopicRE = regexp.MustCompile(`^[A-Za-z0-9._-]{1,249}$`)

// Conn implements TypeSpec.
func (s *KafkaSpec) Conn() string { return s.Connection }

// Target implements TypeSpec.
func (s *KafkaSpec) Target() string { return s.Topic }

func (s *KafkaSpec) normalize() {
	s.Connection, s.Topic = strings.TrimSpace(s.Connection), strings.TrimSpace(s.Topic)
}

func (s *KafkaSpec) validate(fe FieldErrors) {
	checkConn(fe, "kafka", s.Connection)
	if !kafkaTopicRE.MatchString(s.Topic) || s.Topic == "." || s.Topic == ".." {
		fe["kafka.topic"] = "must be 1 to 249 letters, digits, '.', '_' or '-'"
	}
	if len(s.Key) > 4096 || badText(s.Key) {
		fe["kafka.key"] = "must be at most 4096 bytes of text"
	}
	checkPayload(fe, "kafka.payload", s.Payload)
	checkHeaders(fe, "kafka.headers", s.Headers)
}

// SQLSpec runs SQL on PostgreSQL or MySQL/MariaDB: one statement, or a
// script of statements in one transaction.
type SQLSpec struct {
	Connection string `json:"connection"`
	Statement  string `json:"statement"`
	// Script runs Statement as several statements (separated by ';' at
	// line ends) in one transaction, rolled back whole if one fails.
	Script bool `json:"script,omitempty"`
}

// Conn implements TypeSpec.
func (s *SQLSpec) Conn() string { return s.Connection }

// Target implements TypeSpec: the statement's first line.
func (s *SQLSpec) Target() string {
	line, _, _ := strings.Cut(s.Statement, "\n")
	return strings.TrimSpace(line)
}

func (s *SQLSpec) normalize() {
	s.Connection, s.Statement = strings.TrimSpace(s.Connection), strings.TrimSpace(s.Statement)
}

func (s *SQLSpec) validate(fe FieldErrors) {
	checkConn(fe, "sql", s.Connection)
	switch {
	case s.Statement == "":
		fe["sql.statement"] = "is required"
	case len(s.Statement) > maxStatement:
		fe["sql.statement"] = fmt.Sprintf("is longer than %d bytes", maxStatement)
	case badText(s.Statement):
		fe["sql.statement"] = "holds a NUL byte or invalid UTF-8"
	}
}

// GRPCSpec makes one unary gRPC call, described by the server's reflection
// service or by a descriptor set; the request and the reply are JSON.
type GRPCSpec struct {
	Connection string `json:"connection"`
	// Method is the full method name: package.Service/Method.
	Method string `json:"method"`
	// Request is the request message as JSON ("{}" when empty).
	Request  string            `json:"request,omitempty"`
	Metadata map[string]string `json:"metadata,omitempty"`
	// DescriptorSet is a FileDescriptorSet (protoc --descriptor_set_out
	// --include_imports), base64; empty: asked of the server's reflection
	// service.
	DescriptorSet string `json:"descriptor_set,omitempty"`
}

var grpcMethodRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*/[A-Za-z_][A-Za-z0-9_]*$`)

// Conn implements TypeSpec.
func (s *GRPCSpec) Conn() string { return s.Connection }

// Target implements TypeSpec.
func (s *GRPCSpec) Target() string { return s.Method }

func (s *GRPCSpec) normalize() {
	s.Connection, s.Method = strings.TrimSpace(s.Connection), strings.TrimPrefix(strings.TrimSpace(s.Method), "/")
	s.Request, s.DescriptorSet = strings.TrimSpace(s.Request), strings.TrimSpace(s.DescriptorSet)
}

func (s *GRPCSpec) validate(fe FieldErrors) {
	checkConn(fe, "grpc", s.Connection)
	if !grpcMethodRE.MatchString(s.Method) {
		fe["grpc.method"] = "must be package.Service/Method"
	}
	checkPayload(fe, "grpc.request", s.Request)
	if s.Request != "" && !strings.Contains(s.Request, "{{") && !json.Valid([]byte(s.Request)) {
		fe["grpc.request"] = "must be JSON"
	}
	checkHeaders(fe, "grpc.metadata", s.Metadata)
	if s.DescriptorSet != "" {
		if len(s.DescriptorSet) > maxDescriptorSet*4/3+4 {
			fe["grpc.descriptor_set"] = fmt.Sprintf("is longer than %d bytes", maxDescriptorSet)
		} else if _, err := base64.StdEncoding.DecodeString(s.DescriptorSet); err != nil {
			fe["grpc.descriptor_set"] = "must be base64 of a FileDescriptorSet"
		}
	}
}

func checkConn(fe FieldErrors, typ, name string) {
	if msg := checkConnName(name); msg != "" {
		fe[typ+".connection"] = msg
	}
}

func checkPayload(fe FieldErrors, field, v string) {
	switch {
	case len(v) > maxPayload:
		fe[field] = fmt.Sprintf("is longer than %d bytes", maxPayload)
	case badText(v):
		fe[field] = "holds a NUL byte or invalid UTF-8"
	}
}

func checkHeaders(fe FieldErrors, field string, h map[string]string) {
	if len(h) > maxHeaders {
		fe[field] = fmt.Sprintf("at most %d", maxHeaders)
		return
	}
	for k, v := range h {
		switch {
		case k == "" || badText(k) || badText(v) || strings.ContainsAny(k, controlChars+" :") || strings.ContainsAny(v, controlChars):
			fe[field] = fmt.Sprintf("%q: names must be text without spaces or ':', values one line of text", k)
		case len(v) > maxHeaderValue:
			fe[field] = fmt.Sprintf("value of %q is longer than %d bytes", k, maxHeaderValue)
		}
	}
}
