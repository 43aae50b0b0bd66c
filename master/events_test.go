package master_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/schedulemaster-go/schedulemaster/master"
	"github.com/schedulemaster-go/schedulemaster/protocol"
	"github.com/schedulemaster-go/schedulemaster/store"
	"github.com/schedulemaster-go/schedulemaster/store/storetest"
)

// events returns the event log, oldest first, as "actor action target outcome".
func (e *env) events(f store.EventFilter) []store.Event {
	e.t.Helper()
	f.Limit = 500
	evs, _, err := e.m.Reads().ListEvents(e.ctx, f)
	if err != nil {
		e.t.Fatal(err)
	}
	for i, j := 0, len(evs)-1; i < j; i, j = i+1, j-1 {
		evs[i], evs[j] = evs[j], evs[i]
	}
	return evs
}

func eventLines(evs []store.Event) string {
	var lines []string
	for _, ev := range evs {
		lines = append(lines, fmt.Sprintf("%s %s %s:%s %s", ev.Actor, ev.Action, ev.TargetType, ev.Target, ev.Outcome))
	}
	return strings.Join(lines, "\n")
}

func TestEventsOfNodeActionsAndHealthChecks(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, s storetest.NamedStore) {
		e := newEnv(t, s)
		admin := master.WithActor(e.ctx, "alice")
		tw := startWorker(t, "w1")

		if _, err := e.m.Nodes().Create(admin, tw.Config()); err != nil {
			t.Fatal(err)
		}
		// Enable before Connect is refused: an error line with the reason.
		if _, err := e.m.Nodes().Enable(admin, "w1"); !errors.Is(err, master.ErrState) {
			t.Fatalf("Enable of an offline node = %v, want ErrState", err)
		}
		if _, err := e.m.Nodes().Connect(admin, "w1"); err != nil {
			t.Fatal(err)
		}
		if _, err := e.m.Nodes().Enable(admin, "w1"); err != nil {
			t.Fatal(err)
		}
		if _, err := e.m.Nodes().Disable(master.WithActor(e.ctx, "token:ci"), "w1"); err != nil {
			t.Fatal(err)
		}
		// No actor in the context: the engine itself.
		if _, err := e.m.Nodes().Enable(e.ctx, "w1"); err != nil {
			t.Fatal(err)
		}
		// A refused create (bad host) is recorded too.
		if _, err := e.m.Nodes().Create(admin, protocol.NodeConfig{Name: "bad", Protocol: "http", Host: "nohost", Priority: 1, MaxConcurrency: 1}); err == nil {
			t.Fatal("CreateNode with a bad host succeeded")
		}

		// The worker dies: after max failures the health checker takes it offline.
		tw.Srv.Close()
		for range 3 {
			e.m.Sweep(e.ctx)
		}
		if n := e.node("w1"); n.Status != store.StatusOffline {
			t.Fatalf("w1 after 3 failed sweeps: status %d", n.Status)
		}
		// Later sweeps of a node already offline record nothing more.
		e.m.Sweep(e.ctx)

		got := e.events(store.EventFilter{})
		want := strings.Join([]string{
			"alice node.create node:w1 ok",
			"alice node.enable node:w1 error",
			"alice node.connect node:w1 ok",
			"alice node.enable node:w1 ok",
			"token:ci node.disable node:w1 ok",
			"system node.enable node:w1 ok",
			"alice node.create node:bad error",
			"health-checker node.offline node:w1 ok",
		}, "\n")
		if eventLines(got) != want {
			t.Fatalf("event log:\n%s\nwant:\n%s", eventLines(got), want)
		}
		if d := got[1].Detail; !strings.Contains(d, "offline") || strings.HasPrefix(d, "master:") {
			t.Errorf("refused enable detail = %q, want the reason without the package prefix", d)
		}
		if d := got[6].Detail; !strings.Contains(d, "host") {
			t.Errorf("refused create detail = %q, want the field error", d)
		}
		if d := got[7].Detail; !strings.Contains(d, "3 failed health checks") || !strings.Contains(d, tw.Host) {
			t.Errorf("health-check offline detail = %q, want the count and the reason", d)
		}
		for _, ev := range got {
			if time.Since(ev.At) > time.Minute || ev.At.Location() != time.UTC {
				t.Errorf("event %s at %v: want a recent UTC time", ev.Action, ev.At)
			}
		}

		// Filters work on what the engine wrote.
		if evs := e.events(store.EventFilter{Actor: "alice", Outcome: "ok"}); len(evs) != 3 {
			t.Errorf("alice's successful actions: %d, want 3:\n%s", len(evs), eventLines(evs))
		}
		if evs := e.events(store.EventFilter{Action: "node.enable"}); len(evs) != 3 {
			t.Errorf("enable events: %d, want 3", len(evs))
		}
	})
}

