package form_test

import (
	"net/url"
	"reflect"
	"testing"
	"time"

	"github.com/schedulemaster-go/schedulemaster/handlers/form"
	"github.com/schedulemaster-go/schedulemaster/master"
	"github.com/schedulemaster-go/schedulemaster/protocol"
	"github.com/schedulemaster-go/schedulemaster/views"
)

// A stored task written into the form and read back is the same definition:
// the form loses nothing (times in the task's zone, pairs, lists).
func TestTaskFormRoundTrip(t *testing.T) {
	t.Parallel()
	start := time.Date(2030, 3, 31, 1, 30, 0, 0, time.UTC)
	end := start.Add(48 * time.Hour)
	stored := &master.Task{TaskDef: protocol.TaskDef{
		Title: "nightly", Description: "d", Type: protocol.TaskHTTP, Timezone: "Europe/Berlin",
		Schedule: protocol.Schedule{Kind: protocol.ScheduleCron, Cron: "0 30 2 * * *"},
		StartAt:  &start, EndAt: &end, Timeout: protocol.Duration(90 * time.Second), Retries: 2,
		Params: map[string]string{"b": "2", "a": "1"}, Overlap: "skip", Routing: "hash", RoutingKey: "a", Misfire: "run_once",
		HTTP: &protocol.HTTPSpec{Method: "POST", URL: "https://example.com/x", Body: "{}", ContentType: "application/json",
			Headers: map[string]string{"X-A": "1"}},
	}, Keepers: []string{"ops@example.com"}}
	f := form.TaskFieldsOf(stored)
	if f.StartAt != "2030-03-31T03:30" || f.Timeout != "1m30s" || f.Params != "a=1\nb=2" {
		t.Fatalf("fields %+v", f)
	}
	v := url.Values{"title": {f.Title}, "description": {f.Description}, "type": {f.Type}, "schedule_kind": {f.ScheduleKind},
		"schedule_cron": {f.Cron}, "start_at": {f.StartAt}, "end_at": {f.EndAt}, "timeout": {f.Timeout}, "retries": {f.Retries},
		"params": {f.Params}, "keepers": {f.Keepers}, "http_method": {f.HTTPMethod}, "http_url": {f.HTTPURL},
		"http_headers": {f.HTTPHeaders}, "http_body": {f.HTTPBody}, "http_content_type": {f.HTTPContentType},
		"timezone": {f.Timezone}, "overlap": {f.Overlap}, "routing": {f.Routing}, "routing_key": {f.RoutingKey},
		"misfire": {f.Misfire}, "executors": {"w1", "w2"}}
	back, in, fe := form.Task(v)
	if len(fe) != 0 {
		t.Fatalf("field errors %v", fe)
	}
	if back != f {
		t.Fatalf("typed values changed:\n%+v\n%+v", back, f)
	}
	want := stored.TaskDef
	if !in.StartAt.Equal(*want.StartAt) || !in.EndAt.Equal(*want.EndAt) {
		t.Fatalf("window %v–%v, want %v–%v", in.StartAt, in.EndAt, want.StartAt, want.EndAt)
	}
	in.StartAt, in.EndAt, want.StartAt, want.EndAt = nil, nil, nil, nil
	if !reflect.DeepEqual(in.TaskDef, want) || !reflect.DeepEqual(in.Keepers, stored.Keepers) || !reflect.DeepEqual(in.Executors, []string{"w1", "w2"}) {
		t.Fatalf("input %+v\nwant %+v", in, want)
	}
}

// Every value that does not parse is named, with the definition's own
// errors beside them, and what was typed is kept.
func TestTaskFormNamesEveryBadField(t *testing.T) {
	t.Parallel()
	v := url.Values{"title": {""}, "type": {"shell"}, "schedule_kind": {"interval"}, "schedule_every": {"soon"},
		"start_at": {"tomorrow"}, "timeout": {"0s"}, "retries": {"many"}, "params": {"novalue"}, "shell_env": {"=x"}}
	f, _, fe := form.Task(v)
	for _, field := range []string{"schedule.every", "start_at", "timeout", "retries", "params", "shell.env", "title"} {
		if fe[field] == "" {
			t.Errorf("no error for %s (errors %v)", field, fe)
		}
	}
	if f.Every != "soon" || f.Retries != "many" {
		t.Errorf("typed values lost: %+v", f)
	}
}

