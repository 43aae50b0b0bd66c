package worker

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/schedulemaster-go/schedulemaster/protocol"
	"github.com/schedulemaster-go/schedulemaster/store/storetest/testutil"
)

func TestTailBufferKeepsTheEnd(t *testing.T) {
	t.Parallel()
	b := &tailBuffer{max: 10}
	for i := 0; i < 5; i++ {
		b.Write([]byte("abcdefgh"))
	}
	s, binary := b.Output()
	want := "[… 30 earlier bytes truncated]\n" + "ghabcdefgh"
	if s != want || binary {
		t.Fatalf("tail %q (binary %v): want %q", s, binary, want)
	}
	small := &tailBuffer{max: 100}
	small.Write([]byte("hello"))
	if small.String() != "hello" {
		t.Fatalf("short output changed: %q", small.String())
	}
}

func TestScheduledFireNamesTheScheduleTime(t *testing.T) {
	t.Parallel()
	tj := planJob(t, protocol.TaskDef{Schedule: protocol.Schedule{Kind: protocol.ScheduleCron, Cron: "*/5 * * * * *"}})
	base := time.Date(2026, 1, 2, 3, 4, 10, 0, time.UTC)
	for _, lag := range []time.Duration{0, 3 * time.Millisecond, 900 * time.Millisecond, 4 * time.Second} {
		if got := tj.scheduledFire(base.Add(lag)); !got.Equal(base) {
			t.Errorf("lag %s: fire %s, want %s", lag, got, base)
		}
	}
	// A timer firing a little early still names the coming fire.
	if got := tj.scheduledFire(base.Add(-50 * time.Millisecond)); !got.Equal(base) {
		t.Errorf("early: fire %s, want %s", got, base)
	}
	iv := planJob(t, protocol.TaskDef{Schedule: protocol.Schedule{Kind: protocol.ScheduleInterval, Every: protocol.Duration(2 * time.Second)}})
	if got := iv.scheduledFire(base.Add(30 * time.Millisecond)); !got.Equal(base) {
		t.Errorf("interval: fire %s, want %s", got, base)
	}
}

// planJob is a task of d with its plan, not scheduled.
func planJob(t *testing.T, d protocol.TaskDef) *taskJob {
	t.Helper()
	plan, err := protocol.NewPlan(&d)
	if err != nil {
		t.Fatal(err)
	}
	return &taskJob{spec: protocol.TaskSpec{TaskDef: d}, plan: plan}
}

// fakeMaster accepts or refuses run batches and remembers the run ids it got.
type fakeMaster struct {
	mu   sync.Mutex
	down bool
	got  map[string]int
}

func (f *fakeMaster) post(_ context.Context, runs []protocol.RunReport) (protocol.RunsResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.down {
		return protocol.RunsResponse{}, errors.New("connection refused")
	}
	for _, r := range runs {
		f.got[r.ID]++
	}
	return protocol.RunsResponse{Accepted: len(runs)}, nil
}

func (f *fakeMaster) count() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.got)
}

func TestReporterSpoolsWhileMasterIsDownAndDeliversLater(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	fm := &fakeMaster{down: true, got: map[string]int{}}
	log := testutil.Discard()
	r := newReporter(dir, 0, log, fm.post)
	ctx, cancel := context.WithCancel(context.Background())
	go r.run(ctx)
	waitAtEnd(t, cancel, r)
	for i := 0; i < 50; i++ {
		r.add(protocol.RunReport{ID: "r" + string(rune('A'+i%26)) + string(rune('a'+i/26)), TaskID: "t"})
	}
	spool := filepath.Join(dir, "runs.spool")
	deadline := time.Now().Add(5 * time.Second)
	for {
		if st, err := os.Stat(spool); err == nil && st.Size() > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("reports were not spooled while the master was down")
		}
		time.Sleep(10 * time.Millisecond)
	}
	fm.mu.Lock()
	fm.down = false
	fm.mu.Unlock()
	deadline = time.Now().Add(20 * time.Second)
	for fm.count() < 50 {
		if time.Now().After(deadline) {
			t.Fatalf("only %d of 50 reports delivered after the master came back", fm.count())
		}
		time.Sleep(20 * time.Millisecond)
	}
	deadline = time.Now().Add(5 * time.Second)
	for {
		st, err := os.Stat(spool)
		if err == nil && st.Size() == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("journal not emptied after delivery: %v", err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	for id, n := range fm.got {
		if n != 1 {
			t.Errorf("report %s delivered %d times", id, n)
		}
	}
	cancel()
	<-r.done
}

func TestReporterSpoolsAtShutdownAndANewProcessDelivers(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	log := testutil.Discard()
	down := &fakeMaster{down: true, got: map[string]int{}}
	r := newReporter(dir, 0, log, down.post)
	ctx, cancel := context.WithCancel(context.Background())
	// Queue before the loop runs, then stop at once: the flush must spool them.
	for i := 0; i < 10; i++ {
		r.add(protocol.RunReport{ID: "s" + string(rune('a'+i)), TaskID: "t"})
	}
	cancel()
	r.run(ctx)
	up := &fakeMaster{got: map[string]int{}}
	r2 := newReporter(dir, 0, log, up.post)
	ctx2, cancel2 := context.WithCancel(context.Background())
	defer cancel2()
	go r2.run(ctx2)
	waitAtEnd(t, cancel2, r2)
	deadline := time.Now().Add(10 * time.Second)
	for up.count() < 10 {
		if time.Now().After(deadline) {
			t.Fatalf("a restarted worker delivered %d of 10 spooled reports", up.count())
		}
		time.Sleep(20 * time.Millisecond)
	}
	for id, n := range up.got {
		if n != 1 {
			t.Fatalf("report %s delivered %d times", id, n)
		}
	}
}

// A process killed right after a run keeps its report in the journal; the next
// process delivers it.
func TestReporterJournalSurvivesAKill(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	log := testutil.Discard()
	never := func(context.Context, []protocol.RunReport) (protocol.RunsResponse, error) {
		return protocol.RunsResponse{}, errors.New("killed before delivery")
	}
	r := newReporter(dir, 0, log, never)
	r.add(protocol.RunReport{ID: "k1", TaskID: "t"}) // the loop never ran: as if SIGKILL came now
	up := &fakeMaster{got: map[string]int{}}
	r2 := newReporter(dir, 0, log, up.post)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go r2.run(ctx)
	waitAtEnd(t, cancel, r2)
	deadline := time.Now().Add(10 * time.Second)
	for up.count() < 1 {
		if time.Now().After(deadline) {
			t.Fatal("the journaled report of a killed process was not delivered by the next one")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// waitAtEnd stops the reporter's delivery loop when the test ends and waits
// for it to return, so that its goroutine never outlives the test (nor
// writes into a removed temporary directory).
func waitAtEnd(t *testing.T, cancel context.CancelFunc, r *reporter) {
	t.Cleanup(func() {
		cancel()
		<-r.done
	})
}
