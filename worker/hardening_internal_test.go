package worker

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/go-co-op/gocron/v2"

	"github.com/schedulemaster-go/schedulemaster/protocol"
	"github.com/schedulemaster-go/schedulemaster/store/storetest/testutil"
)

func TestTailBufferCutsOnACharacterBoundaryWithANotice(t *testing.T) {
	t.Parallel()
	b := &tailBuffer{max: 10}
	// 'é' is two bytes: 7 of them are 14 bytes, so a 10-byte cut lands inside
	// the stream, and an odd cut would split one.
	b.Write([]byte("x" + strings.Repeat("é", 7)))
	s, binary := b.Output()
	if binary {
		t.Error("valid UTF-8 marked binary")
	}
	if !utf8.ValidString(s) {
		t.Fatalf("output %q is not valid UTF-8", s)
	}
	const notice = "[… 5 earlier bytes truncated]\n"
	if !strings.HasPrefix(s, notice) {
		t.Fatalf("output %q does not start with %q", s, notice)
	}
	if body := strings.TrimPrefix(s, notice); body != strings.Repeat("é", 5) {
		t.Fatalf("kept %q, want the last 5 characters", body)
	}
}

func TestTailBufferReplacesNULAndInvalidBytes(t *testing.T) {
	t.Parallel()
	b := &tailBuffer{max: protocol.MaxOutputBytes}
	b.Write([]byte("\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\xff"))
	s, binary := b.Output()
	if !binary {
		t.Error("NUL and invalid bytes not reported as binary output")
	}
	if strings.ContainsRune(s, 0) || !utf8.ValidString(s) {
		t.Fatalf("output %q still has NUL or invalid UTF-8", s)
	}
	if !strings.Contains(s, "\uFFFDPNG") || !strings.Contains(s, "IHDR\uFFFD") {
		t.Fatalf("odd bytes not made visible as U+FFFD: %q", s)
	}
}

// Random writes: the output is always valid UTF-8 without NUL, bounded, and
// names what it cut.
func TestTailBufferRandomBytes(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(1, 2))
	for i := 0; i < 300; i++ {
		max := 1 + rng.IntN(64)
		b := &tailBuffer{max: max}
		total := 0
		for range 1 + rng.IntN(8) {
			p := make([]byte, rng.IntN(3*max))
			for j := range p {
				p[j] = byte(rng.IntN(256))
			}
			b.Write(p)
			total += len(p)
		}
		checkTail(t, b, max, total)
	}
}

// checkTail asserts the output contract of a tailBuffer.
func checkTail(t *testing.T, b *tailBuffer, max, total int) {
	t.Helper()
	s, _ := b.Output()
	if !utf8.ValidString(s) || strings.ContainsRune(s, 0) {
		t.Fatalf("output %q: invalid UTF-8 or NUL", s)
	}
	body := s
	if strings.HasPrefix(s, "[… ") {
		i := strings.Index(s, " earlier bytes truncated]\n")
		if i < 0 {
			t.Fatalf("output %q: notice without its end", s)
		}
		var n int
		if _, err := fmt.Sscanf(s[len("[… "):i], "%d", &n); err != nil || n <= 0 || n > total {
			t.Fatalf("output %q: notice counts %d of %d bytes", s, n, total)
		}
		body = s[i+len(" earlier bytes truncated]\n"):]
	} else if total > max*3 {
		t.Fatalf("%d bytes into a %d-byte buffer but no truncation notice: %q", total, max, s)
	}
	if len(body) > max {
		t.Fatalf("kept %d bytes, more than the bound %d", len(body), max)
	}
}