func TestScheduleReadsTimesInTheZone(t *testing.T) {
	t.Parallel()
	var d protocol.TaskDef
	loc, known, fe := form.Schedule(url.Values{"schedule_kind": {"once"}, "schedule_at": {"2030-07-01T12:00"},
		"timezone": {"Asia/Kolkata"}}, &d)
	if !known || len(fe) != 0 || loc.String() != "Asia/Kolkata" {
		t.Fatalf("zone %v known %v errors %v", loc, known, fe)
	}
	if want := time.Date(2030, 7, 1, 6, 30, 0, 0, time.UTC); !d.Schedule.At.Equal(want) {
		t.Fatalf("at %v, want %v", d.Schedule.At, want)
	}
	_, known, _ = form.Schedule(url.Values{"timezone": {"Mars/Olympus"}}, &d)
	if known {
		t.Fatal("an unknown zone was taken as known")
	}
}

func TestNodeAndSettingsForms(t *testing.T) {
	t.Parallel()
	_, cfg, fe := form.Node(url.Values{"name": {" w1 "}, "protocol": {"http"}, "host": {"127.0.0.1:30001"}, "priority": {"x"}, "max_concurrency": {"5"}})
	if cfg.Name != "w1" || cfg.MaxConcurrency != 5 || fe["priority"] == "" {
		t.Fatalf("node %+v errors %v", cfg, fe)
	}
	f, st, fe := form.Settings(url.Values{"health_interval": {"10s"}, "health_timeout": {"ten"}, "max_failures": {"3"},
		"default_http_timeout": {"30s"}, "run_retention_days": {"7"}, "approve_new_nodes": {"1"}})
	if st.HealthInterval != 10*time.Second || st.SMTPPort != master.DefaultSettings().SMTPPort || !st.ApproveNewNodes ||
		fe["health_timeout"] == "" || f.HealthTimeout != "ten" {
		t.Fatalf("settings %+v errors %v", st, fe)
	}
	if got := form.SMTPPassword(url.Values{}, "stored"); got != "stored" {
		t.Fatalf("empty field: %q, want the stored password kept", got)
	}
	if got := form.SMTPPassword(url.Values{"smtp_password_clear": {"1"}}, "stored"); got != "" {
		t.Fatalf("clear ticked: %q, want none", got)
	}
}

func TestDelayedForm(t *testing.T) {
	t.Parallel()
	f, in := form.Delayed(url.Values{"source_app": {"shop"}, "at": {"2030-01-02T03:04"}, "retries": {"x"}, "keepers": {"a@x, b@x"}})
	if in.At != "2030-01-02T03:04:00Z" || in.Retries != -1 || len(in.Keepers) != 2 || f.Retries != "x" {
		t.Fatalf("delayed %+v fields %+v", in, f)
	}
}

func TestDaysAndLabelsAndSelector(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]time.Duration{"24h": 24 * time.Hour, "7d": 7 * 24 * time.Hour, "0": 0, "36h": 36 * time.Hour} {
		d, ok := master.ParseDays(in)
		if !ok || d != want {
			t.Errorf("Days(%q) = %s %v, want %s", in, d, ok, want)
		}
		if back, _ := master.ParseDays(master.FormatDays(d)); back != d {
			t.Errorf("FormatDays(%s) = %q does not read back", d, master.FormatDays(d))
		}
	}
	for _, bad := range []string{"", "x", "1.5d", "-1d", "d", "99999999999d"} {
		if _, ok := master.ParseDays(bad); ok {
			t.Errorf("Days(%q) accepted", bad)
		}
	}
	if l, msg := form.Labels(" pool=billing , zone=eu-1 "); msg != "" || l.String() != "pool=billing,zone=eu-1" {
		t.Errorf("Labels: %v %q", l, msg)
	}
	if _, msg := form.Labels("pool"); msg == "" {
		t.Error("Labels accepted an item without '='")
	}
	f, in, _ := form.Task(url.Values{"selector": {"pool=billing"}})
	if f.Selector != "pool=billing" || in.Selector != "pool=billing" {
		t.Errorf("task form selector: %q %q", f.Selector, in.Selector)
	}
	if got := form.TaskFieldsOf(&master.Task{Selector: "pool=x"}).Selector; got != "pool=x" {
		t.Errorf("TaskFieldsOf selector %q", got)
	}
	if f, in := form.Delayed(url.Values{"selector": {"pool=billing"}}); f.Selector != "pool=billing" || in.Selector != "pool=billing" {
		t.Errorf("delayed form selector: %q %q", f.Selector, in.Selector)
	}
}

