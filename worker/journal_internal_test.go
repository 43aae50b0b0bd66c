package worker

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/schedulemaster-go/schedulemaster/protocol"
	"github.com/schedulemaster-go/schedulemaster/store/storetest/testutil"
)

// faultyFile is the journal's fault-injection mode: it wraps the real append
// handle and, on demand, makes the next writes short (only the first short
// bytes reach the file) and fail with ENOSPC, as a full disk does, and makes
// Truncate fail too (a disk gone read-only).
type faultyFile struct {
	journalFile
	mu       sync.Mutex
	full     bool  // writes fail with ENOSPC after short bytes
	short    int   // bytes of a failing write that reach the file
	truncErr error // Truncate fails with it when set
	failed   int   // failed writes
}

func (f *faultyFile) Write(p []byte) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.full {
		return f.journalFile.Write(p)
	}
	f.failed++
	n := min(f.short, len(p))
	if n > 0 {
		if m, err := f.journalFile.Write(p[:n]); err != nil {
			return m, err
		}
	}
	return n, &os.PathError{Op: "write", Path: "runs.spool", Err: syscall.ENOSPC}
}

func (f *faultyFile) Truncate(size int64) error {
	f.mu.Lock()
	err := f.truncErr
	f.mu.Unlock()
	if err != nil {
		return &os.PathError{Op: "truncate", Path: "runs.spool", Err: err}
	}
	return f.journalFile.Truncate(size)
}

func (f *faultyFile) set(full bool, short int, truncErr error) {
	f.mu.Lock()
	f.full, f.short, f.truncErr = full, short, truncErr
	f.mu.Unlock()
}

// withFaults puts the fault-injection wrapper around r's journal.
func withFaults(t *testing.T, r *reporter) *faultyFile {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.file == nil {
		t.Fatal("the reporter has no journal")
	}
	ff := &faultyFile{journalFile: r.file}
	r.file = ff
	return ff
}

// logRecorder keeps every log record's level, message and attributes.
type logRecorder struct {
	mu   sync.Mutex
	recs []logRec
}

type logRec struct {
	level slog.Level
	msg   string
	attrs map[string]string
}

func (l *logRecorder) Enabled(context.Context, slog.Level) bool { return true }
func (l *logRecorder) WithAttrs([]slog.Attr) slog.Handler       { return l }
func (l *logRecorder) WithGroup(string) slog.Handler            { return l }
func (l *logRecorder) Handle(_ context.Context, r slog.Record) error {
	rec := logRec{level: r.Level, msg: r.Message, attrs: map[string]string{}}
	r.Attrs(func(a slog.Attr) bool { rec.attrs[a.Key] = a.Value.String(); return true })
	l.mu.Lock()
	l.recs = append(l.recs, rec)
	l.mu.Unlock()
	return nil
}

// find returns the records whose message contains s.
func (l *logRecorder) find(s string) []logRec {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []logRec
	for _, r := range l.recs {
		if strings.Contains(r.msg, s) {
			out = append(out, r)
		}
	}
	return out
}

func newLogRecorder() (*logRecorder, *slog.Logger) {
	l := &logRecorder{}
	return l, slog.New(l)
}

func framed(t *testing.T, id string) []byte {
	t.Helper()
	rep := protocol.RunReport{ID: id, TaskID: "t", Output: "out of " + id}
	line, err := marshalReport(&rep)
	if err != nil {
		t.Fatal(err)
	}
	return frameRecord(line)
}

// journalRecords reads the journal file as the next process would: the ids
// of its whole records, and whether anything follows the last one.
func journalRecords(t *testing.T, path string) (ids []string, tail int64) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for rest := string(data); rest != ""; {
		line, after, found := strings.Cut(rest, "\n")
		if !found {
			break
		}
		rest = after
		payload, ok := recordPayload([]byte(line + "\n"))
		if !ok {
			t.Fatalf("journal holds a torn or corrupt line %q", line)
		}
		var rep protocol.RunReport
		if err := json.Unmarshal(payload, &rep); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, rep.ID)
	}
	good, _, err := scanJournal(strings.NewReader(string(data)), int64(len(data)))
	if err != nil {
		t.Fatal(err)
	}
	return ids, int64(len(data)) - good
}