// start() updating a task's executors while its job fires must not race
// (go test -race): fire reads the spec without the runner's lock.
func TestRunnerStartWhileFiringDoesNotRace(t *testing.T) {
	t.Parallel()
	r := &runner{
		log: testutil.Discard(), node: func() string { return "w1" }, limit: newLimiter(1),
		http: http.DefaultClient, jobs: map[string]*taskJob{}, ctx: context.Background(),
		claim: func(context.Context, string, time.Time, runID) (bool, error) { return false, nil },
	}
	var err error
	r.sched, err = newTestScheduler()
	if err != nil {
		t.Fatal(err)
	}
	defer r.sched.Shutdown()
	spec := protocol.TaskSpec{TaskDef: protocol.TaskDef{ID: "t1", Title: "t", Type: protocol.TaskHTTP, Schedule: protocol.Schedule{Kind: protocol.ScheduleInterval, Every: protocol.Duration(time.Hour)},
		HTTP: &protocol.HTTPSpec{URL: "http://127.0.0.1:1/"}}, Executors: 2}
	if err := r.start(spec); err != nil {
		t.Fatal(err)
	}
	tj := r.jobs["t1"]
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		for i := 0; i < 200; i++ {
			s := spec
			s.Executors = 2 + i%3
			if err := r.start(s); err != nil {
				t.Error(err)
				return
			}
		}
	}()
	go func() {
		defer wg.Done()
		for i := 0; i < 200; i++ {
			r.fire(tj) // claims (and loses) every fire: nothing runs
		}
	}()
	wg.Wait()
	if got, ok := r.get("t1"); !ok || got.Executors != 2+199%3 {
		t.Fatalf("after the updates: %+v, want executors %d", got, 2+199%3)
	}
}

// scriptedMaster answers run batches as the test says, and records what it stored.
type scriptedMaster struct {
	mu      sync.Mutex
	down    bool
	reject  map[string]bool // listed as rejected in the answer
	unread  map[string]bool // a batch holding one of these gets a 400 as a whole
	stored  map[string]int
	batches int
}

func newScriptedMaster() *scriptedMaster {
	return &scriptedMaster{reject: map[string]bool{}, unread: map[string]bool{}, stored: map[string]int{}}
}

func (m *scriptedMaster) post(_ context.Context, runs []protocol.RunReport) (protocol.RunsResponse, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.batches++
	if m.down {
		return protocol.RunsResponse{}, errors.New("connection refused")
	}
	for _, r := range runs {
		if m.unread[r.ID] {
			return protocol.RunsResponse{}, fmt.Errorf("%w: master answered 400", errBatchRefused)
		}
	}
	var resp protocol.RunsResponse
	for _, r := range runs {
		if m.reject[r.ID] {
			resp.Rejected = append(resp.Rejected, protocol.RunRejected{ID: r.ID, Error: "task unknown"})
			continue
		}
		m.stored[r.ID]++
		resp.Accepted++
	}
	return resp, nil
}

func (m *scriptedMaster) count(id string) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.stored[id]
}

func (m *scriptedMaster) total() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.stored)
}

func journalSize(t *testing.T, dir string) int64 {
	t.Helper()
	st, err := os.Stat(filepath.Join(dir, "runs.spool"))
	if err != nil {
		t.Fatal(err)
	}
	return st.Size()
}

func TestReporterDropsRejectedRunsAndNeverResendsThem(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	m := newScriptedMaster()
	m.reject["bad1"], m.reject["bad2"] = true, true
	r := newReporter(dir, 0, testutil.Discard(), m.post)
	ctx, cancel := context.WithCancel(context.Background())
	go r.run(ctx)
	waitAtEnd(t, cancel, r)
	for _, id := range []string{"a", "bad1", "b", "bad2", "c"} {
		r.add(protocol.RunReport{ID: id, TaskID: "t"})
	}
	testutil.Eventually(t, 10*time.Second, func() bool { return m.total() == 3 && r.stats().Dropped == 2 }, "good runs stored and bad ones dropped")
	testutil.Eventually(t, 5*time.Second, func() bool { return journalSize(t, dir) == 0 }, "journal emptied")
	m.mu.Lock()
	before := m.batches
	m.mu.Unlock()
	r.add(protocol.RunReport{ID: "d", TaskID: "t"})
	testutil.Eventually(t, 10*time.Second, func() bool { return m.count("d") == 1 }, "a later run delivered")
	m.mu.Lock()
	after := m.batches
	m.mu.Unlock()
	if after != before+1 {
		t.Errorf("%d batches for one new run: rejected runs were sent again", after-before)
	}
	cancel()
	<-r.done
}