// A stored workflow written into the form and read back is the same
// definition (its times in its zone); the rows are read in the order of
// their numbers, whatever the gaps, and blank edges and steps are left out.
func TestWorkflowFormRoundTrip(t *testing.T) {
	t.Parallel()
	start := time.Date(2030, 3, 31, 1, 30, 0, 0, time.UTC)
	stored := &master.Workflow{Version: 4, Project: "etl", WorkflowDef: master.WorkflowDef{Title: "nightly", Key: "nightly",
		Timeout: protocol.Duration(2 * time.Hour), Params: map[string]string{"A": "1"}, Timezone: "Europe/Berlin",
		Schedule: &protocol.Schedule{Kind: protocol.ScheduleCron, Cron: "0 3 * * *"}, StartAt: &start, Overlap: "queue", Misfire: "run_once",
		Steps: []master.WorkflowStep{{Name: "extract", Task: "t1"},
			{Name: "load", Task: "t2", Params: map[string]string{"B": "2"}, Timeout: protocol.Duration(90 * time.Second),
				After: []master.StepEdge{{Step: "extract", On: master.OnFailure}}}}}}
	f := form.WorkflowFieldsOf(stored)
	if f.StartAt != "2030-03-31T03:30" || f.Timeout != "2h" || f.Version != "4" || f.Steps[1].Timeout != "1m30s" {
		t.Fatalf("fields %+v", f)
	}
	v := url.Values{"title": {f.Title}, "key": {f.Key}, "version": {f.Version}, "timeout": {f.Timeout}, "params": {f.Params},
		"schedule_kind": {f.ScheduleKind}, "schedule_cron": {f.Cron}, "timezone": {f.Timezone}, "start_at": {f.StartAt},
		"overlap": {f.Overlap}, "misfire": {f.Misfire},
		// Rows numbered with gaps, a blank step and a blank edge between.
		"steps[0].name": {"extract"}, "steps[0].task": {"t1"},
		"steps[3].name": {""}, "steps[3].task": {""}, "steps[3].after[0].step": {""}, "steps[3].after[0].on": {"success"},
		"steps[7].name": {"load"}, "steps[7].task": {"t2"}, "steps[7].params": {"B=2"}, "steps[7].timeout": {"1m30s"},
		"steps[7].after[2].step": {""}, "steps[7].after[5].step": {"extract"}, "steps[7].after[5].on": {"failure"}}
	back, in, fe := form.Workflow(v)
	if len(fe) != 0 {
		t.Fatalf("field errors %v", fe)
	}
	if len(back.Steps) != 2 || back.Steps[1].Name != "load" || len(back.Steps[1].After) != 1 {
		t.Fatalf("typed rows %+v", back.Steps)
	}
	want := stored.WorkflowDef
	if in.Version != 4 || !in.StartAt.Equal(*want.StartAt) {
		t.Fatalf("version %d, start %v", in.Version, in.StartAt)
	}
	in.StartAt, want.StartAt = nil, nil
	if !reflect.DeepEqual(in.WorkflowDef, want) {
		t.Fatalf("input %+v\nwant %+v", in.WorkflowDef, want)
	}

	// By hand only: no schedule, and the hidden window is not the workflow's.
	v.Set("schedule_kind", "manual")
	v.Set("end_at", "tomorrow")
	if _, in, fe := form.Workflow(v); len(fe) != 0 || in.Schedule != nil || in.StartAt != nil {
		t.Fatalf("manual: %v %+v", fe, in)
	}
	// What does not read is named by the engine's names.
	v.Set("steps[7].timeout", "soon")
	v.Set("steps[0].params", "novalue")
	if _, _, fe := form.Workflow(v); fe["steps[1].timeout"] == "" || fe["steps[0].params"] == "" {
		t.Fatalf("bad step fields: %v", fe)
	}
}