func TestRecordPayloadFramesAndOldLines(t *testing.T) {
	t.Parallel()
	rec := framed(t, "a")
	if p, ok := recordPayload(rec); !ok || !json.Valid(p) || !strings.Contains(string(p), `"id":"a"`) {
		t.Fatalf("framed record %q read as %q %v", rec, p, ok)
	}
	for cut := range len(rec) - 1 {
		if _, ok := recordPayload(rec[:cut]); ok {
			t.Fatalf("record cut at %d of %d read as whole", cut, len(rec))
		}
		// A torn record that happens to end in a newline: length and
		// checksum still refuse it.
		if _, ok := recordPayload(append(append([]byte{}, rec[:cut]...), '\n')); ok {
			t.Fatalf("record cut at %d and ended with a newline read as whole", cut)
		}
	}
	flipped := append([]byte{}, rec...)
	flipped[len(flipped)-3] ^= 1
	if _, ok := recordPayload(flipped); ok {
		t.Fatal("a record with a changed byte passed its checksum")
	}
	// The previous release's bare lines are read when valid JSON.
	if p, ok := recordPayload([]byte(`{"id":"old","task_id":"t"}` + "\n")); !ok || string(p) != `{"id":"old","task_id":"t"}` {
		t.Fatalf("old line read as %q %v", p, ok)
	}
	for _, bad := range []string{`{"id":"old","task_`, `{"id":"old","task_` + "\n", "garbage\n", "\n"} {
		if _, ok := recordPayload([]byte(bad)); ok {
			t.Fatalf("%q read as a record", bad)
		}
	}
}

// A record torn by a crash or a full disk is cut off when the journal is
// opened, at every cut point: the records before it are delivered, the next
// one is appended after the last whole record, not glued to the fragment,
// and no corrupt line is ever met.
func TestJournalTornTailCutAtStart(t *testing.T) {
	t.Parallel()
	whole := append(framed(t, "a"), framed(t, "b")...)
	torn := framed(t, "c")
	for cut := 1; cut < len(torn); cut++ {
		dir := t.TempDir()
		spool := filepath.Join(dir, journalFileName)
		if err := os.WriteFile(spool, append(append([]byte{}, whole...), torn[:cut]...), 0o600); err != nil {
			t.Fatal(err)
		}
		logs, log := newLogRecorder()
		m := newScriptedMaster()
		m.down = true
		r := newReporter(dir, 0, log, m.post)
		if st := r.stats(); st.JournalBytes != int64(len(whole)) || journalSize(t, dir) != int64(len(whole)) {
			t.Fatalf("cut %d: journal %d bytes (file %d) after start, want the %d of the whole records", cut, st.JournalBytes, journalSize(t, dir), len(whole))
		}
		if len(logs.find("cut a torn record")) != 1 {
			t.Fatalf("cut %d: the cut is not logged", cut)
		}
		r.add(protocol.RunReport{ID: "d", TaskID: "t"})
		if ids, tail := journalRecords(t, spool); strings.Join(ids, ",") != "a,b,d" || tail != 0 {
			t.Fatalf("cut %d: journal holds %v and %d stray bytes, want a,b,d", cut, ids, tail)
		}
		r.close()
		m.down = false
		r2 := newReporter(dir, 0, log, m.post)
		ctx, cancel := context.WithCancel(context.Background())
		go r2.run(ctx)
		testutil.Eventually(t, 10*time.Second, func() bool { return m.total() == 3 }, "cut %d: a, b and d delivered", cut)
		cancel()
		<-r2.done
		if m.count("c") != 0 || len(logs.find("corrupt")) != 0 {
			t.Fatalf("cut %d: the torn record was read (%d) or met as corrupt (%v)", cut, m.count("c"), logs.find("corrupt"))
		}
	}
}

// A journal written by the previous release (bare JSON lines, one of them
// torn at the end) is still read: its reports are delivered, the torn line
// cut, and new framed records follow.
func TestOldUnframedJournalStillRead(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	spool := filepath.Join(dir, journalFileName)
	old := `{"id":"o1","task_id":"t"}` + "\n" + `{"id":"o2","task_id":"t","output":"x"}` + "\n" + `{"id":"o3","ta`
	if err := os.WriteFile(spool, []byte(old), 0o600); err != nil {
		t.Fatal(err)
	}
	m := newScriptedMaster()
	r := newReporter(dir, 0, testutil.Discard(), m.post)
	r.add(protocol.RunReport{ID: "n1", TaskID: "t"})
	ctx, cancel := context.WithCancel(context.Background())
	go r.run(ctx)
	waitAtEnd(t, cancel, r)
	testutil.Eventually(t, 10*time.Second, func() bool { return m.total() == 3 }, "old and new reports delivered")
	for _, id := range []string{"o1", "o2", "n1"} {
		if m.count(id) != 1 {
			t.Errorf("run %s stored %d times, want once", id, m.count(id))
		}
	}
}

