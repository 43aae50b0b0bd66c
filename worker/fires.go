package worker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/schedulemaster-go/schedulemaster/protocol"
)

// FiresFile is the name, in the worker's data dir, of the file that keeps the
// last fire of each task across restarts, so that the fires due while the
// worker was down are counted when the master gives it its tasks again.
const FiresFile = "fires.json"

// StopFile is the name, in the worker's data dir, of a small file that says
// whether the last process stopped cleanly and when. FiresFile says so too,
// but on a full disk it cannot be rewritten at the stop; StopFile has a fixed
// size and is overwritten in place, which needs no new space, so a clean stop
// is recognised even then.
const StopFile = "stopped"

// stopFileSize is StopFile's fixed size: room for "clean " and a time.
const stopFileSize = 64

// firesSaveEvery is how often the last fires are written when they changed:
// a fire costs an atomic store, not a write.
const firesSaveEvery = time.Second

// maxMissedCount bounds the fires counted after a restart: a per-second
// schedule down for weeks would otherwise take long to count one by one.
const maxMissedCount = 100_000

// firesFile is the content of FiresFile.
type firesFile struct {
	SavedAt time.Time            `json:"saved_at"`
	Tasks   map[string]time.Time `json:"tasks"` // task id → scheduled time of its last fire handled here
	// Clean says the process had stopped scheduling when it wrote the
	// file: every fire after it was missed. Otherwise the process may have
	// been killed after it started fires it had not saved yet.
	Clean bool `json:"clean"`
	// NextFire is the first fire of any task scheduled when the file was
	// written (zero when none): the fires a killed process may have started
	// without saving them lie within firesUncertain of it.
	NextFire time.Time `json:"next_fire,omitzero"`
	// NotBefore carries the bound of an earlier killed process whose last
	// fires are still in the file: fires up to it may have run unsaved.
	NotBefore time.Time `json:"not_before,omitzero"`
}

// firesUncertain is how long after the next fire a killed process may have
// gone on starting fires without saving them: one save period, and as much
// again for a save that came late.
const firesUncertain = 2 * firesSaveEvery

// lastFires keeps the last fire of the tasks this node does not schedule at
// the moment: those the previous process left in FiresFile, until the master
// starts them again, and those of a process that is stopping. The last fire
// of a scheduled task lives in its taskJob (an atomic, set by fireGroup).
type lastFires struct {
	path     string // "" : nothing is written (no data dir)
	stopPath string // StopFile in the data dir
	log      *slog.Logger
	// health is told of every failed and successful write: the worker's
	// degraded state (shared with the run journal). nil in some tests.
	health *dataDirHealth
	done   chan struct{} // closed when save has written for the last time

	writeMu sync.Mutex // one write of the file at a time

	mu    sync.Mutex
	saved map[string]time.Time
	// notBefore: fires at or before it may have run in a previous process
	// that was killed (an unclean file); they are not counted as missed.
	notBefore time.Time
	// until: fires at or after it are the master's to account for (it saw
	// this node down from then on: protocol.StartupRequest.DownSince); zero
	// when the worker counts every missed fire.
	until time.Time
	// upSince: while a Startup schedules its tasks, when the master's
	// misfire windows for them ended (protocol.StartupRequest.RunningSince);
	// the fires after it, before a task is scheduled again, ran nowhere.
	upSince time.Time

	dirty atomic.Bool
}

// load reads FiresFile from dir; a missing file is an empty one, a corrupt
// one is logged and ignored (the worker then cannot count missed fires).
func (l *lastFires) load(dir string, log *slog.Logger) {
	l.log = log
	if dir == "" {
		return
	}
	l.path = filepath.Join(dir, FiresFile)
	l.stopPath = filepath.Join(dir, StopFile)
	l.done = make(chan struct{})
	data, err := os.ReadFile(l.path)
	if errors.Is(err, fs.ErrNotExist) {
		return
	}
	var f firesFile
	if err == nil {
		err = json.Unmarshal(data, &f)
	}
	if err != nil {
		log.Error("cannot read the last fires of the previous run: fires missed while this worker was down are not counted",
			"file", l.path, "err", err)
		return
	}
	unclean := !f.Clean
	// A clean stop that could not rewrite the file (a full disk) is in
	// StopFile, written after the file's last save: fires up to the stop
	// may have run unsaved, the ones after it were missed.
	var cleanAt time.Time
	if at, ok := readStopFile(l.stopPath); unclean && ok && !at.Before(f.SavedAt) {
		unclean, cleanAt = false, at.UTC()
	}
	l.mu.Lock()
	l.saved = f.Tasks
	l.notBefore = f.NotBefore
	if end := f.NextFire.Add(firesUncertain); unclean && !f.NextFire.IsZero() && end.After(l.notBefore) {
		l.notBefore = end
	}
	if cleanAt.After(l.notBefore) {
		l.notBefore = cleanAt
	}
	l.mu.Unlock()
	if len(f.Tasks) > 0 {
		log.Info("last fires of the previous run read", "file", l.path, "tasks", len(f.Tasks), "saved_at", f.SavedAt)
	}
	switch {
	case len(f.Tasks) == 0:
	case unclean && !l.notBefore.IsZero():
		log.Warn("the previous run did not stop cleanly: fires it may have started without saving them are not counted as missed",
			"from", f.NextFire, "to", l.notBefore)
	case !cleanAt.IsZero():
		log.Info("the previous run stopped cleanly but could not save its last fires: fires up to its stop are not counted as missed",
			"saved_at", f.SavedAt, "stopped_at", cleanAt)
	}
}

