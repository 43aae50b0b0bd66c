package form

import (
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/schedulemaster-go/schedulemaster/master"
	"github.com/schedulemaster-go/schedulemaster/protocol"
	"github.com/schedulemaster-go/schedulemaster/views"
)

// Task reads the task form: the values as typed, the engine's input and the
// errors of text fields that do not parse. When some do not parse, the
// definition is also checked here, so the form shows every problem at once.
func Task(v url.Values) (views.TaskFields, master.TaskInput, protocol.FieldErrors) {
	get := func(k string) string { return v.Get(k) }
	trim := func(k string) string { return strings.TrimSpace(v.Get(k)) }
	f := views.TaskFields{
		Title: get("title"), Description: get("description"), Type: get("type"),
		ScheduleKind: get("schedule_kind"), Cron: get("schedule_cron"),
		Every: trim("schedule_every"), At: trim("schedule_at"), StartAt: trim("start_at"), EndAt: trim("end_at"),
		Timeout: trim("timeout"), Retries: trim("retries"),
		Params: get("params"), Keepers: get("keepers"), SecretParams: get("secret_params"),
		SecretHeaders: get("http_secret_headers"),
		HTTPMethod:    trim("http_method"), HTTPURL: get("http_url"), HTTPHeaders: get("http_headers"), HTTPBody: get("http_body"),
		HTTPContentType: trim("http_content_type"),
		ShellCommand:    get("shell_command"), ShellArgs: get("shell_args"), ShellEnv: get("shell_env"), ShellDir: trim("shell_dir"),
		Timezone: trim("timezone"), Overlap: trim("overlap"), Routing: trim("routing"), RoutingKey: trim("routing_key"),
		Misfire: trim("misfire"), Selector: get("selector"), Align: trim("schedule_align"), AtCapacity: trim("at_capacity"),
		Version: trim("version"), Note: get("note"),
		TypeFields: typeFields(v),
	}
	in := master.TaskInput{
		TaskDef: protocol.TaskDef{
			Title: f.Title, Description: f.Description, Type: f.Type,
			SecretParams: List(f.SecretParams),
			Overlap:      f.Overlap,
			Routing:      f.Routing, RoutingKey: f.RoutingKey,
			Misfire:    f.Misfire,
			AtCapacity: f.AtCapacity,
		},
		Executors: v["executors"],
		Selector:  f.Selector,
		Keepers:   List(f.Keepers),
		Children:  v["children"],
		Note:      f.Note,
	}
	_, _, fe := scheduleInto(ScheduleFields{Kind: f.ScheduleKind, Cron: f.Cron, Every: f.Every, Align: f.Align, At: f.At,
		StartAt: f.StartAt, EndAt: f.EndAt, Timezone: f.Timezone}, &in.TaskDef)
	if f.Version != "" {
		// Hidden: a version that does not read is no version (no check).
		if n, err := strconv.Atoi(f.Version); err == nil && n > 0 {
			in.Version = n
		}
	}
	var err error
	if f.Timeout != "" {
		d, err := time.ParseDuration(f.Timeout)
		switch {
		case err != nil:
			fe["timeout"] = fmt.Sprintf("%q is not a duration like 30s or 5m", f.Timeout)
		case d == 0:
			fe["timeout"] = "must be more than 0"
		}
		in.Timeout = protocol.Duration(d)
	}
	if f.Retries != "" {
		n, err := strconv.Atoi(f.Retries)
		if err != nil {
			fe["retries"] = fmt.Sprintf("must be a whole number from 0 to %d", protocol.MaxRetries)
		}
		in.Retries = n
	}
	if in.Params, err = Pairs(f.Params, "="); err != nil {
		fe["params"] = err.Error()
	}
	switch f.Type {
	case protocol.TaskHTTP:
		h := &protocol.HTTPSpec{Method: f.HTTPMethod, URL: f.HTTPURL, Body: f.HTTPBody, ContentType: f.HTTPContentType,
			SecretHeaders: List(f.SecretHeaders)}
		if h.Headers, err = Pairs(f.HTTPHeaders, ":"); err != nil {
			fe["http.headers"] = err.Error()
		}
		in.HTTP = h
	case protocol.TaskShell:
		sh := &protocol.ShellSpec{Command: f.ShellCommand, Args: Lines(f.ShellArgs), Dir: f.ShellDir}
		if sh.Env, err = Pairs(f.ShellEnv, "="); err != nil {
			fe["shell.env"] = err.Error()
		}
		in.Shell = sh
	default:
		typeSpecInto(f.Type, f.TypeFields, &in.TaskDef, fe)
	}
	if len(fe) > 0 {
		def := in.TaskDef
		def.Normalize()
		master.Merge(fe, def.Validate(time.Now()))
	}
	return f, in, fe
}

