// Delayed tasks (ScheduleMaster's 延时任务): one-shot HTTP callbacks other
// applications create through the API, kept in the database and fired once,
// at their time, on one running worker by the leader master (see
// delayed_fire.go), their runs recorded like any other run (delayed_runs.go).

package master

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/schedulemaster-go/schedulemaster/protocol"
	"github.com/schedulemaster-go/schedulemaster/store"
	"github.com/uptrace/bun"
)

// ActorDelayed is the actor of the transitions the leader makes to delayed
// tasks by itself (a final failure, a reassignment).
const ActorDelayed = "delayed-tasks"

// DelayedConfig tunes the firing of delayed tasks; zero fields take the defaults.
type DelayedConfig struct {
	// Poll is how often the leader reads the database for tasks another
	// master created (default 2s); its own creations wake it at once.
	Poll time.Duration
	// Batch is how many due tasks one claim takes (default 500).
	Batch int
	// Concurrency bounds the sendings to workers in flight (default 64).
	Concurrency int
	// Timeout bounds the callback's HTTP request (default: the settings'
	// default HTTP timeout).
	Timeout time.Duration
	// ReportGrace is how long after the callback's timeout its run report
	// may take to arrive before the leader looks at the sending again
	// (default 30s); a new leader also waits this long before reassigning.
	ReportGrace time.Duration
	// LostAfter gives up a sending whose worker still runs but never
	// reported, counted from the sending (default 5m).
	LostAfter time.Duration
	// Backoff is the delay before the first retry, doubling with every
	// further attempt (default 10s), at most BackoffMax (default 10m).
	Backoff    time.Duration
	BackoffMax time.Duration
	// LateAfter marks a task late when its first sending leaves more than
	// this after its due time (default 5s).
	LateAfter time.Duration
	// Resend is the wait before sending a task again when no worker could
	// take it (none running, or the chosen one refused) (default 1s).
	Resend time.Duration
	// Lookahead is how long before its time a task is claimed (default
	// 500ms): it is sent at its time, the claim's work done ahead. A task
	// claimed is running: it can no longer be cancelled.
	Lookahead time.Duration
}

func (c DelayedConfig) withDefaults() DelayedConfig {
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	def(&c.Poll, 2*time.Second)
	def(&c.ReportGrace, 30*time.Second)
	def(&c.LostAfter, 5*time.Minute)
	def(&c.Backoff, 10*time.Second)
	def(&c.BackoffMax, 10*time.Minute)
	def(&c.LateAfter, 5*time.Second)
	def(&c.Resend, time.Second)
	def(&c.Lookahead, 500*time.Millisecond)
	if c.Batch <= 0 {
		c.Batch = 500
	}
	if c.Concurrency <= 0 {
		c.Concurrency = 64
	}
	return c
}

// delayedCfg is the delayed task configuration in force.
func (svc *DelayedTasks) delayedCfg() DelayedConfig {
	c := svc.cfg.Delayed.withDefaults()
	if c.Timeout <= 0 {
		c.Timeout = svc.settings.defaultTimeout()
	}
	return c
}

// DelayedTasks is the delayed-task service, reached with Master.Delayed:
// input, firing, runs and notifications. Its state is only the
// wake-ups and notifications; everything else is in the database.
type DelayedTasks struct {
	db       bun.IDB
	dialect  store.Dialect
	log      *slog.Logger
	cfg      *Config
	events   *eventLog
	lease    *leaseKeeper
	settings *settingsKeeper
	life     *lifecycle
	notify   *notifier
	runLists *slots
	// counts keeps the status counts of a large estate.
	counts *readCache

	once sync.Once
	wake chan struct{}
	// armed is the UnixNano the leader's timer waits for (0: none), so that
	// a creation wakes it only when it is due earlier.
	armed atomic.Int64
	// lookahead is how long before their time tasks are claimed now (see
	// crowdLookahead), in nanoseconds; 0 until the loop has looked.
	lookahead atomic.Int64
	// claimCost is the measured time a claim takes per task (an average of
	// the recent full batches), in nanoseconds; 0 until measured.
	claimCost atomic.Int64

	notifyOnce sync.Once
	notifyQ    chan delayedFailure
	dropped    atomic.Int64

	clientOnce sync.Once
	client     *Client

	// writeMu serialises the hot write transactions of delayed tasks (the
	// claims and the run ingest) on SQLite, which has one writer: waiting
	// here is first come, first served, where SQLite's busy handler sleeps
	// in steps of up to 100ms and lets a claim starve behind ingests.
	writeMu sync.Mutex
}