func TestEventsOfRecoveryRegistrationAndGracefulStop(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, s storetest.NamedStore) {
		e := newEnv(t, s)
		admin := master.WithActor(e.ctx, "alice")

		// A manual worker that restarts comes back through the health checker.
		tw := e.running("m1")
		tw.Replace()
		if res := e.m.Sweep(e.ctx); res.Recovered != 1 {
			t.Fatalf("sweep = %+v, want one recovery", res)
		}

		// An auto worker registers and stops gracefully.
		url := e.serveMaster()
		aw := startWorker(t, "a1", autoCfg(url))
		runWorker(t, aw.W)
		storetest.Eventually(t, 10*time.Second, func() bool {
			n, err := store.GetNode(e.ctx, s.Store.DB, "a1")
			return err == nil && n.Status == store.StatusRunning
		}, "a1 never registered")
		ctx, cancel := context.WithTimeout(e.ctx, 10*time.Second)
		defer cancel()
		if err := aw.W.Stop(ctx); err != nil {
			t.Fatal(err)
		}

		// Admin actions on tasks, through the same engine.
		tk, err := e.m.Tasks().Create(admin, master.TaskInput{TaskDef: protocol.TaskDef{
			Title: "ping", Type: protocol.TaskHTTP, Schedule: protocol.Schedule{Kind: protocol.ScheduleInterval, Every: protocol.Duration(time.Hour)},
			HTTP: &protocol.HTTPSpec{Method: "GET", URL: "http://127.0.0.1:1/"}, Timeout: protocol.Duration(time.Second),
		}, Executors: []string{"m1"}}, "alice")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := e.m.Tasks().Start(admin, tk.ID); err != nil {
			t.Fatal(err)
		}
		if _, err := e.m.Tasks().Pause(admin, tk.ID); err != nil {
			t.Fatal(err)
		}
		if _, err := e.m.Tasks().Pause(admin, tk.ID); err == nil {
			t.Fatal("pausing a paused task succeeded")
		}
		if _, err := e.m.Tasks().Resume(admin, tk.ID); err != nil {
			t.Fatal(err)
		}
		if _, node, err := e.m.Tasks().Run(admin, tk.ID); err != nil || node != "m1" {
			t.Fatalf("RunTask = %q, %v", node, err)
		}
		if err := e.m.Tasks().Delete(admin, tk.ID); err != nil {
			t.Fatal(err)
		}
		if err := e.m.Accounts().CreateUser(admin, master.NewUser{Username: "bob", Role: store.RoleViewer, Password: "bob-password-1"}); err != nil {
			t.Fatal(err)
		}

		got := eventLines(e.events(store.EventFilter{}))
		want := strings.Join([]string{
			"system node.create node:m1 ok",
			"system node.connect node:m1 ok",
			"system node.enable node:m1 ok",
			"health-checker node.recover node:m1 ok",
			"worker a1 node.register node:a1 ok",
			"worker a1 node.offline node:a1 ok",
			"alice task.create task:" + tk.ID + " ok",
			"alice task.start task:" + tk.ID + " ok",
			"alice task.pause task:" + tk.ID + " ok",
			"alice task.pause task:" + tk.ID + " error",
			"alice task.resume task:" + tk.ID + " ok",
			"alice task.run task:" + tk.ID + " ok",
			"alice task.stop task:" + tk.ID + " ok",
			"alice task.delete task:" + tk.ID + " ok",
			"alice user.create user:bob ok",
		}, "\n")
		if got != want {
			t.Fatalf("event log:\n%s\nwant:\n%s", got, want)
		}
		evs := e.events(store.EventFilter{Action: "task.run"})
		if len(evs) != 1 || evs[0].Detail != "on node m1" {
			t.Errorf("run once event = %+v, want the node in the detail", evs)
		}
		evs = e.events(store.EventFilter{Action: "node.offline"})
		if len(evs) != 1 || !strings.Contains(evs[0].Detail, "graceful") {
			t.Errorf("graceful offline event = %+v", evs)
		}
	})
}

// With several masters on one database the event log names the master that acted.
func TestEventsNameTheMasterThatActed(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, s storetest.NamedStore) {
		e := newEnv(t, s)
		m2 := newMaster(t, s, func(c *master.Config) { c.Identity = "master-b" })
		admin := master.WithActor(e.ctx, "alice")
		for i, m := range []*master.Master{e.m, m2} {
			cfg := protocol.NodeConfig{Name: fmt.Sprintf("w%d", i+1), Protocol: "http", Host: fmt.Sprintf("127.0.0.1:%d", 2001+i), Priority: 1, MaxConcurrency: 1}
			if _, err := m.Nodes().Create(admin, cfg); err != nil {
				t.Fatal(err)
			}
		}
		got := map[string]string{}
		for _, ev := range e.events(store.EventFilter{Action: "node.create"}) {
			got[ev.Target] = ev.Master
		}
		if got["w1"] != masterName || got["w2"] != "master-b" {
			t.Fatalf("masters recorded: %v, want w1 by %s and w2 by master-b", got, masterName)
		}
	})
}