// TaskFieldsOf fills the task form from a stored task, its secrets masked.
func TaskFieldsOf(stored *master.Task) views.TaskFields {
	masked := master.MaskTask(*stored)
	t := &masked
	loc, err := protocol.LoadTimezone(t.Timezone)
	if err != nil {
		loc = time.UTC
	}
	f := views.TaskFields{
		Timezone: t.Timezone, Overlap: t.Overlap, Routing: t.Routing, RoutingKey: t.RoutingKey, Misfire: t.Misfire,
		AtCapacity: t.AtCapacity, Align: t.Schedule.Align,
		SecretParams: strings.Join(t.SecretParams, ", "),
		Title:        t.Title, Description: t.Description, Type: t.Type, ScheduleKind: t.Schedule.Kind,
		Cron: t.Schedule.Cron, At: FormatTimeIn(t.Schedule.At, loc), StartAt: FormatTimeIn(t.StartAt, loc), EndAt: FormatTimeIn(t.EndAt, loc),
		Timeout: duration(time.Duration(t.Timeout)), Retries: strconv.Itoa(t.Retries),
		Params: JoinPairs(t.Params, "="), Keepers: strings.Join(t.Keepers, ", "), HTTPMethod: "GET",
		Selector: t.Selector,
	}
	if t.Version > 0 {
		f.Version = strconv.Itoa(t.Version)
	}
	if t.Schedule.Every > 0 {
		f.Every = duration(time.Duration(t.Schedule.Every))
	}
	if t.Schedule.Kind == protocol.ScheduleInterval && f.Align == "" {
		f.Align = protocol.AlignEpoch // stored before alignments existed
	}
	if h := t.HTTP; h != nil {
		f.HTTPMethod, f.HTTPURL, f.HTTPBody, f.HTTPContentType = h.Method, h.URL, h.Body, h.ContentType
		f.HTTPHeaders = JoinPairs(h.Headers, ": ")
		f.SecretHeaders = strings.Join(h.SecretHeaders, ", ")
	}
	if sh := t.Shell; sh != nil {
		f.ShellCommand, f.ShellDir = sh.Command, sh.Dir
		f.ShellArgs = strings.Join(sh.Args, "\n")
		f.ShellEnv = JoinPairs(sh.Env, "=")
	}
	f.TypeFields = typeFieldsOf(&t.TaskDef)
	return f
}

// typeFields reads the fields of the types beyond HTTP and shell, as typed
// (only those of the chosen type are in the form).
func typeFields(v url.Values) views.TypeFields {
	get := func(k string) string { return v.Get(k) }
	trim := func(k string) string { return strings.TrimSpace(v.Get(k)) }
	on := func(k string) bool { return v.Get(k) != "" && v.Get(k) != "0" }
	return views.TypeFields{
		NATS: views.NATSFields{Connection: trim("nats_connection"), Mode: trim("nats_mode"), Subject: get("nats_subject"),
			Payload: get("nats_payload"), Headers: get("nats_headers")},
		AMQP: views.AMQPFields{Connection: trim("amqp_connection"), Exchange: get("amqp_exchange"), RoutingKey: get("amqp_routing_key"),
			Payload: get("amqp_payload"), ContentType: get("amqp_content_type"), Headers: get("amqp_headers"), Transient: on("amqp_transient")},
		MQTT: views.MQTTFields{Connection: trim("mqtt_connection"), Topic: get("mqtt_topic"), Payload: get("mqtt_payload"),
			QoS: trim("mqtt_qos"), Retain: on("mqtt_retain")},
		Redis: views.RedisFields{Connection: trim("redis_connection"), Command: trim("redis_command"), Key: get("redis_key"),
			Payload: get("redis_payload"), Fields: get("redis_fields"), Args: get("redis_args")},
		Kafka: views.KafkaFields{Connection: trim("kafka_connection"), Topic: get("kafka_topic"), Key: get("kafka_key"),
			Payload: get("kafka_payload"), Headers: get("kafka_headers")},
		SQL: views.SQLFields{Connection: trim("sql_connection"), Statement: get("sql_statement"), Script: on("sql_script")},
		GRPC: views.GRPCFields{Connection: trim("grpc_connection"), Method: get("grpc_method"), Request: get("grpc_request"),
			Metadata: get("grpc_metadata"), DescriptorSet: get("grpc_descriptor_set")},
	}
}