// readStopFile reads StopFile: the time of a clean stop, or false when the
// last process did not stop cleanly (or the file is missing or unreadable).
func readStopFile(path string) (time.Time, bool) {
	if path == "" {
		return time.Time{}, false
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return time.Time{}, false
	}
	rest, ok := strings.CutPrefix(strings.TrimSpace(string(data)), "clean ")
	if !ok {
		return time.Time{}, false
	}
	at, err := time.Parse(time.RFC3339Nano, rest)
	return at, err == nil
}

// markStopFile overwrites StopFile in place with "running" (at start) or
// "clean <time>" (at a clean stop), padded to its fixed size. When "running"
// cannot be written the file is removed: a stale "clean" must never vouch
// for a process that may be killed.
func (l *lastFires) markStopFile(clean bool, at time.Time) {
	if l.stopPath == "" {
		return
	}
	text := "running"
	if clean {
		text = "clean " + at.UTC().Format(time.RFC3339Nano)
	}
	buf := []byte(fmt.Sprintf("%-*s\n", stopFileSize-1, text))
	f, err := os.OpenFile(l.stopPath, os.O_CREATE|os.O_WRONLY, 0o600)
	if err == nil {
		_, err = f.WriteAt(buf, 0)
		if err == nil {
			err = f.Sync()
		}
		if cerr := f.Close(); err == nil {
			err = cerr
		}
	}
	if err == nil {
		return
	}
	if !clean {
		if rerr := os.Remove(l.stopPath); rerr != nil && !errors.Is(rerr, fs.ErrNotExist) {
			l.log.Error("cannot mark this run as started: a later start may take it for a clean stop", "file", l.stopPath, "err", rerr)
		}
		return
	}
	l.log.Error("cannot record the clean stop: the next start will say this run did not stop cleanly", "file", l.stopPath, "err", err)
}

// touch notes that a last fire changed.
func (l *lastFires) touch() {
	if !l.dirty.Load() {
		l.dirty.Store(true)
	}
}

// take returns and forgets the kept last fire of a task, and the time
// at or before which fires may have run unsaved (zero: none).
func (l *lastFires) take(id string) (last, notBefore, until time.Time, ok bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	last, ok = l.saved[id]
	if ok {
		delete(l.saved, id)
	}
	return last, l.notBefore, l.until, ok
}

// handOver makes the fires at or after since the master's to account for:
// it saw this node down from then on. The worker still counts those before.
func (l *lastFires) handOver(since time.Time) {
	l.mu.Lock()
	l.until = since
	l.mu.Unlock()
}

// handUp sets (zero: clears) when the master's misfire windows for the
// tasks being scheduled ended.
func (l *lastFires) handUp(since time.Time) {
	l.mu.Lock()
	l.upSince = since
	l.mu.Unlock()
}

// upFrom returns handUp's time.
func (l *lastFires) upFrom() time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.upSince
}

// keep holds the last fire of a task leaving the schedule as the process stops.
func (l *lastFires) keep(tj *taskJob) {
	ns := tj.lastFire.Load()
	if ns == 0 {
		return
	}
	l.mu.Lock()
	if l.saved == nil {
		l.saved = map[string]time.Time{}
	}
	l.saved[tj.spec.ID] = time.Unix(0, ns).UTC()
	l.mu.Unlock()
	l.touch()
}

// forget drops the last fire of a task stopped on purpose.
func (l *lastFires) forget(id string) {
	l.mu.Lock()
	_, ok := l.saved[id]
	delete(l.saved, id)
	l.mu.Unlock()
	if ok {
		l.touch()
	}
}