// A run the master cannot read at all (400 for the whole batch) is isolated by
// splitting and dropped; every other run of the batch is stored. Also after a
// restart, with the bad run first in the journal.
func TestReporterIsolatesAnUnreadableRun(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	log := testutil.Discard()
	down := newScriptedMaster()
	down.down = true
	r := newReporter(dir, 0, log, down.post)
	r.add(protocol.RunReport{ID: "poison", TaskID: "t"})
	for i := range 40 {
		r.add(protocol.RunReport{ID: fmt.Sprintf("ok%02d", i), TaskID: "t"})
	}
	// Killed before any delivery: the next process finds the journal.
	m := newScriptedMaster()
	m.unread["poison"] = true
	r2 := newReporter(dir, 0, log, m.post)
	ctx, cancel := context.WithCancel(context.Background())
	go r2.run(ctx)
	waitAtEnd(t, cancel, r2)
	testutil.Eventually(t, 10*time.Second, func() bool { return m.total() == 40 }, "the 40 good runs delivered around the unreadable one")
	testutil.Eventually(t, 5*time.Second, func() bool { return r2.stats().Dropped == 1 && journalSize(t, dir) == 0 }, "the unreadable run dropped and the journal emptied")
	// Delivery goes on.
	r2.add(protocol.RunReport{ID: "later", TaskID: "t"})
	testutil.Eventually(t, 10*time.Second, func() bool { return m.count("later") == 1 }, "a later run delivered")
	cancel()
	<-r2.done
	for id, n := range m.stored {
		if n != 1 {
			t.Errorf("run %s stored %d times", id, n)
		}
	}
}

// An unreachable master or a 5xx keeps the runs: none is dropped.
func TestReporterKeepsRunsWhileTheMasterFails(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	m := newScriptedMaster()
	m.down = true
	r := newReporter(dir, 0, testutil.Discard(), m.post)
	ctx, cancel := context.WithCancel(context.Background())
	go r.run(ctx)
	waitAtEnd(t, cancel, r)
	for i := range 20 {
		r.add(protocol.RunReport{ID: fmt.Sprintf("r%d", i), TaskID: "t"})
	}
	testutil.Eventually(t, 5*time.Second, func() bool { m.mu.Lock(); defer m.mu.Unlock(); return m.batches >= 2 }, "retried")
	if st := r.stats(); st.Dropped != 0 || st.Overflow != 0 {
		t.Fatalf("runs dropped while the master was down: %+v", st)
	}
	m.mu.Lock()
	m.down = false
	m.mu.Unlock()
	testutil.Eventually(t, 15*time.Second, func() bool { return m.total() == 20 }, "all runs delivered once the master is back")
	cancel()
	<-r.done
}

// Past the journal's bound new reports are dropped and counted; the older ones
// stay and are delivered.
func TestReporterJournalBound(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	m := newScriptedMaster()
	m.down = true
	const bound = 20 << 10
	r := newReporter(dir, bound, testutil.Discard(), m.post)
	ctx, cancel := context.WithCancel(context.Background())
	go r.run(ctx)
	waitAtEnd(t, cancel, r)
	out := strings.Repeat("o", 900)
	for i := range 100 {
		r.add(protocol.RunReport{ID: fmt.Sprintf("r%03d", i), TaskID: "t", Output: out})
	}
	st := r.stats()
	if st.Overflow == 0 || st.JournalBytes > bound || journalSize(t, dir) > bound {
		t.Fatalf("journal past its bound: %+v, file %d bytes, bound %d", st, journalSize(t, dir), bound)
	}
	kept := 100 - int(st.Overflow)
	m.mu.Lock()
	m.down = false
	m.mu.Unlock()
	testutil.Eventually(t, 15*time.Second, func() bool { return m.total() == kept }, "the kept runs delivered")
	for i := range kept {
		if m.count(fmt.Sprintf("r%03d", i)) != 1 {
			t.Fatalf("run r%03d (among the oldest) was not kept", i)
		}
	}
	cancel()
	<-r.done
}