// A write that fails after some bytes (ENOSPC) is cut off at once, at every
// cut point: the report stays in memory, the journal ends at its last whole
// record, and the next report, once space returns, is journaled whole and
// read back by the next process. Nothing is glued.
func TestJournalAppendAfterFailedWriteNotGlued(t *testing.T) {
	t.Parallel()
	probe := framed(t, "b")
	for short := 0; short < len(probe); short++ {
		dir := t.TempDir()
		spool := filepath.Join(dir, journalFileName)
		m := newScriptedMaster()
		m.down = true
		r := newReporter(dir, 0, testutil.Discard(), m.post)
		ff := withFaults(t, r)
		r.add(protocol.RunReport{ID: "a", TaskID: "t", Output: "out of a"})
		ff.set(true, short, nil)
		r.add(protocol.RunReport{ID: "b", TaskID: "t", Output: "out of b"})
		if ids, tail := journalRecords(t, spool); strings.Join(ids, ",") != "a" || tail != 0 {
			t.Fatalf("short %d: after the failed write the journal holds %v and %d stray bytes, want a alone", short, ids, tail)
		}
		ff.set(false, 0, nil)
		r.add(protocol.RunReport{ID: "c", TaskID: "t", Output: "out of c"})
		if ids, tail := journalRecords(t, spool); strings.Join(ids, ",") != "a,c" || tail != 0 {
			t.Fatalf("short %d: journal holds %v and %d stray bytes, want a,c", short, ids, tail)
		}
		if st := r.stats(); st.Pending != 3 || st.JournalBytes != journalSize(t, dir) {
			t.Fatalf("short %d: %+v; want 3 pending (b in memory) and the journal's size %d", short, st, journalSize(t, dir))
		}
	}
}

// When even cutting the fragment off fails (the disk went read-only), the
// journal is marked broken: no record is appended until the cut works, so
// none is glued to the fragment.
func TestJournalBrokenUntilTheFragmentIsCut(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	spool := filepath.Join(dir, journalFileName)
	m := newScriptedMaster()
	m.down = true
	r := newReporter(dir, 0, testutil.Discard(), m.post)
	ff := withFaults(t, r)
	r.add(protocol.RunReport{ID: "a", TaskID: "t"})
	ff.set(true, 7, syscall.EROFS)
	r.add(protocol.RunReport{ID: "b", TaskID: "t"})
	if _, tail := journalRecords(t, spool); tail != 7 {
		t.Fatalf("%d stray bytes, want the 7 of the fragment the cut could not remove", tail)
	}
	ff.set(false, 0, syscall.EROFS) // writes would work, the cut still not
	r.add(protocol.RunReport{ID: "c", TaskID: "t"})
	if _, tail := journalRecords(t, spool); tail != 7 {
		t.Fatalf("a record was written after an uncut fragment: %d stray bytes", tail)
	}
	if got := r.health.reason(); !strings.HasPrefix(got, "data directory read-only: runs.spool") {
		t.Fatalf("degraded reason %q", got)
	}
	ff.set(false, 0, nil)
	r.add(protocol.RunReport{ID: "d", TaskID: "t"})
	if ids, tail := journalRecords(t, spool); strings.Join(ids, ",") != "a,d" || tail != 0 {
		t.Fatalf("journal holds %v and %d stray bytes, want a,d", ids, tail)
	}
	if got := r.health.reason(); got != "" {
		t.Fatalf("degraded reason %q after a good write, want none", got)
	}
}

