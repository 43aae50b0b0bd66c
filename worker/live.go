package worker

import (
	"context"
	"encoding/hex"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/schedulemaster-go/schedulemaster/protocol"
)

// noticeEvery is how often the worker looks for runs that have lasted
// protocol.LiveNoticeAfter and sends their start notices.
const noticeEvery = 250 * time.Millisecond

// liveRuns are the runs in progress on this worker, by report id: what the
// master asks for to show a run's output so far, and to kill it. Every
// attempt is listed while it executes; only those lasting longer than
// noticeAfter are announced to the master.
type liveRuns struct {
	mu   sync.Mutex
	runs map[runID]*liveRun
	pool sync.Pool // *liveRun of ended attempts, for reuse

	// noticeAfter is protocol.LiveNoticeAfter, shorter in tests.
	noticeAfter time.Duration
}

// liveRun is one attempt in progress. Its fields are written under
// liveRuns.mu, except out (a tailBuffer has its own lock).
type liveRun struct {
	rep protocol.RunReport // the start notice, ID empty until it is needed
	id  runID
	// def is the attempt's task; valid while the attempt is listed (its
	// fire is reused only after it ended).
	def     *protocol.TaskDef
	out     *tailBuffer // shell: its output so far
	scrub   *protocol.Scrubber
	cancel  context.CancelFunc
	by      string // who killed it, when killed
	killed  bool
	noticed bool
}

// add lists an attempt that has started; cancel ends it.
func (l *liveRuns) add(id runID, rep *protocol.RunReport, def *protocol.TaskDef, out *tailBuffer, cancel context.CancelFunc, scrub *protocol.Scrubber) *liveRun {
	lr, _ := l.pool.Get().(*liveRun)
	if lr == nil {
		lr = &liveRun{}
	}
	*lr = liveRun{id: id, def: def, out: out, cancel: cancel, scrub: scrub}
	// The report fields a notice needs, copied without the id's text.
	lr.rep = protocol.RunReport{TaskID: rep.TaskID, Node: rep.Node, ScheduledAt: rep.ScheduledAt,
		StartedAt: rep.StartedAt, Attempt: rep.Attempt, Manual: rep.Manual, TaskVersion: rep.TaskVersion,
		WorkflowRun: rep.WorkflowRun, WorkflowStep: rep.WorkflowStep}
	l.mu.Lock()
	if l.runs == nil {
		l.runs = map[runID]*liveRun{}
	}
	l.runs[id] = lr
	l.mu.Unlock()
	return lr
}

// done removes an attempt that ended and says whether it was killed, and by
// whom. A notice sent for it is queued before the final report the caller
// adds next, since both happen under l.mu or after it.
func (l *liveRuns) done(lr *liveRun) (killed bool, by string) {
	l.mu.Lock()
	delete(l.runs, lr.id)
	killed, by = lr.killed, lr.by
	l.mu.Unlock()
	*lr = liveRun{}
	l.pool.Put(lr)
	return killed, by
}

// kill cancels the attempt with report id s: its HTTP request is abandoned
// or its shell process group killed, and it is reported as killed. It
// reports whether the attempt was in progress here.
func (l *liveRuns) kill(s, by string) bool {
	id, ok := parseRunID(s)
	if !ok {
		return false
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	lr := l.runs[id]
	if lr == nil {
		return false
	}
	if !lr.killed {
		lr.killed, lr.by = true, by
		lr.cancel()
	}
	return true
}

// progress returns the attempt with report id s and its output so far.
func (l *liveRuns) progress(s string) (protocol.RunProgress, bool) {
	id, ok := parseRunID(s)
	if !ok {
		return protocol.RunProgress{}, false
	}
	l.mu.Lock()
	lr := l.runs[id]
	if lr == nil {
		l.mu.Unlock()
		return protocol.RunProgress{}, false
	}
	p := protocol.RunProgress{ID: s, TaskID: lr.rep.TaskID, Attempt: lr.rep.Attempt, StartedAt: lr.rep.StartedAt,
		Killing: lr.killed}
	if d := lr.def; d.Type == protocol.TaskHTTP && d.HTTP != nil {
		// Worked out here, not at every fire: few runs are ever looked at.
		method := d.HTTP.Method
		if method == "" {
			method = "GET"
		}
		// The path may hold a secret param: masked like the output.
		p.Waiting = "waiting for the answer to " + method + " " + lr.scrub.Scrub(shownURL(protocol.ExpandParams(d.HTTP.URL, d.Params)))
	}
	out := lr.out
	l.mu.Unlock()
	if out != nil {
		p.Output, p.BinaryOutput = out.Output()
		p.OutputBytes = out.written()
	}
	return p, true
}

// notices queues, through add, a start notice for every attempt that has
// lasted noticeAfter and has none yet.
func (l *liveRuns) notices(now time.Time, add func(protocol.RunReport)) {
	after := l.noticeAfter
	if after <= 0 {
		after = protocol.LiveNoticeAfter
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	for id, lr := range l.runs {
		if lr.noticed || lr.killed || now.Sub(lr.rep.StartedAt) < after {
			continue
		}
		lr.noticed = true
		rep := lr.rep
		rep.ID, rep.Result = id.String(), protocol.ResultRunning
		add(rep)
	}
}

// noticeLoop sends start notices until ctx ends.
func (r *runner) noticeLoop(ctx context.Context, done chan<- struct{}) {
	defer close(done)
	t := time.NewTicker(noticeEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			r.live.notices(now, r.reports.notice)
		}
	}
}

// parseRunID reads a report id written by runID.String.
func parseRunID(s string) (runID, bool) {
	var id runID
	if len(s) != 36 || s[8] != '-' || s[13] != '-' || s[18] != '-' || s[23] != '-' {
		return id, false
	}
	hexs := s[0:8] + s[9:13] + s[14:18] + s[19:23] + s[24:]
	if _, err := hex.Decode(id[:], []byte(hexs)); err != nil {
		return id, false
	}
	return id, true
}

// shownURL is a URL as the run page may show it: scheme, host and path, no
// user info or query (they may hold credentials).
func shownURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return "its URL"
	}
	p := u.EscapedPath()
	if len(p) > 200 {
		p = p[:200] + "…"
	}
	return u.Scheme + "://" + strings.ToLower(u.Host) + p
}