// The row buttons change the typed form: add a step, add and remove an
// edge, remove a step (the last one leaves a blank one); an op that is none
// of the form's changes nothing.
func TestWorkflowFormRowButtons(t *testing.T) {
	t.Parallel()
	f := views.WorkflowFields{Steps: []views.StepFields{{Name: "a"}}}
	if focus, ok := form.ApplyWorkflowOp(&f, views.OpAddStep); !ok || focus != "steps-1-name" || len(f.Steps) != 2 {
		t.Fatalf("add step: %q %v %+v", focus, ok, f.Steps)
	}
	if focus, ok := form.ApplyWorkflowOp(&f, views.StepOp(views.OpAddEdge, 1)); !ok || focus != "steps-1-after-0-step" ||
		len(f.Steps[1].After) != 1 || f.Steps[1].After[0].On != master.OnSuccess {
		t.Fatalf("add edge: %q %v %+v", focus, ok, f.Steps)
	}
	if focus, ok := form.ApplyWorkflowOp(&f, views.EdgeOp(1, 0)); !ok || focus != "steps-1-add-edge" || len(f.Steps[1].After) != 0 {
		t.Fatalf("remove edge: %q %v %+v", focus, ok, f.Steps)
	}
	for _, op := range []string{"remove-step:9", "add-edge:x", "remove-edge:0", "drop-table", "add-step:1"} {
		before := len(f.Steps)
		if _, ok := form.ApplyWorkflowOp(&f, op); len(f.Steps) != before || ok && op != "remove-step:9" {
			t.Fatalf("op %q changed the form or was taken: %v %+v", op, ok, f.Steps)
		}
	}
	form.ApplyWorkflowOp(&f, views.StepOp(views.OpRemoveStep, 0))
	form.ApplyWorkflowOp(&f, views.StepOp(views.OpRemoveStep, 0))
	if len(f.Steps) != 1 || f.Steps[0].Name != "" {
		t.Fatalf("removing every step leaves %+v, want one blank step", f.Steps)
	}
}

