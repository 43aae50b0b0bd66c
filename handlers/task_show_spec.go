package handlers

import (
	"context"
	"strconv"
	"strings"

	"github.com/schedulemaster-go/schedulemaster/locale"
	"github.com/schedulemaster-go/schedulemaster/protocol"
	"github.com/schedulemaster-go/schedulemaster/views"
)

// taskSpecView is what a task page shows of a type beyond HTTP and shell:
// its target, its connection (linked when the task's project sees it) and
// its other settings; nil for HTTP and shell.
func (s *server) taskSpecView(ctx context.Context, l *locale.Localizer, project string, d *protocol.TaskDef) *views.TaskSpecView {
	sp := d.Spec()
	if sp == nil {
		return nil
	}
	v := &views.TaskSpecView{Target: sp.Target(), Connection: sp.Conn(), BodyLabel: l.T("TaskPayload")}
	if list, err := s.m.Connections().List(ctx, project); err == nil {
		for _, cn := range list {
			if cn.Name == sp.Conn() && (v.ConnectionID == "" || !cn.AllProjects) {
				v.ConnectionID = cn.ID // the project's own wins over the one for every project
			}
		}
	}
	add := func(id, value string) {
		if value != "" {
			v.Details = append(v.Details, views.KV{Key: l.T(id), Value: value})
		}
	}
	flag := func(id string, on bool) {
		if on {
			add(id, "✓")
		}
	}
	pairs := func(m map[string]string) string {
		var out []string
		for _, kv := range sortedKV(m) {
			out = append(out, kv.Key+": "+kv.Value)
		}
		return strings.Join(out, "; ")
	}
	switch {
	case d.NATS != nil:
		add("TaskNATSMode", d.NATS.Mode)
		add("TaskMsgHeaders", pairs(d.NATS.Headers))
		v.Body = d.NATS.Payload
	case d.AMQP != nil:
		add("TaskContentType", d.AMQP.ContentType)
		add("TaskMsgHeaders", pairs(d.AMQP.Headers))
		flag("TaskAMQPTransient", d.AMQP.Transient)
		v.Body = d.AMQP.Payload
	case d.MQTT != nil:
		add("TaskMQTTQoS", strconv.Itoa(d.MQTT.QoS))
		flag("TaskMQTTRetain", d.MQTT.Retain)
		v.Body = d.MQTT.Payload
	case d.Redis != nil:
		add("TaskRedisFields", pairs(d.Redis.Fields))
		add("TaskRedisArgs", strings.Join(d.Redis.Args, " "))
		v.Body = d.Redis.Payload
	case d.Kafka != nil:
		add("TaskKafkaKey", d.Kafka.Key)
		add("TaskMsgHeaders", pairs(d.Kafka.Headers))
		v.Body = d.Kafka.Payload
	case d.SQL != nil:
		flag("TaskSQLScript", d.SQL.Script)
		v.Body, v.BodyLabel = d.SQL.Statement, l.T("TaskSQLStatement")
	case d.GRPC != nil:
		add("TaskGRPCMetadata", pairs(d.GRPC.Metadata))
		if d.GRPC.DescriptorSet != "" {
			add("TaskGRPCDescriptorSet", l.N("Bytes", len(d.GRPC.DescriptorSet)*3/4))
		}
		v.Body, v.BodyLabel = d.GRPC.Request, l.T("TaskGRPCRequest")
	}
	return v
}