// delayedWriteLock takes writeMu on SQLite and returns its unlock; on
// MySQL, where writers of different rows do not wait for each other, it
// does nothing.
func (svc *DelayedTasks) delayedWriteLock() func() {
	if svc.dialect != store.SQLite {
		return func() {}
	}
	svc.writeMu.Lock()
	return svc.writeMu.Unlock
}

// delayedClient is the worker API client of sendings: it keeps as many idle
// connections per worker as sendings may be in flight, so that a burst of
// due tasks reuses connections instead of opening one per sending (the
// shared client keeps two per worker, for fleets of thousands).
func (svc *DelayedTasks) delayedClient() *Client {
	svc.clientOnce.Do(func() {
		c := NewClient(svc.cfg.CallTimeout)
		if tr, ok := c.http.Transport.(*http.Transport); ok {
			tr.MaxIdleConnsPerHost = svc.delayedCfg().Concurrency
			tr.IdleConnTimeout = time.Minute
		}
		svc.client = c
	})
	return svc.client
}

// delayedWake is the channel that wakes the leader's delayed loop.
func (svc *DelayedTasks) delayedWake() chan struct{} {
	svc.once.Do(func() { svc.wake = make(chan struct{}, 1) })
	return svc.wake
}

// pokeDelayed wakes the delayed loop when due (less the lookahead) comes
// before what it waits for.
func (svc *DelayedTasks) pokeDelayed(due time.Time) {
	if a := svc.armed.Load(); a != 0 && due.Add(-svc.currentLookahead(svc.delayedCfg())).UnixNano() >= a {
		return
	}
	select {
	case svc.delayedWake() <- struct{}{}:
	default:
	}
}

// MaxDelayedDispatches bounds the sendings of one delayed task (retries and
// reassignments together); the run reports name the task "ID:N", at most 36
// bytes like a task id.
const MaxDelayedDispatches = 999

// Delayed is a delayed task as the API and console show it.
type Delayed struct {
	ID string `json:"id"`
	// Project is the name of the project it belongs to.
	Project     string    `json:"project"`
	ProjectID   int64     `json:"-"`
	Status      string    `json:"status"`
	SourceApp   string    `json:"source_app"`
	Topic       string    `json:"topic"`
	ContentKey  string    `json:"content_key"`
	DueAt       time.Time `json:"due_at"`
	NotifyURL   string    `json:"notify_url"`
	NotifyBody  string    `json:"notify_body"`
	ContentType string    `json:"content_type"`
	Retries     int       `json:"retries"`
	// Attempts counts the attempts that came back with a result.
	Attempts  int      `json:"attempts"`
	Executors []string `json:"executors"`
	// Selector is its label selector ("" for none).
	Selector string   `json:"selector"`
	Keepers  []string `json:"keepers"`
	// Late says the first sending left more than the late bound after DueAt;
	// LateBy says by how much (a Go duration), when late.
	Late   bool   `json:"late"`
	LateBy string `json:"late_by,omitempty"`
	// Node is the worker of the current (running) or last (finished) sending.
	Node string `json:"node"`
	// NextAt is when a pending task is sent next (its due time, or a retry's).
	NextAt     *time.Time `json:"next_at"`
	LastError  string     `json:"last_error"`
	CreatedBy  string     `json:"created_by"`
	CreatedAt  time.Time  `json:"created_at"`
	FiredAt    *time.Time `json:"fired_at"`
	FinishedAt *time.Time `json:"finished_at"`
}