// Reports held only in memory at shutdown (the disk was full when they were
// made) are journaled when the disk has room again; when it has not, they are
// reported lost with their count, at Error, and never said to be kept.
// Start notices are memory only by design and not counted.
func TestReportsInMemoryAtShutdown(t *testing.T) {
	t.Parallel()
	for _, room := range []bool{true, false} {
		dir := t.TempDir()
		logs, log := newLogRecorder()
		m := newScriptedMaster()
		m.down = true
		r := newReporter(dir, 0, log, m.post)
		ff := withFaults(t, r)
		r.add(protocol.RunReport{ID: "j1", TaskID: "t", EndedAt: time.Now()})
		ff.set(true, 5, nil)
		for i := range 4 {
			r.add(protocol.RunReport{ID: fmt.Sprintf("m%d", i), TaskID: "t", EndedAt: time.Now()})
		}
		r.notice(protocol.RunReport{ID: "n1", TaskID: "t"})
		if room {
			ff.set(false, 0, nil)
		}
		ctx, cancel := context.WithCancel(context.Background())
		go r.run(ctx)
		cancel()
		<-r.done
		lost, kept := logs.find("run reports lost"), logs.find("kept in the journal")
		if !room {
			if len(lost) != 1 || lost[0].level != slog.LevelError || lost[0].attrs["lost"] != "4" || r.stats().Lost != 4 {
				t.Fatalf("disk still full: lost logs %+v, stats %+v; want one Error with lost=4", lost, r.stats())
			}
			// j1 is journaled: it is kept, and only it.
			if len(kept) != 1 {
				t.Fatalf("disk still full: %d 'kept in the journal' lines, want one (for j1)", len(kept))
			}
			if ids, tail := journalRecords(t, filepath.Join(dir, journalFileName)); strings.Join(ids, ",") != "j1" || tail != 0 {
				t.Fatalf("disk still full: journal %v, %d stray bytes", ids, tail)
			}
			continue
		}
		if len(lost) != 0 || r.stats().Lost != 0 || len(kept) != 1 || kept[0].attrs["journaled_now"] != "4" {
			t.Fatalf("room again: lost %+v, kept %+v; want the 4 journaled at stop", lost, kept)
		}
		m.down = false
		r2 := newReporter(dir, 0, log, m.post)
		ctx2, cancel2 := context.WithCancel(context.Background())
		go r2.run(ctx2)
		testutil.Eventually(t, 10*time.Second, func() bool { return m.total() == 5 }, "j1 and m0..m3 delivered by the next process")
		cancel2()
		<-r2.done
		if m.count("n1") != 0 {
			t.Fatal("a start notice was journaled")
		}
	}
}

// Without a journal (no data dir) undelivered reports at shutdown are lost,
// and said to be, with their count.
func TestReportsWithoutJournalAtShutdownCountedLost(t *testing.T) {
	t.Parallel()
	logs, log := newLogRecorder()
	m := newScriptedMaster()
	m.down = true
	r := newReporter("", 0, log, m.post)
	r.add(protocol.RunReport{ID: "a", TaskID: "t"})
	r.add(protocol.RunReport{ID: "b", TaskID: "t"})
	ctx, cancel := context.WithCancel(context.Background())
	go r.run(ctx)
	cancel()
	<-r.done
	if lost := logs.find("run reports lost"); len(lost) != 1 || lost[0].attrs["lost"] != "2" {
		t.Fatalf("lost logs %+v, want one with lost=2", lost)
	}
	if kept := logs.find("kept in the journal"); len(kept) != 0 {
		t.Fatalf("said to be kept in a journal that does not exist: %+v", kept)
	}
}

// A full disk makes the worker degraded with a reason in its health answer,
// logged once however many runs fail to be journaled; space coming back
// clears it, logged once; a second fault is logged again.
func TestDegradedReasonSetClearedAndLoggedOncePerChange(t *testing.T) {
	t.Parallel()
	logs, log := newLogRecorder()
	cfg := lifeConfig(t.TempDir(), "http://127.0.0.1:1")
	w, err := New(cfg, log)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = w.Stop(context.Background()) })
	if d := w.Health().Degraded; d != "" {
		t.Fatalf("fresh worker degraded: %q", d)
	}
	ff := withFaults(t, w.reports)
	ff.set(true, 3, nil)
	for i := range 50 {
		w.reports.add(protocol.RunReport{ID: fmt.Sprintf("r%d", i), TaskID: "t"})
	}
	d := w.Health().Degraded
	if !strings.HasPrefix(d, "data directory full: runs.spool: ") || !strings.Contains(d, "no space left on device") {
		t.Fatalf("degraded %q, want it to say the data directory is full", d)
	}
	if bad := logs.find("data directory not writable"); len(bad) != 1 || bad[0].level != slog.LevelError {
		t.Fatalf("%d 'not writable' lines for 50 failed writes, want one at Error", len(bad))
	}
	ff.set(false, 0, nil)
	w.reports.add(protocol.RunReport{ID: "ok1", TaskID: "t"})
	w.reports.add(protocol.RunReport{ID: "ok2", TaskID: "t"})
	if d := w.Health().Degraded; d != "" {
		t.Fatalf("still degraded after a good write: %q", d)
	}
	if good := logs.find("data directory writable again"); len(good) != 1 {
		t.Fatalf("%d 'writable again' lines, want one", len(good))
	}
	ff.set(true, 0, nil)
	w.reports.add(protocol.RunReport{ID: "r-again", TaskID: "t"})
	if bad := logs.find("data directory not writable"); len(bad) != 2 {
		t.Fatalf("%d 'not writable' lines after a second fault, want two", len(bad))
	}
	for _, rec := range logs.find("run report not journaled") {
		if rec.level > slog.LevelDebug {
			t.Fatalf("a per-run line logged at %s", rec.level)
		}
	}
}