// retain drops the kept last fires of tasks not in want.
func (l *lastFires) retain(want map[string]bool) {
	l.mu.Lock()
	n := len(l.saved)
	for id := range l.saved {
		if !want[id] {
			delete(l.saved, id)
		}
	}
	changed := n != len(l.saved)
	l.mu.Unlock()
	if changed {
		l.touch()
	}
}

// saveFires writes FiresFile every firesSaveEvery while last fires change,
// and once more when ctx ends (after the scheduler stopped). start writes it
// too when it takes a task's last fire. What a killed process started without
// saving is bounded by the file's next fire (see firesUncertain).
func (r *runner) saveFires(ctx context.Context) {
	l := &r.fires
	if l.path == "" {
		return
	}
	defer close(l.done)
	t := time.NewTicker(firesSaveEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			// Stop has stopped scheduling first: nothing fires any more.
			r.writeFires(true)
			l.markStopFile(true, time.Now())
			return
		case <-t.C:
			if l.dirty.Swap(false) {
				r.writeFires(false)
			}
		}
	}
}

// writeFires writes every known last fire to FiresFile atomically: a new
// file renamed over the old one. clean: nothing is scheduled any more.
func (r *runner) writeFires(clean bool) {
	l := &r.fires
	if l.path == "" {
		return
	}
	l.writeMu.Lock()
	defer l.writeMu.Unlock()
	now := time.Now()
	f := firesFile{SavedAt: now.UTC(), Tasks: map[string]time.Time{}, Clean: clean}
	r.mu.Lock()
	for id, tj := range r.jobs {
		if ns := tj.lastFire.Load(); ns != 0 {
			f.Tasks[id] = time.Unix(0, ns).UTC()
		}
	}
	for _, g := range r.groups {
		if next := g.next(now); !next.IsZero() && (f.NextFire.IsZero() || next.Before(f.NextFire)) {
			f.NextFire = next.UTC()
		}
	}
	r.mu.Unlock()
	l.mu.Lock()
	for id, t := range l.saved {
		if _, ok := f.Tasks[id]; !ok {
			f.Tasks[id] = t
		}
	}
	f.NotBefore = l.notBefore
	l.mu.Unlock()
	if err := writeFileAtomic(l.path, f); err != nil {
		// Logged once per change by health, not at every save.
		l.health.failed(FiresFile, err, "the tasks' last fires are not saved, so fires missed during a restart may go uncounted")
		_ = os.Remove(l.path + ".tmp") // a partial temporary file holds space
		return
	}
	l.health.ok(FiresFile)
}