// LateDuration is how late the first sending left, 0 when not late.
func (d *Delayed) LateDuration() time.Duration {
	if !d.Late || d.FiredAt == nil {
		return 0
	}
	return d.FiredAt.Sub(d.DueAt)
}

// toDelayed is a delayed task fit to show: a password in its notify_url is
// masked for every role (the sending reads the stored row, not this view).
func toDelayed(r *store.DelayedTask) Delayed {
	d := Delayed{
		ID: r.ID, ProjectID: r.ProjectID, Status: r.Status, SourceApp: r.SourceApp, Topic: r.Topic, ContentKey: r.ContentKey,
		DueAt: r.DueAt.UTC(), NotifyURL: MaskURL(r.NotifyURL), NotifyBody: r.NotifyBody, ContentType: r.ContentType,
		Retries: r.Retries, Attempts: r.Attempts, Late: r.Late, Node: r.Node, LastError: r.LastError,
		CreatedBy: r.CreatedBy, CreatedAt: r.CreatedAt.UTC(), Executors: []string{}, Selector: r.Selector, Keepers: []string{},
	}
	_ = json.Unmarshal([]byte(r.Executors), &d.Executors)
	_ = json.Unmarshal([]byte(r.Keepers), &d.Keepers)
	if d.Executors == nil {
		d.Executors = []string{}
	}
	if d.Keepers == nil {
		d.Keepers = []string{}
	}
	utc := func(t time.Time) *time.Time {
		if t.IsZero() {
			return nil
		}
		u := t.UTC()
		return &u
	}
	if r.Status == store.DelayedPending {
		d.NextAt = utc(r.NextAt)
	}
	d.FiredAt, d.FinishedAt = utc(r.FiredAt), utc(r.FinishedAt)
	if late := d.LateDuration(); late > 0 {
		d.LateBy = late.Round(time.Millisecond).String()
	}
	return d
}

// newDelayedID is 32 random hex digits: with ":N" appended (the sending) it
// fits a run's task id, and it never looks like a task's UUID.
func newDelayedID() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// isDelayedID reports whether s has the form of a delayed task id.
func isDelayedID(s string) bool {
	if len(s) != 32 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}

// delayedRunTask is the task id of the run of a delayed task's sending seq.
func delayedRunTask(id string, seq int) string { return id + ":" + strconv.Itoa(seq) }

// parseDelayedRunTask splits a run's task id "ID:N" into the delayed task
// and its sending; ok is false for the ids of tasks.
func parseDelayedRunTask(s string) (id string, seq int, ok bool) {
	id, n, found := strings.Cut(s, ":")
	if !found || !isDelayedID(id) || len(n) == 0 || len(n) > 3 || n[0] == '0' {
		return "", 0, false
	}
	seq, err := strconv.Atoi(n)
	if err != nil || seq < 1 || seq > MaxDelayedDispatches {
		return "", 0, false
	}
	return id, seq, true
}

// delayedSpec is what a worker is sent for sending seq (attempt attempt) of
// a delayed task: a one-time HTTP task without retries (the master retries
// with backoff), posting the body to the callback with headers that let the
// callee tell the task and the attempt.
func delayedSpec(r *store.DelayedTask, seq, attempt int, timeout time.Duration, now time.Time) protocol.TaskSpec {
	title := "delayed " + r.SourceApp + "/" + r.Topic
	if len(title) > protocol.MaxTitleLen {
		title = strings.ToValidUTF8(title[:protocol.MaxTitleLen], "")
	}
	at := now.UTC()
	return protocol.TaskSpec{TaskDef: protocol.TaskDef{
		ID: delayedRunTask(r.ID, seq), Title: title, Type: protocol.TaskHTTP,
		Schedule: protocol.Schedule{Kind: protocol.ScheduleOnce, At: &at},
		HTTP: &protocol.HTTPSpec{Method: "POST", URL: r.NotifyURL, Body: r.NotifyBody, ContentType: r.ContentType,
			Headers: map[string]string{
				"X-SM-Delayed-Id": r.ID, "X-SM-Source-App": r.SourceApp, "X-SM-Topic": r.Topic,
				"X-SM-Content-Key": r.ContentKey, "X-SM-Attempt": strconv.Itoa(attempt),
			}},
		Timeout: protocol.Duration(timeout),
	}, Executors: 1}
}