// Each type beyond HTTP and shell, written into the form and read back, is
// the same definition: its maps as "Name: value" lines, Redis arguments one
// per line, its flags as checkboxes.
func TestTaskFormRoundTripOfEveryType(t *testing.T) {
	t.Parallel()
	hdr := map[string]string{"X-Id": "1", "X-Src": "sm: console"}
	specs := []protocol.TaskDef{
		{Type: protocol.TaskNATS, NATS: &protocol.NATSSpec{Connection: "bus", Mode: "request", Subject: "orders.created", Payload: "{}\n", Headers: hdr}},
		{Type: protocol.TaskAMQP, AMQP: &protocol.AMQPSpec{Connection: "mq", Exchange: "ex", RoutingKey: "rk", Payload: "p", ContentType: "text/plain", Headers: hdr, Transient: true}},
		{Type: protocol.TaskMQTT, MQTT: &protocol.MQTTSpec{Connection: "m", Topic: "a/b", Payload: "p", QoS: 2, Retain: true}},
		{Type: protocol.TaskRedis, Redis: &protocol.RedisSpec{Connection: "r", Command: "command", Args: []string{"SET", "k", "v"}}},
		{Type: protocol.TaskRedis, Redis: &protocol.RedisSpec{Connection: "r", Command: "xadd", Key: "s", Fields: hdr}},
		{Type: protocol.TaskKafka, Kafka: &protocol.KafkaSpec{Connection: "k", Topic: "t", Key: "key", Payload: "p", Headers: hdr}},
		{Type: protocol.TaskSQL, SQL: &protocol.SQLSpec{Connection: "db", Statement: "delete from x;\nvacuum;", Script: true}},
		{Type: protocol.TaskGRPC, GRPC: &protocol.GRPCSpec{Connection: "g", Method: "pkg.Svc/Do", Request: `{"a":1}`, Metadata: hdr, DescriptorSet: "AAEC"}},
	}
	check := func(on bool) string {
		if on {
			return "1"
		}
		return ""
	}
	for _, def := range specs {
		def.Title, def.Schedule = "t", protocol.Schedule{Kind: protocol.ScheduleCron, Cron: "0 * * * *"}
		f := form.TaskFieldsOf(&master.Task{TaskDef: def})
		v := url.Values{"title": {f.Title}, "type": {f.Type}, "schedule_kind": {f.ScheduleKind}, "schedule_cron": {f.Cron},
			"nats_connection": {f.NATS.Connection}, "nats_mode": {f.NATS.Mode}, "nats_subject": {f.NATS.Subject}, "nats_payload": {f.NATS.Payload},
			"nats_headers": {f.NATS.Headers}, "amqp_connection": {f.AMQP.Connection}, "amqp_exchange": {f.AMQP.Exchange},
			"amqp_routing_key": {f.AMQP.RoutingKey}, "amqp_payload": {f.AMQP.Payload}, "amqp_content_type": {f.AMQP.ContentType},
			"amqp_headers": {f.AMQP.Headers}, "amqp_transient": {check(f.AMQP.Transient)}, "mqtt_connection": {f.MQTT.Connection},
			"mqtt_topic": {f.MQTT.Topic}, "mqtt_payload": {f.MQTT.Payload}, "mqtt_qos": {f.MQTT.QoS}, "mqtt_retain": {check(f.MQTT.Retain)},
			"redis_connection": {f.Redis.Connection}, "redis_command": {f.Redis.Command}, "redis_key": {f.Redis.Key},
			"redis_payload": {f.Redis.Payload}, "redis_fields": {f.Redis.Fields}, "redis_args": {f.Redis.Args},
			"kafka_connection": {f.Kafka.Connection}, "kafka_topic": {f.Kafka.Topic}, "kafka_key": {f.Kafka.Key},
			"kafka_payload": {f.Kafka.Payload}, "kafka_headers": {f.Kafka.Headers}, "sql_connection": {f.SQL.Connection},
			"sql_statement": {f.SQL.Statement}, "sql_script": {check(f.SQL.Script)}, "grpc_connection": {f.GRPC.Connection},
			"grpc_method": {f.GRPC.Method}, "grpc_request": {f.GRPC.Request}, "grpc_metadata": {f.GRPC.Metadata},
			"grpc_descriptor_set": {f.GRPC.DescriptorSet}}
		back, in, fe := form.Task(v)
		if len(fe) != 0 {
			t.Fatalf("%s: field errors %v", def.Type, fe)
		}
		if back.TypeFields != f.TypeFields {
			t.Errorf("%s: typed values changed:\n%+v\n%+v", def.Type, back.TypeFields, f.TypeFields)
		}
		if got, want := in.Spec(), def.Spec(); !reflect.DeepEqual(got, want) {
			t.Errorf("%s: read back %+v, want %+v", def.Type, got, want)
		}
	}
	// Lines that do not read are said under their field.
	_, _, fe := form.Task(url.Values{"title": {"t"}, "type": {"grpc"}, "schedule_kind": {"cron"}, "schedule_cron": {"0 * * * *"},
		"grpc_connection": {"g"}, "grpc_method": {"pkg.Svc/Do"}, "grpc_metadata": {"x-a: 1\nno colon"}})
	if msg := fe["grpc.metadata"]; msg != `line 2 has no ':' (one "Name: value" per line)` {
		t.Errorf("grpc.metadata: %q (%v)", msg, fe)
	}
	_, _, fe = form.Task(url.Values{"title": {"t"}, "type": {"mqtt"}, "schedule_kind": {"cron"}, "schedule_cron": {"0 * * * *"},
		"mqtt_connection": {"m"}, "mqtt_topic": {"a"}, "mqtt_qos": {"high"}})
	if fe["mqtt.qos"] == "" {
		t.Errorf("a QoS that is no number: %v", fe)
	}
}