func writeFileAtomic(path string, v any) error {
	data, err := json.Marshal(v)
	if err != nil {
		return err
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// restarted applies the task's misfire policy to the fires it missed since
// the last fire the previous process handled (kept in FiresFile): when
// tj is started again, the fires from that one to now ran nowhere.
// Called under r.mu for a task just scheduled; it reports whether the task
// had a last fire from the previous process.
func (r *runner) restarted(tj *taskJob, now time.Time) bool {
	r.handedUp(tj)
	last, notBefore, until, ok := r.fires.take(tj.spec.ID)
	if !ok {
		return false
	}
	after := last
	if notBefore.After(after) {
		// The previous process was killed: its fires up to notBefore
		// may have run without being saved. Counting them could run a
		// catch-up twice; leaving them out loses at most those seconds.
		after = notBefore
	}
	if tj.lastFire.Load() < last.UnixNano() {
		tj.lastFire.Store(last.UnixNano()) // saved again until its next fire
	}
	spec := tj.current()
	// Only a task this worker runs alone has certainly missed these fires.
	// With several executors another one may have claimed and run them (or,
	// under broadcast, the master re-sharded the work among the executors
	// that stayed up): those are left alone. A paused task would have skipped
	// them anyway.
	if spec.Executors > 1 || spec.Paused {
		return true
	}
	var n int
	var first, lastMissed time.Time
	var more bool
	back := tj.since
	if !until.IsZero() && until.Before(back) {
		// The master accounts for the fires from until on (it saw this
		// node down then): count only those before.
		back = until
		c := tj.plan.Fires(after, back.Add(-time.Nanosecond), maxMissedCount)
		n, first, lastMissed, more = c.N, c.First, c.Last, c.More
	} else {
		n, first, lastMissed, more = r.countMissed(tj, after)
	}
	if n == 0 {
		return true
	}
	r.bg.Add(1)
	go func() {
		defer r.bg.Done()
		if spec.Misfire == protocol.MisfireRunOnce {
			r.log.Info("misfire after restart: catch-up run", "task", spec.ID, "first_missed", first, "missed", n)
			r.bg.Add(1) // until the catch-up run has ended
			r.runCatchUp(spec, catchUp{n: n, first: first, last: lastMissed, more: more}, r.newRunID(), &r.bg)
			return
		}
		r.reports.add(restartMisfireReport(r.node(), spec, n, first, lastMissed, more, last, back))
	}()
	return true
}

// handedUp applies the task's misfire policy to the fires between the end
// of the master's misfire window for it (it recorded this node running
// again) and now, when the task is scheduled again: the registration's
// answer was on its way, and nobody ran them. A task this worker does not
// run alone, or a paused one, is left alone (see restarted).
func (r *runner) handedUp(tj *taskJob) {
	up := r.fires.upFrom()
	spec := tj.current()
	if up.IsZero() || spec.Executors > 1 || spec.Paused {
		return
	}
	c := tj.plan.Fires(up, tj.since.Add(-time.Nanosecond), maxMissedCount)
	if c.N == 0 {
		return
	}
	r.bg.Add(1)
	go func() {
		defer r.bg.Done()
		if spec.Misfire == protocol.MisfireRunOnce {
			r.log.Info("misfire while the master handed the task back: catch-up run", "task", spec.ID, "first_missed", c.First, "missed", c.N)
			r.bg.Add(1) // until the catch-up run has ended
			r.runCatchUp(spec, catchUp{n: c.N, first: c.First, last: c.Last, more: c.More}, r.newRunID(), &r.bg)
			return
		}
		why := fmt.Sprintf("misfire: the fire at %s came while the master was giving this worker its tasks back", c.First.Format(time.RFC3339))
		if c.N > 1 {
			why = fmt.Sprintf("misfire: %d fires from %s to %s came while the master was giving this worker its tasks back",
				c.N, c.First.Format(time.RFC3339), c.Last.Format(time.RFC3339))
		}
		r.reports.add(skippedReport(r.node(), &queuedFire{spec: spec, fire: c.First, id: newRunID()}, why))
	}()
}

// missedKey and missedCount cache a count of missed fires while a restarted
// worker gets its tasks back: the tasks of one schedule share their last
// fire, and a per-second cron down for a day is 86,400 steps to count.
type missedKey struct {
	group   *fireGroup
	after   time.Time
	startAt int64 // a start_at that passed is not in the group's key but bounds the count
}

type missedCount struct {
	before      time.Time // the count is of the fires before it
	next        time.Time // the group's first fire at or after before
	n           int
	first, last time.Time
	more        bool
}

// countMissed counts the fires of tj's plan strictly after after and before
// it joined its group (at most maxMissedCount), reusing the count of a task of the same schedule when no fire lies
// between the two joins. Called under r.mu.
func (r *runner) countMissed(tj *taskJob, after time.Time) (n int, first, last time.Time, more bool) {
	k := missedKey{group: tj.group, after: after}
	if tj.spec.StartAt != nil {
		k.startAt = tj.spec.StartAt.UnixNano()
	}
	if c, ok := r.missed[k]; ok && !tj.since.Before(c.before) && (c.next.IsZero() || !tj.since.After(c.next)) {
		return c.n, c.first, c.last, c.more
	}
	// Strictly before it joined: a fire at that instant is its own.
	c := tj.plan.Fires(after, tj.since.Add(-time.Nanosecond), maxMissedCount)
	n, first, last, more = c.N, c.First, c.Last, c.More
	if r.missed == nil {
		r.missed = map[missedKey]missedCount{}
	}
	r.missed[k] = missedCount{before: tj.since, next: tj.group.next(tj.since.Add(-time.Nanosecond)), n: n, first: first, last: last, more: more}
	return n, first, last, more
}

// restartMisfireReport is the skipped run that stands for the fires missed
// while the worker was down.
// With more, the count stopped at maxMissedCount: the window ends at back,
// when the task was scheduled again.
func restartMisfireReport(node string, spec protocol.TaskSpec, n int, first, last time.Time, more bool, prev, back time.Time) protocol.RunReport {
	why := fmt.Sprintf("misfire: this worker was down at this fire (its last fire of the task before was %s)", prev.Format(time.RFC3339))
	switch {
	case more:
		why = fmt.Sprintf("misfire: this worker was down for %d or more fires from %s until %s (its last fire of the task before was %s)",
			n, first.Format(time.RFC3339), back.UTC().Format(time.RFC3339), prev.Format(time.RFC3339))
	case n > 1:
		why = fmt.Sprintf("misfire: this worker was down for %d fires from %s to %s (its last fire of the task before was %s)",
			n, first.Format(time.RFC3339), last.Format(time.RFC3339), prev.Format(time.RFC3339))
	}
	q := &queuedFire{spec: spec, fire: first, id: newRunID()}
	return skippedReport(node, q, why)
}