// More than the queue holds in memory: delivery streams the journal from disk
// in batches, everything arrives once, and the journal is emptied.
func TestReporterStreamsASpilledJournal(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	m := newScriptedMaster()
	m.down = true
	r := newReporter(dir, 0, testutil.Discard(), m.post)
	ctx, cancel := context.WithCancel(context.Background())
	go r.run(ctx)
	waitAtEnd(t, cancel, r)
	out := strings.Repeat("z", 60<<10)
	const n = 400 // 400 x 60 KiB: past the 16 MiB queue
	for i := range n {
		r.add(protocol.RunReport{ID: fmt.Sprintf("s%03d", i), TaskID: "t", Output: out})
	}
	r.mu.Lock()
	spilled := r.spilled
	r.mu.Unlock()
	if !spilled {
		t.Fatal("the queue never spilled to the journal")
	}
	m.mu.Lock()
	m.down = false
	m.mu.Unlock()
	// Keep adding while it delivers.
	for i := range 50 {
		r.add(protocol.RunReport{ID: fmt.Sprintf("late%02d", i), TaskID: "t"})
	}
	testutil.Eventually(t, 30*time.Second, func() bool { return m.total() == n+50 }, "all runs delivered")
	testutil.Eventually(t, 5*time.Second, func() bool { return journalSize(t, dir) == 0 }, "journal emptied")
	cancel()
	<-r.done
	for id, c := range m.stored {
		if c != 1 {
			t.Errorf("run %s stored %d times", id, c)
		}
	}
}

// A crash in the middle of an append leaves a partial line; the next process
// skips it and still delivers the reports around it.
func TestReporterSurvivesAPartialJournalLine(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	spool := filepath.Join(dir, "runs.spool")
	content := `{"id":"a","task_id":"t"}` + "\n" + `{"id":"b","task_` // cut mid-line
	if err := os.WriteFile(spool, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	m := newScriptedMaster()
	r := newReporter(dir, 0, testutil.Discard(), m.post)
	r.add(protocol.RunReport{ID: "c", TaskID: "t"})
	ctx, cancel := context.WithCancel(context.Background())
	go r.run(ctx)
	waitAtEnd(t, cancel, r)
	testutil.Eventually(t, 10*time.Second, func() bool { return m.count("a") == 1 && m.count("c") == 1 }, "reports around a partial line delivered")
	cancel()
	<-r.done
	if st, err := os.Stat(spool); err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("journal mode: %v %v, want 0600", st.Mode(), err)
	}
}

func TestReadJournalLineBoundsLongLines(t *testing.T) {
	t.Parallel()
	long := bytes.Repeat([]byte("x"), maxJournalLine+10)
	data := append(append(long, '\n'), []byte("{}\n")...)
	br := newBufReader(data)
	line, n, tooLong, err := readJournalLine(br)
	if !tooLong || line != nil || n != int64(len(long)+1) || err != nil {
		t.Fatalf("long line: tooLong %v, %d bytes, err %v", tooLong, n, err)
	}
	line, _, tooLong, _ = readJournalLine(br)
	if tooLong || string(line) != "{}\n" {
		t.Fatalf("next line %q", line)
	}
}

func newBufReader(data []byte) *bufio.Reader { return bufio.NewReader(bytes.NewReader(data)) }

func newTestScheduler() (gocron.Scheduler, error) {
	return gocron.NewScheduler(gocron.WithLocation(time.UTC))
}