// CreateDelayed validates and stores a new pending delayed task. Creating
// the same source_app, topic and content_key again while one is pending or
// running gives that one and created false (nothing is changed).
func (svc *DelayedTasks) CreateDelayed(ctx context.Context, in DelayedInput, by string) (_ *Delayed, created bool, err error) {
	now := time.Now()
	p, err := projectNamed(ctx, svc.db, strings.TrimSpace(in.Project))
	if err == nil {
		ctx = withEventProject(ctx, p.ID)
		err = authorize(ctx, p.ID, ActEdit, projectNotFound(p.Name))
	}
	var row *store.DelayedTask
	if err == nil {
		row, err = svc.checkDelayedInput(ctx, &in, now, p)
	}
	if err != nil {
		svc.events.record(ctx, "delayed.create", store.TargetDelayed, "", err, in.SourceApp+"/"+in.Topic+"/"+in.ContentKey)
		return nil, false, err
	}
	row.CreatedBy = by
	got, created, err := store.CreateDelayed(ctx, svc.db, row)
	if err != nil {
		return nil, false, fmt.Errorf("master: create delayed task: %w", err)
	}
	d := toDelayed(got)
	d.Project = p.Name
	if got.ProjectID != p.ID {
		if gp, err := store.GetProjectByID(ctx, svc.db, got.ProjectID); err == nil {
			d.Project = gp.Name
		}
	}
	if !created {
		svc.log.Info("delayed task exists: idempotent create", "delayed", d.ID, "source_app", d.SourceApp, "topic", d.Topic, "status", d.Status)
		return &d, false, nil
	}
	svc.log.Info("delayed task created", "delayed", d.ID, "source_app", d.SourceApp, "topic", d.Topic, "due", d.DueAt, "by", by)
	svc.events.record(ctx, "delayed.create", store.TargetDelayed, d.ID, nil,
		fmt.Sprintf("%s/%s/%s due %s", d.SourceApp, d.Topic, d.ContentKey, d.DueAt.Format(time.RFC3339)))
	svc.pokeDelayed(d.DueAt)
	return &d, true, nil
}

// delayedNotFound is the answer about a delayed task that does not exist,
// and about one of a project whoever asks may not read.
func delayedNotFound(id string) error {
	return Errorf(KindNotFound, "delayed task %s does not exist", printable(id))
}

// GetDelayed returns one delayed task whoever asks may read.
func (svc *DelayedTasks) GetDelayed(ctx context.Context, id string) (*Delayed, error) {
	return svc.delayedFor(ctx, id, ActRead)
}

// delayedFor returns delayed task id if whoever asks may do a to it.
func (svc *DelayedTasks) delayedFor(ctx context.Context, id string, a Action) (*Delayed, error) {
	r, err := store.GetDelayed(ctx, svc.db, id)
	if errors.Is(err, store.ErrNotFound) {
		return nil, delayedNotFound(id)
	}
	if err != nil {
		return nil, err
	}
	if err := authorize(ctx, r.ProjectID, a, delayedNotFound(id)); err != nil {
		return nil, err
	}
	d := toDelayed(r)
	if p, err := store.GetProjectByID(ctx, svc.db, r.ProjectID); err == nil {
		d.Project = p.Name
	}
	return &d, nil
}

