package worker

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/schedulemaster-go/schedulemaster/protocol"
	"github.com/schedulemaster-go/schedulemaster/store/storetest/testutil"
)

// lifeConfig is a manual worker's configuration on dataDir reporting to
// masterURL.
func lifeConfig(dataDir, masterURL string) Config {
	return Config{Identity: "w1", Protocol: "http", IP: "127.0.0.1", Port: 1, Priority: 1, MaxConcurrency: 10,
		MasterURL: masterURL, ClusterKey: "lifecycle-test-cluster-key-0123456789", DataDir: dataDir,
		StopTimeout: 2 * time.Second}
}

// runAsync runs w in the background until ctx ends or Stop; the channel
// gets Run's answer.
func runAsync(ctx context.Context, w *Worker) <-chan error {
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	return done
}

func waitReady(t *testing.T, w *Worker) {
	t.Helper()
	select {
	case <-w.Ready():
	case <-time.After(10 * time.Second):
		t.Fatal("the worker was not ready within 10s")
	}
}

func waitRun(t *testing.T, done <-chan error) error {
	t.Helper()
	select {
	case err := <-done:
		return err
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return within 10s")
		return nil
	}
}

// New acts on nothing: a command a crashed predecessor left running stays
// alive and listed, no scheduler (and so no gocron goroutine) exists, the
// report delivery has not started and the master hears nothing. Run kills
// the command and reports its run as killed; Stop makes Run return.
func TestNewActsOnNothingRunStartsEverything(t *testing.T) {
	t.Parallel()
	dataDir := t.TempDir()
	g, err := newShellGroups(dataDir, testutil.Discard())
	if err != nil {
		t.Fatal(err)
	}
	left, _, leftDone := startGroup(t, "sleep 300")
	at := time.Now().UTC().Add(-time.Minute).Truncate(time.Millisecond)
	_ = g.record(left.Process.Pid, &protocol.RunReport{ID: "run-left", TaskID: "t1", Node: "w1", ScheduledAt: at, StartedAt: at, Attempt: 1})
	entry := filepath.Join(dataDir, ShellGroupsDir, strconv.Itoa(left.Process.Pid))
	m := newRunsMaster(t)

	w, err := New(lifeConfig(dataDir, m.srv.URL), testutil.Discard())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(entry); err != nil {
		t.Fatalf("New reaped the predecessor's command list: %v", err)
	}
	select {
	case <-leftDone:
		t.Fatal("New killed the predecessor's command")
	default:
	}
	if w.sched != nil || w.runner.sched != nil {
		t.Fatal("New made the scheduler (gocron starts a goroutine with it)")
	}
	select {
	case <-w.reports.done:
		t.Fatal("the report delivery ran before Run")
	case <-w.started:
		t.Fatal("started before Run")
	case <-w.ready:
		t.Fatal("ready before Run")
	default:
	}
	if got := m.runs("t1"); len(got) != 0 {
		t.Fatalf("the master got %d reports before Run", len(got))
	}

	done := runAsync(context.Background(), w)
	waitReady(t, w)
	select {
	case <-leftDone:
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not kill the predecessor's command")
	}
	if _, err := os.Stat(entry); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the reaped command is still listed: %v", err)
	}
	testutil.Eventually(t, 10*time.Second, func() bool {
		got := m.runs("t1")
		return len(got) == 1 && got[0].ID == "run-left" && got[0].Result == protocol.ResultKilled
	}, "the killed run was not reported: %+v", m.runs("t1"))
	if err := w.Stop(context.Background()); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	if err := waitRun(t, done); err != nil {
		t.Errorf("Run after Stop returned %v, want nil", err)
	}
}

// Stop without Run returns at once and releases the journal; a second Stop
// is fine; Run after Stop starts nothing; Startup is refused.
func TestStopWithoutRun(t *testing.T) {
	t.Parallel()
	m := newRunsMaster(t)
	w, err := New(lifeConfig(t.TempDir(), m.srv.URL), testutil.Discard())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := w.Stop(ctx); err != nil {
		t.Fatalf("Stop before Run: %v", err)
	}
	w.reports.mu.Lock()
	open := w.reports.file != nil
	w.reports.mu.Unlock()
	if open {
		t.Error("Stop before Run left the journal open")
	}
	if err := w.Stop(ctx); err != nil {
		t.Fatalf("second Stop: %v", err)
	}
	if err := w.Run(ctx); !errors.Is(err, ErrStopped) {
		t.Fatalf("Run after Stop = %v, want ErrStopped", err)
	}
	if w.sched != nil {
		t.Error("Run after Stop made a scheduler")
	}
	if err := w.Startup(ctx, protocol.StartupRequest{}); !errors.Is(err, ErrNotRunning) {
		t.Fatalf("Startup after Stop = %v, want ErrNotRunning", err)
	}
}

// Startup before Run waits for it; a second Run is refused; Stop twice is
// fine and Run returns once the first has ended.
func TestRunThenStopTwice(t *testing.T) {
	t.Parallel()
	m := newRunsMaster(t)
	w, err := New(lifeConfig(t.TempDir(), m.srv.URL), testutil.Discard())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	startup := make(chan error, 1)
	go func() { startup <- w.Startup(ctx, protocol.StartupRequest{}) }()
	done := runAsync(context.Background(), w)
	select {
	case err := <-startup:
		if err != nil {
			t.Fatalf("Startup sent before Run: %v", err)
		}
	case <-ctx.Done():
		t.Fatal("Startup did not go through once Run started")
	}
	if h := w.Health(); h.Status != protocol.StateScheduling {
		t.Errorf("after Startup: %+v", h)
	}
	if err := w.Run(ctx); !errors.Is(err, ErrRunning) {
		t.Fatalf("second Run = %v, want ErrRunning", err)
	}
	if err := w.Stop(ctx); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	if err := w.Stop(ctx); err != nil {
		t.Fatalf("second Stop: %v", err)
	}
	if err := waitRun(t, done); err != nil {
		t.Errorf("Run = %v, want nil", err)
	}
	if h := w.Health(); h.Status == protocol.StateScheduling {
		t.Errorf("still scheduling after Stop: %+v", h)
	}
}

// The end of Run's ctx takes the same path down as Stop: scheduling stops,
// the loops end, and a later Stop returns at once.
func TestRunContextEndStops(t *testing.T) {
	t.Parallel()
	m := newRunsMaster(t)
	w, err := New(lifeConfig(t.TempDir(), m.srv.URL), testutil.Discard())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := runAsync(ctx, w)
	waitReady(t, w)
	if err := w.Startup(ctx, protocol.StartupRequest{}); err != nil {
		t.Fatal(err)
	}
	cancel()
	if err := waitRun(t, done); err != nil {
		t.Errorf("Run = %v, want nil", err)
	}
	for name, ch := range map[string]<-chan struct{}{"stop": w.stopDone, "reports": w.reports.done, "notices": w.noticesDone, "fires": w.runner.fires.done} {
		select {
		case <-ch:
		default:
			t.Errorf("%s not ended when Run returned", name)
		}
	}
	if w.isScheduling() {
		t.Error("still scheduling after Run's ctx ended")
	}
	sctx, scancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer scancel()
	if err := w.Stop(sctx); err != nil {
		t.Errorf("Stop after Run ended: %v", err)
	}
}
