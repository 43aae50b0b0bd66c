package master_test

import (
	"errors"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/schedulemaster-go/schedulemaster/master"
	"github.com/schedulemaster-go/schedulemaster/protocol"
	"github.com/schedulemaster-go/schedulemaster/store"
	"github.com/schedulemaster-go/schedulemaster/store/storetest"
)

func natsInput(conn string, executors ...string) master.TaskInput {
	return master.TaskInput{
		TaskDef: protocol.TaskDef{Title: "close the day", Type: protocol.TaskNATS,
			Schedule: protocol.Schedule{Kind: protocol.ScheduleInterval, Every: protocol.Duration(time.Hour)},
			NATS:     &protocol.NATSSpec{Connection: conn, Subject: "day.close", Payload: "{{day}}"}},
		Executors: executors,
	}
}

// TestConnectionSecretSealedMaskedAndSentOnlyWithItsTasks: a connection's
// secret is stored sealed (the row holds no plain text) and answered
// masked; a task naming a connection that is not defined, or one of
// another kind, or on workers that do not run its type, is refused at save
// with the field named; a worker that runs the task gets the connection,
// secret included, with it, and again with the new definition after an
// edit (the mask keeping the secret); a worker without the task never gets
// it; a connection tasks use cannot be deleted.
func TestConnectionSecretSealedMaskedAndSentOnlyWithItsTasks(t *testing.T) {
	t.Parallel()
	e := newEnv(t, storetest.OpenSQLite(t))
	e.addMasterNode()
	const secret = "very-secret-value-1"
	cn, err := e.m.Connections().Create(e.ctx, master.ConnectionInput{ConnectionSpec: protocol.ConnectionSpec{
		Name: "bus", Kind: protocol.ConnNATS, Address: "127.0.0.1:4222", User: "sm", Secret: secret}})
	if err != nil {
		t.Fatal(err)
	}
	if cn.Secret != protocol.SecretMask || cn.Project != "default" {
		t.Fatalf("answer: secret %q, project %q", cn.Secret, cn.Project)
	}
	row, err := store.GetConnection(e.ctx, e.s.Store.DB, cn.ID)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(row.SecretEnc, secret) || !strings.HasPrefix(row.SecretEnc, "v1:") {
		t.Fatalf("stored secret %q is not sealed", row.SecretEnc)
	}
	if _, err := e.m.Connections().Create(e.ctx, master.ConnectionInput{ConnectionSpec: protocol.ConnectionSpec{
		Name: "cache", Kind: protocol.ConnRedis, Address: "127.0.0.1:6379"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.m.Connections().Create(e.ctx, master.ConnectionInput{ConnectionSpec: protocol.ConnectionSpec{
		Name: "bus", Kind: protocol.ConnNATS, Address: "127.0.0.1:4222"}}); !isFieldErrors(err, "name") {
		t.Fatalf("a second connection named bus: %v", err)
	}

	// A worker that runs nats tasks (its /health says so) and records what
	// it is sent; a plain one that records too.
	var mu sync.Mutex
	sent := map[string][]string{}
	workers := runningWorkers(e, "plain1", "natsy")
	for name, tw := range workers {
		tw.Serve(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
			switch r.URL.Path {
			case protocol.PathHealth:
				if name == "natsy" {
					rw.Header().Set("Content-Type", "application/json")
					_, _ = rw.Write([]byte(`{"node":"natsy","boot_id":"b","status":"scheduling","running_tasks":0,"allow_shell":false,"allow_types":["nats"]}`))
					return
				}
			case protocol.PathTaskStart:
				b, _ := io.ReadAll(r.Body)
				mu.Lock()
				sent[name] = append(sent[name], string(b))
				mu.Unlock()
				rw.Header().Set("Content-Type", "application/json")
				_, _ = rw.Write([]byte(`{}`))
				return
			}
			tw.Router().ServeHTTP(rw, r)
		}))
	}

	if _, err := e.m.Tasks().Create(e.ctx, natsInput("ghost", "natsy"), "admin"); !isFieldErrors(err, "nats.connection") {
		t.Fatalf("a task naming no defined connection: %v", err)
	}
	if _, err := e.m.Tasks().Create(e.ctx, natsInput("cache", "natsy"), "admin"); !isFieldErrors(err, "nats.connection") ||
		!strings.Contains(err.(protocol.FieldErrors)["nats.connection"], "redis") {
		t.Fatalf("a nats task naming a redis connection: %v", err)
	}
	_, err = e.m.Tasks().Create(e.ctx, natsInput("bus", "plain1"), "admin")
	if !isFieldErrors(err, "executors") || !strings.Contains(err.(protocol.FieldErrors)["executors"], "--allow-types nats") {
		t.Fatalf("a nats task on a worker that does not run nats: %v", err)
	}
	tk, err := e.m.Tasks().Create(e.ctx, natsInput("bus", "natsy"), "admin")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.m.Tasks().Start(e.ctx, tk.ID); err != nil {
		t.Fatal(err)
	}
	last := func(name string) protocol.TaskSpec {
		t.Helper()
		mu.Lock()
		defer mu.Unlock()
		if len(sent[name]) == 0 {
			t.Fatalf("%s was sent nothing", name)
		}
		var spec protocol.TaskSpec
		if err := protocol.DecodeStrict([]byte(sent[name][len(sent[name])-1]), &spec); err != nil {
			t.Fatal(err)
		}
		return spec
	}
	spec := last("natsy")
	if spec.Connection == nil || spec.Connection.Secret != secret || spec.Connection.Address != "127.0.0.1:4222" || spec.Connection.User != "sm" {
		t.Fatalf("the worker got connection %+v", spec.Connection)
	}

	// An edit keeps the secret behind the mask and reaches the worker.
	if _, err := e.m.Connections().Update(e.ctx, cn.ID, master.ConnectionInput{ConnectionSpec: protocol.ConnectionSpec{
		Name: "bus", Kind: protocol.ConnNATS, Address: "127.0.0.1:4223", User: "sm", Secret: protocol.SecretMask}}, cn.Version); err != nil {
		t.Fatal(err)
	}
	spec = last("natsy")
	if spec.Connection == nil || spec.Connection.Secret != secret || spec.Connection.Address != "127.0.0.1:4223" {
		t.Fatalf("after the edit the worker got %+v", spec.Connection)
	}
	if _, err := e.m.Connections().Update(e.ctx, cn.ID, master.ConnectionInput{ConnectionSpec: protocol.ConnectionSpec{
		Name: "bus", Kind: protocol.ConnRedis, Address: "127.0.0.1:6379"}}, 0); !isFieldErrors(err, "name") {
		t.Fatalf("changing the kind of a connection a task uses: %v", err)
	}
	mu.Lock()
	for _, body := range sent["plain1"] {
		if strings.Contains(body, secret) {
			t.Errorf("plain1, which runs no task using it, was sent the secret: %s", body)
		}
	}
	mu.Unlock()
	err = e.m.Connections().Delete(e.ctx, cn.ID)
	var me *master.Error
	if !errors.As(err, &me) || me.Kind != master.KindState || !strings.Contains(err.Error(), "close the day") {
		t.Fatalf("deleting a connection a task uses: %v", err)
	}
	list, err := e.m.Connections().List(e.ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range list {
		if c.Secret != "" && c.Secret != protocol.SecretMask {
			t.Fatalf("list shows a secret: %+v", c)
		}
	}
}

// TestExportApplyNamesTheConnection: export names a task's connection and
// never its secret; apply on a master without that connection refuses the
// task, naming the field; once the connection is defined there, the same
// document creates the task, and its export is the same document.
func TestExportApplyNamesTheConnection(t *testing.T) {
	t.Parallel()
	const secret = "apply-secret-value"
	setup := func(withConn bool) *env {
		e := newEnv(t, storetest.OpenSQLite(t))
		e.addMasterNode()
		// An executor that does not answer: it may run nats (it cannot
		// say), as an older or a stopped worker.
		if err := store.CreateNode(e.ctx, e.s.Store.DB, &store.Node{Name: "w9", Type: store.TypeWorker, Host: "127.0.0.1:1",
			Protocol: "http", Priority: 1, Status: store.StatusOffline}); err != nil {
			t.Fatal(err)
		}
		if withConn {
			if _, err := e.m.Connections().Create(e.ctx, master.ConnectionInput{ConnectionSpec: protocol.ConnectionSpec{
				Name: "bus", Kind: protocol.ConnNATS, Address: "127.0.0.1:4222", Secret: secret}}); err != nil {
				t.Fatal(err)
			}
		}
		return e
	}
	e := setup(true)
	in := natsInput("bus", "w9")
	in.Params = map[string]string{"day": "today"}
	in.NATS.Headers = map[string]string{"X-Source": "sm"}
	e.mustCreate(in)
	doc := e.export()
	for _, want := range []string{"type: nats", "connection: bus", "subject: day.close", "X-Source: sm"} {
		if !strings.Contains(doc, want) {
			t.Errorf("export lacks %q:\n%s", want, doc)
		}
	}
	if strings.Contains(doc, secret) {
		t.Fatalf("export holds the connection's secret:\n%s", doc)
	}

	bare := setup(false)
	_, err := bare.apply(doc, nil, master.ApplyOptions{})
	if err == nil || !strings.Contains(err.Error(), "nats.connection") || !strings.Contains(err.Error(), `"bus"`) {
		t.Fatalf("apply without the connection: %v", err)
	}
	if _, total, _ := bare.m.Tasks().List(bare.ctx, store.TaskFilter{}); total != 0 {
		t.Fatalf("the refused document made %d tasks", total)
	}
	withConn := setup(true)
	plan, err := withConn.apply(doc, nil, master.ApplyOptions{})
	if err != nil || plan.Create != 1 || !plan.Applied {
		t.Fatalf("apply with the connection defined: %v %+v", err, plan)
	}
	if doc2 := withConn.export(); doc2 != doc {
		t.Fatalf("export after apply differs:\n--- first\n%s\n--- second\n%s", doc, doc2)
	}
}