// ListDelayed returns a page of delayed tasks, newest first, and the total,
// counted up to ListCountCap unless f says otherwise.
func (svc *DelayedTasks) ListDelayed(ctx context.Context, f store.DelayedFilter) ([]Delayed, int, error) {
	f.CountLimit = countLimit(f.CountLimit)
	if f.Status != "" && !isDelayedStatus(f.Status) {
		return nil, 0, Errorf(KindInvalid, "status must be one of %s", strings.Join(store.DelayedStatuses, ", "))
	}
	f.Projects = restrictProjects(ctx, f.Projects)
	rows, total, err := store.ListDelayed(ctx, svc.db, f)
	if err != nil {
		return nil, 0, err
	}
	names, err := store.ProjectNames(ctx, svc.db)
	if err != nil {
		return nil, 0, err
	}
	out := make([]Delayed, len(rows))
	for i := range rows {
		out[i] = toDelayed(&rows[i])
		out[i].Project = names[rows[i].ProjectID]
	}
	return out, total, nil
}

func isDelayedStatus(s string) bool {
	for _, v := range store.DelayedStatuses {
		if v == s {
			return true
		}
	}
	return false
}

// DelayedRuns returns a page of a delayed task's runs, newest first.
func (svc *DelayedTasks) DelayedRuns(ctx context.Context, id string, limit, offset int) ([]store.Run, int, error) {
	if _, err := svc.delayedFor(ctx, id, ActRead); err != nil {
		return nil, 0, err
	}
	release, err := svc.runLists.acquire(ctx, RunListSlots, 0)
	if err != nil {
		return nil, 0, err
	}
	defer release()
	return store.ListDelayedRuns(ctx, svc.db, id, limit, offset)
}

// CancelDelayed cancels a pending delayed task. A running one (being sent
// now) or a finished one cannot be cancelled: KindState with a sentence.
func (svc *DelayedTasks) CancelDelayed(ctx context.Context, id string) (_ *Delayed, err error) {
	defer func() { svc.events.record(ctx, "delayed.cancel", store.TargetDelayed, id, err, "") }()
	d, err := svc.delayedFor(ctx, id, ActOperate)
	if err != nil {
		return nil, err
	}
	ctx = withEventProject(ctx, d.ProjectID)
	err = store.CancelDelayed(ctx, svc.db, id, time.Now())
	if err != nil && !errors.Is(err, store.ErrConflict) {
		return nil, err
	}
	d, gerr := svc.GetDelayed(ctx, id)
	if gerr != nil {
		return nil, gerr
	}
	if err != nil {
		switch d.Status {
		case store.DelayedRunning:
			return nil, Errorf(KindState, "delayed task %s is due and on its way to worker %s; it can no longer be cancelled", id, d.Node)
		case store.DelayedCancelled:
			return nil, Errorf(KindState, "delayed task %s is cancelled already", id)
		}
		return nil, Errorf(KindState, "delayed task %s has finished (%s); only a pending task can be cancelled", id, d.Status)
	}
	svc.log.Info("delayed task cancelled", "delayed", id, "by", ActorFrom(ctx))
	return d, nil
}

// DelayedCounts counts the delayed tasks by status, of the projects given
// (nil: every one) that whoever asks may read.
// From LargeEstateRows delayed tasks on, the counts are kept for
// ReadCacheTTL and refreshed in the background.
func (svc *DelayedTasks) DelayedCounts(ctx context.Context, projects []int64) (map[string]int, error) {
	projects = restrictProjects(ctx, projects)
	v, _, err := svc.counts.get(ctx, "delayed-counts|"+projectsKey(projects), func(ctx context.Context) (any, int, error) {
		counts, err := store.CountDelayedByStatus(ctx, svc.db, projects)
		n := 0
		for _, c := range counts {
			n += c
		}
		return counts, n, err
	})
	if err != nil {
		return nil, err
	}
	return v.(map[string]int), nil
}