// The fires file's writes count too: a fires file that cannot be written
// makes the worker degraded (logged once), and the next good save clears it.
func TestFiresFileFailureDegradesTheWorker(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	logs, log := newLogRecorder()
	f := newFanOutRunner(t)
	f.fires.health = newDataDirHealth(log)
	f.fires.load(dir, log)
	// A directory (not empty, so the save's cleanup cannot remove it) where
	// the temporary file goes: every save fails.
	tmp := filepath.Join(dir, FiresFile+".tmp")
	if err := os.MkdirAll(filepath.Join(tmp, "x"), 0o700); err != nil {
		t.Fatal(err)
	}
	for range 5 {
		f.writeFires(false)
	}
	if d := f.fires.health.reason(); !strings.HasPrefix(d, "data directory not writable: fires.json: ") {
		t.Fatalf("degraded %q", d)
	}
	if n := len(logs.find("data directory not writable")); n != 1 {
		t.Fatalf("%d lines for 5 failed saves, want one", n)
	}
	if err := os.RemoveAll(tmp); err != nil {
		t.Fatal(err)
	}
	f.writeFires(false)
	if d := f.fires.health.reason(); d != "" {
		t.Fatalf("still degraded after a good save: %q", d)
	}
}

// A clean stop that could not rewrite the fires file (a full disk) is still
// recognised as clean: StopFile, overwritten in place, says so. A kill is
// still called unclean, and a StopFile older than the fires file's last save
// vouches for nothing.
func TestCleanStopRecognisedWhenTheFiresFileIsStale(t *testing.T) {
	t.Parallel()
	saved := time.Now().Add(-time.Minute).Truncate(time.Second).UTC()
	stale := firesFile{SavedAt: saved, Clean: false, NextFire: saved.Add(time.Second), Tasks: map[string]time.Time{"t": saved}}
	for _, c := range []struct {
		name      string
		stop      func(l *lastFires)
		unclean   bool
		notBefore time.Time
	}{
		{"killed", func(l *lastFires) {}, true, saved.Add(time.Second + firesUncertain)},
		{"clean stop", func(l *lastFires) { l.markStopFile(true, saved.Add(30*time.Second)) }, false, saved.Add(30 * time.Second)},
		{"stale clean mark", func(l *lastFires) {
			l.markStopFile(true, saved.Add(-time.Hour))
		}, true, saved.Add(time.Second + firesUncertain)},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			if err := writeFileAtomic(filepath.Join(dir, FiresFile), stale); err != nil {
				t.Fatal(err)
			}
			var prev lastFires
			prev.load(dir, testutil.Discard())
			if c.name == "stale clean mark" {
				c.stop(&prev) // left by a process before the one that saved last
			} else {
				prev.markStopFile(false, time.Time{}) // the process starts
				c.stop(&prev)
			}
			logs, log := newLogRecorder()
			var next lastFires
			next.load(dir, log)
			warned := len(logs.find("did not stop cleanly")) == 1
			if warned != c.unclean {
				t.Fatalf("'did not stop cleanly' logged: %v, want %v", warned, c.unclean)
			}
			if _, nb, _, _ := next.take("t"); !nb.Equal(c.notBefore) {
				t.Fatalf("fires up to %s not counted as missed, want up to %s", nb, c.notBefore)
			}
			if !c.unclean && len(logs.find("stopped cleanly but could not save")) != 1 {
				t.Fatal("the clean stop with a stale fires file is not logged")
			}
		})
	}
}