// typeSpecInto sets def's definition of type typ (one beyond HTTP and
// shell) from the form's fields; the "Name: value" lines that do not read
// are errors of their field ("nats.headers").
func typeSpecInto(typ string, f views.TypeFields, def *protocol.TaskDef, fe protocol.FieldErrors) {
	pairs := func(field, text string) map[string]string {
		m, err := Pairs(text, ":")
		if err != nil {
			fe[field] = err.Error() + ` (one "Name: value" per line)`
		}
		return m
	}
	switch typ {
	case protocol.TaskNATS:
		n := f.NATS
		def.NATS = &protocol.NATSSpec{Connection: n.Connection, Mode: n.Mode, Subject: n.Subject, Payload: n.Payload,
			Headers: pairs("nats.headers", n.Headers)}
	case protocol.TaskAMQP:
		a := f.AMQP
		def.AMQP = &protocol.AMQPSpec{Connection: a.Connection, Exchange: a.Exchange, RoutingKey: a.RoutingKey, Payload: a.Payload,
			ContentType: a.ContentType, Headers: pairs("amqp.headers", a.Headers), Transient: a.Transient}
	case protocol.TaskMQTT:
		m := f.MQTT
		spec := &protocol.MQTTSpec{Connection: m.Connection, Topic: m.Topic, Payload: m.Payload, Retain: m.Retain}
		if m.QoS != "" {
			q, err := strconv.Atoi(m.QoS)
			if err != nil {
				fe["mqtt.qos"] = "must be 0, 1 or 2"
			}
			spec.QoS = q
		}
		def.MQTT = spec
	case protocol.TaskRedis:
		r := f.Redis
		def.Redis = &protocol.RedisSpec{Connection: r.Connection, Command: r.Command, Key: r.Key, Payload: r.Payload,
			Fields: pairs("redis.fields", r.Fields), Args: Lines(r.Args)}
	case protocol.TaskKafka:
		k := f.Kafka
		def.Kafka = &protocol.KafkaSpec{Connection: k.Connection, Topic: k.Topic, Key: k.Key, Payload: k.Payload,
			Headers: pairs("kafka.headers", k.Headers)}
	case protocol.TaskSQL:
		def.SQL = &protocol.SQLSpec{Connection: f.SQL.Connection, Statement: f.SQL.Statement, Script: f.SQL.Script}
	case protocol.TaskGRPC:
		g := f.GRPC
		def.GRPC = &protocol.GRPCSpec{Connection: g.Connection, Method: g.Method, Request: g.Request,
			Metadata: pairs("grpc.metadata", g.Metadata), DescriptorSet: strings.Join(strings.Fields(g.DescriptorSet), "")}
	}
}

// typeFieldsOf fills the fields of the type beyond HTTP and shell a stored
// definition has.
func typeFieldsOf(d *protocol.TaskDef) views.TypeFields {
	var f views.TypeFields
	if n := d.NATS; n != nil {
		f.NATS = views.NATSFields{Connection: n.Connection, Mode: n.Mode, Subject: n.Subject, Payload: n.Payload, Headers: JoinPairs(n.Headers, ": ")}
	}
	if a := d.AMQP; a != nil {
		f.AMQP = views.AMQPFields{Connection: a.Connection, Exchange: a.Exchange, RoutingKey: a.RoutingKey, Payload: a.Payload,
			ContentType: a.ContentType, Headers: JoinPairs(a.Headers, ": "), Transient: a.Transient}
	}
	if m := d.MQTT; m != nil {
		f.MQTT = views.MQTTFields{Connection: m.Connection, Topic: m.Topic, Payload: m.Payload, QoS: strconv.Itoa(m.QoS), Retain: m.Retain}
	}
	if r := d.Redis; r != nil {
		f.Redis = views.RedisFields{Connection: r.Connection, Command: r.Command, Key: r.Key, Payload: r.Payload,
			Fields: JoinPairs(r.Fields, ": "), Args: strings.Join(r.Args, "\n")}
	}
	if k := d.Kafka; k != nil {
		f.Kafka = views.KafkaFields{Connection: k.Connection, Topic: k.Topic, Key: k.Key, Payload: k.Payload, Headers: JoinPairs(k.Headers, ": ")}
	}
	if s := d.SQL; s != nil {
		f.SQL = views.SQLFields{Connection: s.Connection, Statement: s.Statement, Script: s.Script}
	}
	if g := d.GRPC; g != nil {
		f.GRPC = views.GRPCFields{Connection: g.Connection, Method: g.Method, Request: g.Request, Metadata: JoinPairs(g.Metadata, ": "),
			DescriptorSet: g.DescriptorSet}
	}
	return f
}
